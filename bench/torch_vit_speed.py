#!/usr/bin/env python3
"""PyTorch side of bench_vit: ViT-B/16 training and inference images/s in PyTorch 2.x eager.
Not run by CI (benchmarks assert nothing).

Model: transformers' ViTForImageClassification from ViTConfig (defaults = ViT-B/16 at 224 px:
hidden 768, 12 layers, 12 heads, MLP 3072, erf GELU, LayerNorm eps 1e-12, QKV biases, no
dropout), num_labels as ot's preset (1000), attn_implementation="sdpa", random init. --model
takes ot's ViT preset names (vit-base/16, vit-small/16, vit-tiny/16, vit-long, vit-digits) and
builds the same shape.

What is timed (time.perf_counter around each step; images/s = batch / median step time):
  train: zero_grad + forward + cross-entropy + backward + clip_grad_norm_(1.0) + AdamW (lr 1e-3,
         betas 0.9/0.999, eps 1e-8, weight decay 0.05 on matrices, CLS and positions: ot's
         classify defaults) at batch 8, on random input tensors already normalized (no
         augmentation, no loader). ot's training step also runs its loader's random resized
         crop (bilinear), normalization and label copy: that favours torch.
         bf16 = torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss, f32 master
         weights and AdamW state (ot's mixed precision: f32 masters, bf16 weight copy).
  infer: torch.inference_mode() forward + softmax + top-1 at batch 1 and 32 on ready f32
         tensors (ot's call also converts 8-bit pixels: resize (a copy at 224) and normalize).
         bf16 has two variants: "bf16model" = model.to(torch.bfloat16) and bf16 inputs (bf16
         weights and activations: what `ot classify --weights bf16` does, and the default that
         bench/vit_speed.py compares), and "autocast" = f32 model under autocast(bf16).
Each configuration: --warmup untimed steps, then --steps timed ones.

Usage: PYTHON bench/torch_vit_speed.py [--mode train|infer|all] [--dtype f32|bf16|both]
           [--batch B (train 8, infer 1 and 32)] [--steps 3] [--warmup 1] [--threads 2]
           [--model vit-base/16] [--bf16-infer model|autocast|both (both)]
           [--adamw default|foreach|fused] [--json]
--json also prints one line per configuration: {"impl":"torch","mode":...,"img_s":...}, the
same keys as `bench_vit --json` (plus "variant").
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from transformers import ViTConfig, ViTForImageClassification

# ot preset -> (image, patch, channels, classes, hidden, layers, heads, mlp), src/model/config.c
PRESETS = {
    "vit-base/16": (224, 16, 3, 1000, 768, 12, 12, 3072),
    "vit-small/16": (224, 16, 3, 1000, 384, 12, 6, 1536),
    "vit-tiny/16": (224, 16, 3, 1000, 192, 12, 3, 768),
    "vit-long": (512, 16, 3, 1000, 384, 12, 6, 1536),
    "vit-digits": (8, 2, 1, 10, 64, 4, 4, 128),
}


def build(name):
    img, patch, ch, classes, hid, layers, heads, mlp = PRESETS[name]
    cfg = ViTConfig(image_size=img, patch_size=patch, num_channels=ch, hidden_size=hid, num_hidden_layers=layers,
                    num_attention_heads=heads, intermediate_size=mlp, hidden_act="gelu", layer_norm_eps=1e-12,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=classes,
                    attn_implementation="sdpa")
    return ViTForImageClassification(cfg), cfg


def adamw(model, impl):
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() >= 2 or "cls_token" in n
             or "position_embeddings" in n]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in ids]
    kw = {} if impl == "default" else {impl: True}
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}],
                             lr=1e-3, betas=(0.9, 0.999), eps=1e-8, **kw)


def report(a, mode, dtype, variant, batch, times, out):
    med = statistics.median(times)
    r = {"impl": "torch", "model": a.model, "mode": mode, "dtype": dtype, "variant": variant, "batch": batch,
         "threads": a.threads, "steps": len(times), "median_s": round(med, 6), "min_s": round(min(times), 6),
         "img_s": round(batch / med, 4)}
    print("median of %d: %.4f s | %.2f images/s" % (len(times), med, batch / med), flush=True)
    if a.json:
        print(json.dumps(r, separators=(",", ":")), flush=True)
    out.append(r)


def run_train(a, dtype, B, gen, out):
    print("\n== train %s%s, batch %d, %d threads ==" % (dtype, " (autocast)" if dtype == "bf16" else "", B, a.threads),
          flush=True)
    torch.manual_seed(1)
    model, cfg = build(a.model)
    model.train()
    opt = adamw(model, a.adamw)
    n = max(64, B)
    xs = torch.randn(n, cfg.num_channels, cfg.image_size, cfg.image_size, generator=gen)
    ys = torch.randint(0, cfg.num_labels, (n,), generator=gen)
    times = []
    for s in range(a.warmup + a.steps):
        i = (s * B) % (n - B + 1)
        x, y = xs[i:i + B], ys[i:i + B]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = model(pixel_values=x).logits
            loss = F.cross_entropy(logits.float(), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sec = time.perf_counter() - t0
        timed = s >= a.warmup
        if timed:
            times.append(sec)
        print("  %s step %d: %.4f s  %.2f images/s  loss %.4f" % ("timed " if timed else "warmup", s + 1, sec, B / sec,
                                                                 loss.item()), flush=True)
    report(a, "train", dtype, "autocast" if dtype == "bf16" else "-", B, times, out)


def run_infer(a, dtype, variant, B, gen, out):
    print("\n== infer %s%s, batch %d, %d threads ==" % (dtype, " (%s)" % variant if dtype == "bf16" else "", B,
                                                       a.threads), flush=True)
    torch.manual_seed(1)
    model, cfg = build(a.model)
    model.eval()
    n = max(64, B)
    xs = torch.randn(n, cfg.num_channels, cfg.image_size, cfg.image_size, generator=gen)
    if variant == "bf16model":
        model = model.to(torch.bfloat16)
        xs = xs.to(torch.bfloat16)
    times = []
    with torch.inference_mode():
        for s in range(a.warmup + a.steps):
            i = (s * B) % (n - B + 1)
            x = xs[i:i + B]
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=variant == "autocast"):
                logits = model(pixel_values=x).logits
            p, c = logits.float().softmax(-1).max(-1)
            sec = time.perf_counter() - t0
            timed = s >= a.warmup
            if timed:
                times.append(sec)
            print("  %s call %d: %.4f s  %.2f images/s  (image 0: class %d p %.4f)" % (
                "timed " if timed else "warmup", s + 1, sec, B / sec, c[0].item(), p[0].item()), flush=True)
    report(a, "infer", dtype, variant, B, times, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["train", "infer", "all"], default="all")
    ap.add_argument("--dtype", choices=["f32", "bf16", "both"], default="both")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", choices=sorted(PRESETS), default="vit-base/16")
    ap.add_argument("--bf16-infer", choices=["model", "autocast", "both"], default="both")
    ap.add_argument("--adamw", choices=["default", "foreach", "fused"], default="default")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0 or a.batch < 0:
        ap.error("--steps must be >= 1, --warmup >= 0, --batch >= 1")
    torch.set_num_threads(a.threads)
    print("torch %s, %d threads, %s, %d warm-up + %d timed per configuration" % (
        torch.__version__, torch.get_num_threads(), a.model, a.warmup, a.steps), flush=True)
    dts = ["f32", "bf16"] if a.dtype == "both" else [a.dtype]
    variants = {"model": ["bf16model"], "autocast": ["autocast"], "both": ["bf16model", "autocast"]}[a.bf16_infer]
    gen = torch.Generator().manual_seed(0x766974)
    out = []
    t0 = time.perf_counter()
    if a.mode in ("train", "all"):
        for dt in dts:
            run_train(a, dt, a.batch or 8, gen, out)
    if a.mode in ("infer", "all"):
        for dt in dts:
            for v in (variants if dt == "bf16" else ["-"]):
                for B in ([a.batch] if a.batch else [1, 32]):
                    run_infer(a, dt, v, B, gen, out)
    print("\ntotal run time %.1f s\n" % (time.perf_counter() - t0))
    print("%-6s %-6s %-10s %6s %6s %10s %10s %10s" % ("mode", "dtype", "variant", "batch", "steps", "median s",
                                                      "min s", "images/s"))
    for r in out:
        print("%-6s %-6s %-10s %6d %6d %10.4f %10.4f %10.2f" % (r["mode"], r["dtype"], r["variant"], r["batch"],
                                                                r["steps"], r["median_s"], r["min_s"], r["img_s"]))


if __name__ == "__main__":
    main()
