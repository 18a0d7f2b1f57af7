#!/usr/bin/env python3
"""GPT-2 124M inference side by side: ot's engine (build/bench_infer) against
CTranslate2's Generator, f32 and int8 weights, in one run. Benchmarks assert
nothing; not run by CI.

Both sides run GPT-2 124M's shapes (12 layers, d_model 768, 12 heads, vocabulary
50257, tied embeddings) with random weights: timing does not depend on the
values. CTranslate2's model is a transformers GPT2LMHeadModel (seeded random
init) converted by CTranslate2's own GPT-2 loader, with a vocabulary of
placeholder tokens "t0".."t50256" (no tokenizer is downloaded; prompts are
token ids written as those strings), int8 = its `int8` weights (per row) with
`compute_type="int8"`, f32 = `float32`. ot: `bench_infer --model gpt2` with
f32 and int8 per row (`--group 0`) or per group (`--group G`).

Measured, per dtype (both sides with --threads intra-op threads, one process
each, the sides alternated --rounds times; medians):
  - time to the first token of a prompt of --prompt tokens (ot: its prefill
    line; CTranslate2: generate_batch of one prompt with max_length 1);
  - decode tokens/s at batch 1 and 8 with 128-token prompts (the sampler of
    bench_infer: temperature 0.8, top-k 40, top-p 0.95); CTranslate2: the time
    of max_length = 1 + S new tokens minus that of 1 (its prefill), so
    S steps of batch B give B * S tokens; ot: its median step.
CTranslate2 may stop a sequence at its end token; min_length keeps every one
going for the whole length.

Usage (from the repository root, both cores free):
  /path/to/python bench/ct2_gpt2.py [--bench-infer build/bench_infer] [--threads 2]
      [--prompt 128] [--steps 32] [--rounds 2] [--group 0] [--work /tmp/ct2_gpt2]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def build_ct2(work, dtype):
    """A converted CTranslate2 GPT-2 124M (random weights) under work/<dtype>."""
    out = os.path.join(work, dtype)
    if os.path.exists(os.path.join(out, "model.bin")):
        return out
    import torch
    import transformers
    from ctranslate2.converters import Converter
    from ctranslate2.converters import transformers as ct2t

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    model = transformers.GPT2LMHeadModel(cfg).eval()

    class Tok:   # what the loader reads of a tokenizer: the special tokens and the vocabulary
        bos_token = eos_token = unk_token = "t50256"

        def get_vocab(self):
            return {f"t{i}": i for i in range(cfg.vocab_size)}

    class Conv(Converter):
        def _load(self):
            return ct2t.GPT2Loader()(model, Tok())

    Conv().convert(out, quantization=None if dtype == "float32" else dtype, force=True)
    return out


def ct2_times(path, compute_type, threads, prompt, steps, rounds):
    import ctranslate2
    import random

    gen = ctranslate2.Generator(path, device="cpu", compute_type=compute_type, intra_threads=threads,
                                inter_threads=1)
    rng = random.Random(1)
    toks = lambda n: [f"t{rng.randrange(50256)}" for _ in range(n)]   # noqa: E731
    samp = dict(sampling_topk=40, sampling_topp=0.95, sampling_temperature=0.8, include_prompt_in_result=False)

    def run(batch, plen, new):
        p = [toks(plen) for _ in range(batch)]
        t = time.perf_counter()
        r = gen.generate_batch(p, max_length=new, min_length=new, **samp)
        dt = time.perf_counter() - t
        assert all(len(x.sequences_ids[0]) == new for x in r), "a sequence stopped early"
        return dt

    run(1, 16, 2)   # warm-up
    out = {"ttft": statistics.median(run(1, prompt, 1) for _ in range(rounds))}
    for b in (1, 8):
        d = [run(b, 128, 1 + steps) - run(b, 128, 1) for _ in range(rounds)]
        out[f"decode{b}"] = b * steps / statistics.median(d)
    return out


def ot_times(bench, group, threads, prompt, steps):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [bench, "--model", "gpt2", "--weights", "f32,int8", "--group", str(group), "--prompts", str(prompt),
           "--steps", str(steps), "--reps", "3", "--trials", "3"]
    txt = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    res = {}
    for line in txt.splitlines():
        m = re.match(r"(\S+)\s+[\d.]+ prefill \d+ \(time to 1st\)\s+([\d.]+)", line)
        if m:
            res.setdefault(m.group(1), {})["ttft"] = float(m.group(2)) / 1e3
        m = re.match(r"(\S+)\s+[\d.]+ decode batch (\d+)\s+[\d.]+\s+([\d.]+)", line)
        if m:
            res.setdefault(m.group(1), {})[f"decode{m.group(2)}"] = float(m.group(3))
    return res, " ".join(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-infer", default="build/bench_infer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--group", type=int, default=0)
    ap.add_argument("--work", default="/tmp/ct2_gpt2")
    a = ap.parse_args()
    import ctranslate2

    paths = {d: build_ct2(a.work, d) for d in ("float32", "int8")}
    print(f"CTranslate2 {ctranslate2.__version__}, {a.threads} threads; load {os.getloadavg()[0]:.2f}")
    ct = {"float32": [], "int8": []}
    ot = []
    for r in range(a.rounds):
        for d in ct:
            ct[d].append(ct2_times(paths[d], d, a.threads, a.prompt, a.steps, 3))
        res, cmd = ot_times(a.bench_infer, a.group, a.threads, a.prompt, a.steps)
        ot.append(res)
        print(f"round {r + 1}: load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"ot: {cmd} (x{a.rounds}, medians)")
    okey = {"float32": "f32", "int8": "int8/row" if a.group == 0 else f"int8/g{a.group}"}
    print(f"| dtype | measure | CTranslate2 | ot | ot / CTranslate2 |")
    print("|---|---|---|---|---|")
    for d in ct:
        for k, name, lower in (("ttft", f"first token of {a.prompt} (ms)", True),
                               ("decode1", "decode batch 1 (tok/s)", False),
                               ("decode8", "decode batch 8 (tok/s)", False)):
            c = statistics.median(x[k] for x in ct[d])
            o = statistics.median(x[okey[d]][k] for x in ot)
            if lower:
                print(f"| {d} ({okey[d]}) | {name} | {c * 1e3:.1f} | {o * 1e3:.1f} | {c / o:.2f}x faster |")
            else:
                print(f"| {d} ({okey[d]}) | {name} | {c:.1f} | {o:.1f} | {o / c:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())
