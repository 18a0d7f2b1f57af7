#!/usr/bin/env python3
"""Writes tests/golden/hf_marian/translate_cli.txt from hf_marian/beam.json (the
Hugging Face generate() results of tools/gen_marian_golden.py), in the form the
shell test tests/cli_translate.sh reads:

  src <ids>                   one line per source sentence (its valid tokens, eos included)
  run <name> <ot translate flags>
  want <ids>                  one line per sentence: generated tokens after the
                              decoder start, up to (not including) the eos

Usage: tools/gen_translate_cli_golden.py [tests/golden/hf_marian]
"""
import json
import os
import sys


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "tests/golden/hf_marian"
    with open(os.path.join(d, "beam.json")) as f:
        j = json.load(f)
    gen = j["generation_config_in_effect"]
    eos = gen["eos_token_id"]
    out = []
    for ids, mask in zip(j["src_ids"], j["src_mask"]):
        out.append("src " + " ".join(str(t) for t, m in zip(ids, mask) if m))
    for name, r in sorted(j["runs"].items()):
        k = r["kwargs"]
        flags = ["--beam", str(k["num_beams"]), "--max-length", str(k["max_length"]),
                 "--max-len-a", "0", "--max-len-b", "0"]
        if k["num_beams"] > 1:
            flags += ["--length-penalty", repr(k["length_penalty"])]
            if k["early_stopping"] is True:
                flags.append("--early-stopping")
        out.append("run %s %s" % (name, " ".join(flags)))
        for seq, n in zip(r["sequences"], r["lengths"]):
            toks = seq[1:n]
            if toks and toks[-1] == eos:
                toks = toks[:-1]
            out.append(("want " + " ".join(str(t) for t in toks)).rstrip())
    with open(os.path.join(d, "translate_cli.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
