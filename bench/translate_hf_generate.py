#!/usr/bin/env python3
"""A translator with `ot translate`'s stdin/stdout shape, over Hugging Face transformers'
MarianMTModel.generate (text in, text out): a third opinion beside bench/translate_ct2.py
(which feeds token ids to both CTranslate2 and `ot translate --ids`). Not run by CI.

  /tmp/peers/bin/python bench/translate_hf_generate.py --model DIR [--beam 4] [--batch 16]
      [--dtype f32|int8] < source.txt > translations.txt

Sources are encoded with GPT2TokenizerFast over DIR's vocab.json + merges.txt, the eos
(<|endoftext|>) appended; beam search with length_penalty 1.0 and
max_new_tokens = a * (longest source of the batch) + b, capped by the positions.
int8: torch.ao.quantization.quantize_dynamic over every nn.Linear (the tied output head stays f32).
"""
import argparse
import sys

import torch
from transformers import GPT2TokenizerFast, MarianMTModel


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--dtype", choices=("f32", "int8"), default="f32")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-len-a", type=float, default=1.5)
    p.add_argument("--max-len-b", type=int, default=10)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    tok = GPT2TokenizerFast.from_pretrained(a.model)
    model = MarianMTModel.from_pretrained(a.model).eval()
    if a.dtype == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    cfg = model.config
    eos, P = cfg.eos_token_id, cfg.max_position_embeddings
    lines = [line.rstrip("\n") for line in sys.stdin]
    for i in range(0, len(lines), a.batch):
        ids = [tok.encode(s)[: P - 1] + [eos] for s in lines[i:i + a.batch]]
        S = max(len(x) for x in ids)
        src = torch.full((len(ids), S), cfg.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(ids), S), dtype=torch.long)
        for r, x in enumerate(ids):
            src[r, : len(x)], mask[r, : len(x)] = torch.tensor(x), 1
        n = min(int(a.max_len_a * (S - 1) + a.max_len_b), P - 1)
        with torch.no_grad():
            out = model.generate(input_ids=src, attention_mask=mask, num_beams=a.beam,
                                 length_penalty=1.0, max_new_tokens=n, do_sample=False)
        for o in out.tolist():
            o = [t for t in o[1:] if t != eos]
            sys.stdout.write(tok.decode(o).replace("\n", " ").strip() + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
