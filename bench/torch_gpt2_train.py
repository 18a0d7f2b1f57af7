#!/usr/bin/env python3
"""PyTorch side of bench_train: the same GPT-2 124M training step, for a
side-by-side tokens/s ratio. Not run by CI (benchmarks assert nothing).

Model, written by hand to match ot's preset "gpt2": vocab 50257 padded to
50304, d_model 768, 12 layers, 12 heads, d_ff 3072, max_seq 1024, tied
embeddings, learned positions, pre-norm LayerNorm (eps 1e-5), GELU (tanh),
biases on every Linear; causal attention as an explicit masked softmax (torch
1.13 has no scaled_dot_product_attention); the logits over the padded vocab,
cross-entropy over the real 50257 columns. One step = zero_grad + forward +
backward + clip_grad_norm_(1.0) + AdamW (lr 6e-4, betas 0.9/0.95, eps 1e-8,
weight decay 0.1 on matrices and embeddings only), like ot_trainer_step_on.
Synthetic uniform random tokens.

dtypes: f32, and bf16 = torch.autocast("cpu", torch.bfloat16) around the
forward and loss (bf16 GEMMs, f32 master weights and AdamW state: the
counterpart of ot's mixed precision). In torch 1.13 CPU autocast, LayerNorm
given a bf16 input with f32 weights fails ("expected scalar type BFloat16 but
found Float"); here the residual stream stays f32 (embeddings are f32 and
f32 + bf16 promotes to f32), so every LayerNorm sees f32 and autocast works.

BLAS: Debian's python3-torch is built with BLAS_INFO=generic, so its f32
GEMMs call whatever libblas.so.3 the system's alternatives select; with only
libblas3 installed that is the netlib reference BLAS (unoptimized, one
thread). bf16 matmuls do not help: torch 1.13 hands them to oneDNN only on
CPUs with AVX-512, so on this Zen 3 they run in torch's generic loops (both
measured at ~5 GFLOP/s here). The script prints which library is selected,
the measured f32/bf16 matmul rates and the step time they imply, and warns;
with the netlib BLAS one step of the default shape takes about 5 minutes.
For a fair f32 comparison install an optimized BLAS first (`apt-get install
libopenblas0-pthread`, which becomes the libblas.so.3 alternative; or keep
the alternative and run with
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread).

Usage (from the repository root):
  /usr/bin/python3 bench/torch_gpt2_train.py [--steps 3] [--warmup 1]
      [--batch 8] [--seq 256] [--threads 2] [--dtype f32|bf16|both] [--model gpt2|tiny] [--compile]
The last lines, "RESULT torch <dtype> ...", have the form of bench_train's
"RESULT ot <dtype> ..." lines: divide the tokens_per_s values for the ratio.
"""
import argparse
import math
import os
import re
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# name: (vocab, vocab_pad, d_model, layers, heads, d_ff, max_seq), as ot's presets
PRESETS = {
    "gpt2": (50257, 128, 768, 12, 12, 3072, 1024),
    "tiny": (50, 64, 32, 2, 4, 128, 16),
}


class Block(nn.Module):
    def __init__(self, C, H, Fd, T_max):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, Fd)
        self.mlp_proj = nn.Linear(Fd, C)
        mask = torch.tril(torch.ones(T_max, T_max, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, T_max, T_max), persistent=False)

    def attn(self, x):
        B, T, C = x.shape
        H, D = self.H, C // self.H
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)   # [B, H, T, D]
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att.float(), dim=-1).to(v.dtype)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn_proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, Vp, C, L, H, Fd, T_max):
        super().__init__()
        self.V = V
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(T_max, C)
        self.h = nn.ModuleList([Block(C, H, Fd, T_max) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            elif name.endswith("proj.weight"):   # writes into the residual stream
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, 0.0, std)
        with torch.no_grad():
            self.wte.weight[V:].zero_()            # padding rows

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)   # tied lm_head, [B, T, Vp]
        logits = logits[..., : self.V].float()
        return F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))


