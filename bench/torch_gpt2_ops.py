#!/usr/bin/env python3
"""A nanoGPT-style GPT-2 training step in PyTorch, plain against ops_transformer's ops:
ops_transformer.patch(linear=True) (flash attention, and every nn.Linear on libot's GEMM),
FusedAddLayerNorm (residual + LayerNorm), linear_cross_entropy (no [B*T, V] logits kept) and
ops_transformer.AdamW, the same model and data otherwise (--no-linear: nn.Linear stays torch's).
One process, the two models' steps alternated, median tokens/s.
Asserts nothing; the load average is printed first (time only on a quiet machine).

  python bench/torch_gpt2_ops.py [--preset gpt2|tiny] [--B 4] [--T 1024] [--steps 5]
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import ops_transformer as ot

PRESETS = {"gpt2": dict(V=50304, C=768, L=12, H=12), "tiny": dict(V=512, C=64, L=2, H=4)}


class Block(nn.Module):
    def __init__(self, C, H, fused):
        super().__init__()
        self.H = H
        self.attn, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        Norm = ot.FusedAddLayerNorm if fused else nn.LayerNorm
        self.ln_mid, self.ln_out = Norm(C), Norm(C)
        self.fused = fused

    def _norm(self, ln, delta, res):
        if self.fused:
            return ln(delta, res)                 # (ln(res + delta), res + delta) in one pass
        res = res + delta
        return ln(res), res

    def forward(self, h, res):
        B, T, C = h.shape
        q, k, v = self.attn(h).split(C, -1)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # ours under patch()
        a = self.proj(a.transpose(1, 2).reshape(B, T, C))
        h, res = self._norm(self.ln_mid, a, res)
        m = self.fc2(F.gelu(self.fc(h), approximate="tanh"))
        return self._norm(self.ln_out, m, res)


class GPT(nn.Module):
    def __init__(self, V, C, L, H, T, fused):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.ln0 = nn.LayerNorm(C)
        self.blocks = nn.ModuleList(Block(C, H, fused) for _ in range(L))
        self.fused = fused
        for m in self.modules():          # GPT-2's initialization
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        h, res = self.ln0(x), x
        for b in self.blocks:
            h, res = b(h, res)
        if self.fused:
            return ot.linear_cross_entropy(h, self.wte.weight, targets)
        return F.cross_entropy((h @ self.wte.weight.t()).flatten(0, 1), targets.flatten())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", choices=list(PRESETS), default="gpt2")
    p.add_argument("--B", type=int, default=4)
    p.add_argument("--T", type=int, default=1024)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--no-linear", action="store_true", help="keep torch's nn.Linear on our side")
    a = p.parse_args()
    cfg = PRESETS[a.preset]
    print(f"load average {os.getloadavg()[0]:.2f} (time only when it is below 0.5); torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads")
    torch.manual_seed(0)
    plain = GPT(**cfg, T=a.T, fused=False)
    ours = GPT(**cfg, T=a.T, fused=True)
    ours.load_state_dict(plain.state_dict())
    opts = {"plain": torch.optim.AdamW(plain.parameters(), lr=6e-4, weight_decay=0.1),
            "ours": ot.AdamW(ours.parameters(), lr=6e-4, weight_decay=0.1)}
    models = {"plain": plain, "ours": ours}
    times = {n: [] for n in models}
    losses = {n: [] for n in models}
    for step in range(a.steps + 1):         # step 0: warm-up, not timed
        idx = torch.randint(0, cfg["V"], (a.B, a.T))
        tgt = torch.randint(0, cfg["V"], (a.B, a.T))
        for n, m in models.items():
            ot.patch(linear=not a.no_linear) if n == "ours" else ot.unpatch()
            t0 = time.perf_counter()
            loss = m(idx, tgt)
            opts[n].zero_grad(set_to_none=True)
            loss.backward()
            opts[n].step()
            dt = time.perf_counter() - t0
            if step:
                times[n].append(dt)
            losses[n].append(loss.item())
    ot.unpatch()
    tok = a.B * a.T
    for n in models:
        med = statistics.median(times[n])
        print(f"{n:>6}: {tok / med:10.1f} tokens/s (median step {med:.3f} s), losses "
              + " ".join(f"{l:.4f}" for l in losses[n]))
    worst = max(abs(x - y) / abs(y) for x, y in zip(losses["ours"], losses["plain"]))
    print(f"losses: largest relative difference {worst:.1e}")
    print(f"ours / plain: {statistics.median(times['plain']) / statistics.median(times['ours']):.2f}x")


if __name__ == "__main__":
    main()
