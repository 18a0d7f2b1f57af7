#!/usr/bin/env python3
"""Checks a directory written by `ot export` with transformers (not run by CI: CI has no
Python; run it after changing ot_model_save_hf or `ot export`).

Usage (from the repository root; PY: a Python with torch + transformers + safetensors):
  build/ot export --model CHECKPOINT --out DIR --check-logits DIR.check.safetensors
  $PY tools/check_hf_export.py --dir DIR --check DIR.check.safetensors --ot build/ot \\
      [--src data/translate/valid.en] [--limit 40] [--max-length 24]

Checks, each printed with OK or FAILED (exit status 1 if any failed):
  1. MarianMTModel.from_pretrained(DIR) loads every weight (no missing, unexpected or
     mismatched tensors besides the rebuilt sinusoid tables), and its logits on the
     --check-logits batch equal the checkpoint's (`ot export` computed them in C):
     normalized error < 1e-5;
  2. AutoTokenizer.from_pretrained(DIR) loads (tokenizer_config.json: GPT2Tokenizer over
     vocab.json + merges.txt) and its ids of each --src line plus eos equal `ot translate`'s
     own source encoding (seen through the next check: ot reads the text, HF the ids);
  3. generate() with the directory's own generation config (forced_eos_token_id null,
     max_length) equals `ot translate --model DIR` token for token, greedy and beam 4
     (length_penalty 1.0, one length limit --max-length for both, early_stopping True =
     `--early-stopping`: transformers 5 moved the early_stopping=False heuristic by one
     position (best running score / (cur_len - 1)^alpha) from 4.40's, which ot follows and
     tests/golden/hf_marian checks, so with False 5.x stops some searches a step earlier).
"""
import argparse
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, GenerationConfig, MarianMTModel


def ok(name, good, detail=""):
    print(f"{'OK    ' if good else 'FAILED'} {name}{': ' + detail if detail else ''}")
    return good


def check_logits(m, info, check):
    rebuilt = {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"}
    missing = [k for k in info["missing_keys"] if k not in rebuilt]
    bad = missing + list(info["unexpected_keys"]) + list(info["mismatched_keys"])
    good = ok("weights", not bad, f"missing {missing}, unexpected {list(info['unexpected_keys'])}, "
              f"mismatched {list(info['mismatched_keys'])}")
    t = load_file(check)
    with torch.no_grad():
        out = m(input_ids=t["src_ids"].long(), attention_mask=t["src_mask"].long(),
                decoder_input_ids=t["decoder_input_ids"].long()).logits.float()
    want = t["logits"].reshape(out.shape)
    nerr = float((out - want).norm() / want.norm())
    return ok("logits", nerr < 1e-5, f"nerr {nerr:.3g} over {tuple(out.shape)} (max |diff| "
              f"{float((out - want).abs().max()):.3g})") and good


def ot_translate(a, lines, beam, ids):
    cmd = [a.ot, "translate", "--model", a.dir, "--beam", str(beam), "--batch", "8", "--quiet",
           "--max-len-a", "0", "--max-len-b", "0", "--max-length", str(a.max_length), "--early-stopping"]
    if ids:
        cmd.append("--ids")
    p = subprocess.run(cmd, input="".join(x + "\n" for x in lines), capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2")))
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    return p.stdout.split("\n")[:-1]


def check_generate(a, m, srcs):
    gc = GenerationConfig.from_pretrained(a.dir)
    good = ok("generation_config.json", gc.forced_eos_token_id is None and
              gc.max_length == m.config.max_position_embeddings,
              f"forced_eos_token_id {gc.forced_eos_token_id}, max_length {gc.max_length}")
    eos = m.config.eos_token_id
    for beam in (1, 4):
        hf = []
        for s in srcs:   # one sentence at a time: no padding questions
            with torch.no_grad():
                y = m.generate(torch.tensor([s]), num_beams=beam, do_sample=False, length_penalty=1.0,
                               early_stopping=True, max_length=a.max_length)[0].tolist()
            y = y[1:]   # the decoder start
            if eos in y:
                y = y[: y.index(eos)]
            hf.append(" ".join(map(str, y)))
        ours = ot_translate(a, [" ".join(map(str, s)) for s in srcs], beam, True)
        same = sum(x == y for x, y in zip(hf, ours))
        good = ok(f"generate beam {beam} = ot translate --ids", same == len(srcs) == len(ours),
                  f"{same}/{len(srcs)} identical") and good
        diffs = [i for i, (x, y) in enumerate(zip(hf, ours)) if x != y]
        for i in diffs[:3]:
            print(f"    {i}: hf  {hf[i]}\n    {i}: ot  {ours[i]}")
    return good


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True, help="the directory `ot export` wrote")
    p.add_argument("--check", required=True, help="the file of `ot export --check-logits`")
    p.add_argument("--ot", default="build/ot")
    p.add_argument("--src", help="source sentences, one a line (default: the check batch's)")
    p.add_argument("--limit", type=int, default=40)
    p.add_argument("--max-length", type=int, default=24, help="generate()'s max_length, and ot's")
    a = p.parse_args()
    torch.manual_seed(0)
    m, info = MarianMTModel.from_pretrained(a.dir, output_loading_info=True)
    m.eval()
    good = check_logits(m, info, a.check)
    a.max_length = min(a.max_length, m.config.max_position_embeddings)
    if a.src:
        tok = AutoTokenizer.from_pretrained(a.dir)
        with open(a.src, encoding="utf-8") as f:
            lines = [x.rstrip("\n") for x in f][: a.limit]
        srcs = [tok.encode(x, add_special_tokens=False) + [m.config.eos_token_id] for x in lines]
        keep = [i for i, s in enumerate(srcs) if len(s) <= m.config.max_position_embeddings]
        lines, srcs = [lines[i] for i in keep], [srcs[i] for i in keep]
        good = ok("tokenizer", type(tok).__name__.startswith("GPT2Tokenizer"), type(tok).__name__) and good
        text_ids = ot_translate(a, lines, 1, False)   # ot reads the text itself
        by_ids = ot_translate(a, [" ".join(map(str, s)) for s in srcs], 1, True)
        dec = [tok.decode([int(t) for t in x.split()]) if x else "" for x in by_ids]
        same = sum(x == y for x, y in zip(text_ids, dec))
        good = ok("HF tokenizer ids = ot's encoding (greedy outputs from text and from HF ids)",
                  same == len(lines), f"{same}/{len(lines)}") and good
    else:
        t = load_file(a.check)
        srcs = [[int(v) for v, k in zip(r, mk) if k] for r, mk in zip(t["src_ids"], t["src_mask"])]
    good = check_generate(a, m, srcs) and good
    print("check_hf_export: " + ("OK" if good else "FAILED"))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