def make_optimizer(model, lr=6e-4, wd=0.1):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def run(args, dtype):
    V, pad, C, L, H, Fd, T_max = PRESETS[args.model]
    Vp = (V + pad - 1) // pad * pad
    if args.seq > T_max:
        raise SystemExit(f"--seq {args.seq} exceeds max_seq {T_max} of --model {args.model}")
    torch.manual_seed(1337)
    t0 = time.perf_counter()
    model = GPT(V, Vp, C, L, H, Fd, T_max)
    opt = make_optimizer(model)
    params = list(model.parameters())
    if args.compile:   # the forward and loss compiled (torch.compile's default inductor backend)
        model = torch.compile(model)
    print(f"\n== torch {dtype}{' compiled' if args.compile else ''}: batch {args.batch} x seq {args.seq}, {torch.get_num_threads()} threads ==")
    print(f"created in {time.perf_counter() - t0:.1f} s; {(sum(p.numel() for p in params) - (Vp - V) * C) / 1e6:.2f}M "
          f"parameters (without the padding rows, as ot counts)")
    gen = torch.Generator().manual_seed(42)
    tokens = args.batch * args.seq
    times = []
    for s in range(args.warmup + args.steps):
        rows = torch.randint(0, V, (args.batch, args.seq + 1), generator=gen)
        x, y = rows[:, :-1], rows[:, 1:]
        ts = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if dtype == "bf16":
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                loss = model(x, y)
        else:
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sec = time.perf_counter() - ts
        timed = s >= args.warmup
        if timed:
            times.append(sec)
        print(f"  {'timed ' if timed else 'warmup'} step {s + 1}: {sec:.4f} s  {tokens / sec:.0f} tok/s  "
              f"loss {loss.item():.4f}", flush=True)
    med = statistics.median(times)
    print(f"median step {med:.4f} s | {tokens / med:.0f} tokens/s")
    return med, tokens / med


def blas_report(threads):
    """Which BLAS torch's f32 GEMMs use, and the matmul rates it reaches; returns a short tag."""
    info = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    info = info.group(1) if info else "?"
    lib = "?"
    if info == "generic":
        for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") + ["/usr/lib/x86_64-linux-gnu"]:
            if d and os.path.exists(os.path.join(d, "libblas.so.3")):
                lib = os.path.realpath(os.path.join(d, "libblas.so.3"))
                break
    tag = "netlib" if "/blas/" in lib else os.path.basename(os.path.dirname(lib)) if lib != "?" else info
    a, b = torch.randn(512, 768), torch.randn(768, 768)
    rates = {}
    for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        x, y = a.to(dt), b.to(dt)
        x @ y
        t0, n = time.perf_counter(), 0
        while n < 3 or time.perf_counter() - t0 < 0.2:
            x @ y
            n += 1
        rates[name] = 2 * 512 * 768 * 768 * n / (time.perf_counter() - t0) * 1e-9
    print(f"BLAS_INFO={info}, libblas.so.3 -> {lib}; matmul 512x768x768: f32 {rates['f32']:.1f} GFLOP/s, "
          f"bf16 {rates['bf16']:.1f} GFLOP/s ({threads} threads)")
    if tag == "netlib" or rates["f32"] < 10 * threads:
        print("WARNING: torch's f32 GEMMs run on an unoptimized BLAS here; the f32 numbers understate "
              "PyTorch (install libopenblas0-pthread, see the top of this script)")
    return tag, rates


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["f32", "bf16", "both"], default="both")
    ap.add_argument("--model", choices=sorted(PRESETS), default="gpt2")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (warm-up steps then include the compilation)")
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.batch < 1 or args.seq < 1 or args.threads < 1:
        ap.error("--steps, --batch, --seq, --threads must be >= 1 and --warmup >= 0")
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"mkldnn {torch.backends.mkldnn.is_available()}, model {args.model}")
    blas, rates = blas_report(args.threads)
    V, pad, C, L, H, Fd, T_max = PRESETS[args.model]
    Vp = (V + pad - 1) // pad * pad
    step_flops = 6.0 * (L * (4 * C * C + 2 * C * Fd) + Vp * C) * args.batch * args.seq
    print("expected step time from the GEMM FLOPs at the matmul rates above: " +
          ", ".join(f"{dt} ~{step_flops / (rates[dt] * 1e9):.0f} s" for dt in ("f32", "bf16")))
    dtypes = ["f32", "bf16"] if args.dtype == "both" else [args.dtype]
    res = {dt: run(args, dt) for dt in dtypes}
    if len(res) == 2:
        print(f"bf16/f32 throughput ratio: {res['bf16'][1] / res['f32'][1]:.2f}x")
    for dt, (med, tps) in res.items():
        print(f"RESULT torch{'-compiled' if args.compile else ''} {dt} recompute=none B={args.batch} T={args.seq} threads={args.threads}: "
              f"median_step_s={med:.4f} tokens_per_s={tps:.1f} blas={blas}")


if __name__ == "__main__":
    main()
