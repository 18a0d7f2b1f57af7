#!/usr/bin/env python3
"""Side by side: ops_transformer.scaled_dot_product_attention (libot's flash attention through
the PyTorch package) against torch's own F.scaled_dot_product_attention, forward + backward,
one process, the two alternated; medians of --reps runs each. Optionally block-sparse
(ops_transformer.BlockSparseAttention) against torch's dense SDPA. Asserts nothing.

  python bench/torch_sdpa.py [--T 1024 4096 8192] [--B 1] [--H 12] [--D 64] [--dtype f32|bf16]
                             [--no-causal] [--sparse] [--reps 3]
Needs `pip install ./python`. Time only on a quiet machine: the load average is printed first.
"""
import argparse
import os
import statistics
import time

import torch

import ops_transformer as ot
from ops_transformer import attention


def run(fn, q, k, v, g):
    for t in (q, k, v):
        t.grad = None
    t0 = time.perf_counter()
    fn(q, k, v).backward(g)
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--T", type=int, nargs="+", default=[1024, 4096, 8192])
    p.add_argument("--B", type=int, default=1)
    p.add_argument("--H", type=int, default=12)
    p.add_argument("--D", type=int, default=64)
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    p.add_argument("--no-causal", action="store_true")
    p.add_argument("--sparse", action="store_true", help="also BlockSparseAttention(64, 3, 10)")
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    dt = torch.float32 if a.dtype == "f32" else torch.bfloat16
    causal = not a.no_causal
    print(f"load average {os.getloadavg()[0]:.2f} (time only when it is below 0.5); torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads; libot {ot.LIBRARY_PATH}")
    print(f"B={a.B} H={a.H} D={a.D} {a.dtype} causal={causal}; forward + backward, median of {a.reps}")
    sparse = ot.BlockSparseAttention(64, 3, 10, causal=causal)
    cands = {"torch": lambda q, k, v: attention.torch_sdpa(q, k, v, is_causal=causal),
             "ours": lambda q, k, v: ot.scaled_dot_product_attention(q, k, v, is_causal=causal)}
    if a.sparse:
        cands["sparse"] = lambda q, k, v: sparse(q, k, v)
    print(f"{'T':>6} " + " ".join(f"{n + ' s':>10}" for n in cands) + f" {'torch/ours':>11}"
          + (f" {'torch/sparse':>13}" if a.sparse else ""))
    for T in a.T:
        q, k, v = (torch.randn(a.B, a.H, T, a.D).to(dt).requires_grad_() for _ in range(3))
        g = torch.randn(a.B, a.H, T, a.D).to(dt)
        times = {n: [] for n in cands}
        for n, f in cands.items():      # warm-up (first-call allocations, oneDNN primitives)
            run(f, q, k, v, g)
        for _ in range(a.reps):
            for n, f in cands.items():
                times[n].append(run(f, q, k, v, g))
        med = {n: statistics.median(t) for n, t in times.items()}
        line = f"{T:>6} " + " ".join(f"{med[n]:>10.3f}" for n in cands) + f" {med['torch'] / med['ours']:>10.2f}x"
        if a.sparse:
            line += f" {med['torch'] / med['sparse']:>12.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
