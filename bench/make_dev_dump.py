#!/usr/bin/env python3
"""Stand-in for `ot prepare --task translate --dump-ids` when developing the peer scripts:
trains a joint byte-level BPE (GPT-2 format: vocab.json + merges.txt, one special token
<|endoftext|>) on train.SRC + train.TGT with the Hugging Face `tokenizers` library and writes
the id dumps in ot's format (one line per pair, `src ids<TAB>tgt ids`, no start / eos).
The numbers it leads to are not comparable with ot's (a different BPE trainer); use
`ot prepare` for real comparisons.

  /tmp/peers/bin/python bench/make_dev_dump.py --data data/translate --out /tmp/tr_dev \\
      [--vocab-size 8000] [--limit 5000]
writes OUT/vocab.json, OUT/merges.txt, OUT/ids.{train,valid,test}.
"""
import argparse
import os

from tokenizers import ByteLevelBPETokenizer


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data/translate")
    p.add_argument("--out", required=True)
    p.add_argument("--src", default="en"), p.add_argument("--tgt", default="fr")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--limit", type=int, default=0, help="use only the first N training pairs")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    read = lambda s, l: open(os.path.join(a.data, f"{s}.{l}"), encoding="utf-8").read().split("\n")[:-1]
    tr_s, tr_t = read("train", a.src), read("train", a.tgt)
    if a.limit:
        tr_s, tr_t = tr_s[: a.limit], tr_t[: a.limit]
    tok = ByteLevelBPETokenizer(add_prefix_space=False)
    tok.train_from_iterator(tr_s + tr_t, vocab_size=a.vocab_size, min_frequency=2,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    tok.save_model(a.out)
    for split, (S, T) in {"train": (tr_s, tr_t), "valid": (read("valid", a.src), read("valid", a.tgt)),
                          "test": (read("test", a.src), read("test", a.tgt))}.items():
        es, et = tok.encode_batch(S), tok.encode_batch(T)
        with open(os.path.join(a.out, f"ids.{split}"), "w") as f:
            for x, y in zip(es, et):
                f.write(" ".join(map(str, x.ids)) + "\t" + " ".join(map(str, y.ids)) + "\n")
        print(f"{split}: {len(S)} pairs, {sum(len(x.ids) for x in es)} + {sum(len(y.ids) for y in et)} tokens")
    print(f"vocabulary {tok.get_vocab_size()}, <|endoftext|> = {tok.token_to_id('<|endoftext|>')}")


if __name__ == "__main__":
    main()
