#!/usr/bin/env python3
"""Decode tokens/s of a Hugging Face GPT-2 (124M shape, random weights: no download, or
--model DIR) at batch 1 with the KV cache, plain float32 PyTorch against the same model after
ops_transformer.quantize_model (weight-only int8, per row or --group 32/64/128). One
process, the two alternated, median of --reps. Also the largest logit difference of the
first step. Asserts nothing; the load average is printed first (time only on a quiet machine).

  python bench/torch_int8_decode.py [--model DIR] [--tokens 64] [--reps 3] [--group 0]
"""
import argparse
import copy
import os
import statistics
import time

import torch
import transformers

import ops_transformer as ot


def decode(model, ids, n):
    t0 = time.perf_counter()
    out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    return time.perf_counter() - t0, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", help="a Hugging Face GPT-2 directory (default: random 124M weights)")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--prompt", type=int, default=16, help="prompt length (random ids)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--group", type=int, default=0, choices=[0, 32, 64, 128])
    a = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (time only when it is below 0.5); torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads")
    torch.manual_seed(0)
    if a.model:
        f32 = transformers.GPT2LMHeadModel.from_pretrained(a.model)
    else:
        f32 = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    f32.eval()
    q8 = ot.quantize_model(copy.deepcopy(f32), quant_config={"group": a.group})
    ids = torch.randint(0, f32.config.vocab_size, (1, a.prompt))
    with torch.no_grad():
        d = (f32(ids).logits - q8(ids).logits).abs().max().item()
        models = {"f32": f32, "int8": q8}
        for m in models.values():
            decode(m, ids, 4)                       # warm-up
        times = {n: [] for n in models}
        for _ in range(a.reps):
            for n, m in models.items():
                times[n].append(decode(m, ids, a.tokens)[0])
    for n in models:
        med = statistics.median(times[n])
        print(f"{n:>5}: {a.tokens / med:8.1f} tokens/s (median of {a.reps}, {a.tokens} new tokens)")
    print(f"int8 / f32: {statistics.median(times['f32']) / statistics.median(times['int8']):.2f}x; "
          f"max |logit difference| at the prompt {d:.4f}")


if __name__ == "__main__":
    main()
