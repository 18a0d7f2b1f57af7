#!/usr/bin/env python3
"""The PyTorch side of the digits ViT comparison: trains the same small vision
transformer as `ot train --task classify` (the vit-digits preset as a Hugging Face
ViTForImageClassification: 8x8 grey images, 2x2 patches, hidden 64, 4 layers, 4 heads,
MLP 128, erf GELU, LayerNorm eps 1e-12, 10 classes) on the same files
(data/digits/train.otimg, held-out data/digits/heldout.otimg), with the same
augmentation rule (random resized crop from crop-min of the area, aspect 3/4..4/3, 10
tries then the whole image, bilinear half-pixel resize; optional flip), normalization
((pixel / 16 - mean) / std), optimizer (AdamW, decay on matrices, CLS and positions
only), schedule (linear warmup min(steps/10, 100), cosine to lr/10), clipping and steps,
and prints the held-out top-1 accuracy. The random streams differ (torch's, not ours),
so compare accuracies over seeds, not single runs.

Usage: PYTHON bench/torch_vit_digits.py [--steps 1000] [--batch 64] [--lr 1e-3]
           [--weight-decay 0.05] [--crop-min 0.6] [--flip] [--mean 0.3] [--std 0.4]
           [--clip 1.0] [--seed 1] [--threads 2] [--init DIR] [--no-shuffle] [--ot-log FILE]
(any Python with torch, transformers and numpy)

Step-for-step check of the two trainers (same initial weights, same batches, no random
crop): --init DIR starts from an HF ViT directory instead of torch's initialization (ot's
initial weights: the checkpoint of `ot train --task classify --steps 1 --lr 1e-30
--save-every 1 --out D`, D/step_000001), --no-shuffle takes the images in file order as
`ot train --shuffle false` does, and --ot-log prints every step's loss and gradient norm
beside those of an ot run's log.jsonl (`ot train --task classify --shuffle false
--crop-min 0 --steps N --seed S`, the same seed as the --init run) and their largest
relative difference.
"""
import json
import argparse
import math
import struct

import numpy as np
import torch
from transformers import ViTConfig, ViTForImageClassification


def load(path):
    b = open(path, "rb").read()
    assert b[:8] == b"OTIMG01\n", path
    n, h, w, c, classes, maxval = struct.unpack("<6I", b[8:32])
    pix = np.frombuffer(b, np.uint8, n * h * w * c, 32).reshape(n, h, w, c).astype(np.float32) / maxval
    lab = np.frombuffer(b, "<u2", n, 32 + n * h * w * c).astype(np.int64)
    return pix.transpose(0, 3, 1, 2).copy(), lab


def resize(img, y0, x0, ch, cw, oh, ow, flip):
    """Bilinear, half-pixel centres, of the crop [y0:y0+ch, x0:x0+cw] to oh x ow (ours)."""
    C = img.shape[0]
    out = np.empty((C, oh, ow), np.float32)
    for oy in range(oh):
        sy = max((oy + 0.5) * ch / oh - 0.5, 0.0)
        iy = min(int(sy), ch - 1); iy1 = min(iy + 1, ch - 1); fy = sy - iy
        for ox in range(ow):
            oxs = ow - 1 - ox if flip else ox
            sx = max((oxs + 0.5) * cw / ow - 0.5, 0.0)
            ix = min(int(sx), cw - 1); ix1 = min(ix + 1, cw - 1); fx = sx - ix
            p = img[:, y0 + iy, x0 + ix] * (1 - fx) + img[:, y0 + iy, x0 + ix1] * fx
            q = img[:, y0 + iy1, x0 + ix] * (1 - fx) + img[:, y0 + iy1, x0 + ix1] * fx
            out[:, oy, ox] = p * (1 - fy) + q * fy
    return out


def augment(img, rng, crop_min, flip):
    C, H, W = img.shape
    y0, x0, ch, cw = 0, 0, H, W
    if crop_min > 0:
        for _ in range(10):
            a = H * W * (crop_min + (1 - crop_min) * rng.random())
            r = math.exp(math.log(3 / 4) + (math.log(4 / 3) - math.log(3 / 4)) * rng.random())
            w, h = int(round(math.sqrt(a * r))), int(round(math.sqrt(a / r)))
            u, v = rng.random(), rng.random()
            if 0 < w <= W and 0 < h <= H:
                y0, x0, ch, cw = int(u * (H - h + 1)), int(v * (W - w + 1)), h, w
                break
    return resize(img, y0, x0, ch, cw, H, W, flip and rng.random() < 0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--crop-min", type=float, default=0.6)
    ap.add_argument("--flip", action="store_true")
    ap.add_argument("--mean", type=float, default=0.3)
    ap.add_argument("--std", type=float, default=0.4)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--init", default=None)
    ap.add_argument("--no-shuffle", action="store_true")
    ap.add_argument("--ot-log", default=None)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(a.seed)
    xtr, ytr = load("data/digits/train.otimg")
    xho, yho = load("data/digits/heldout.otimg")
    cfg = ViTConfig(image_size=8, patch_size=2, num_channels=1, hidden_size=64, num_hidden_layers=4,
                    num_attention_heads=4, intermediate_size=128, hidden_act="gelu", layer_norm_eps=1e-12,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=10)
    model = ViTForImageClassification.from_pretrained(a.init) if a.init else ViTForImageClassification(cfg)
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() >= 2 or "cls_token" in n
             or "position_embeddings" in n]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in ids]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    warm = min(a.steps // 10, 100)
    min_lr = a.lr / 10

    def lr_at(s):
        if s < warm:
            return a.lr * (s + 1) / warm
        r = (s - warm) / max(a.steps - warm, 1)
        return min_lr + 0.5 * (1 + math.cos(math.pi * r)) * (a.lr - min_lr)

    n = len(ytr)
    perm = (lambda: np.arange(n)) if a.no_shuffle else (lambda: rng.permutation(n))
    order, pos = perm(), 0
    steps = []
    model.train()
    for s in range(a.steps):
        idx = []
        for _ in range(a.batch):
            idx.append(order[pos])
            pos += 1
            if pos == n:
                order, pos = perm(), 0
        x = np.stack([augment(xtr[i], rng, a.crop_min, a.flip) for i in idx])
        x = torch.from_numpy((x - a.mean) / a.std)
        y = torch.from_numpy(ytr[idx])
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        loss = torch.nn.functional.cross_entropy(model(pixel_values=x).logits, y)
        opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip if a.clip > 0 else float("inf"))
        opt.step()
        steps.append((loss.item(), norm.item()))
        if (s + 1) % 250 == 0 or s + 1 == a.steps:
            print("step %d loss %.4f" % (s + 1, loss.item()), flush=True)
    if a.ot_log:
        ours = [json.loads(line) for line in open(a.ot_log) if '"loss"' in line]
        worst = 0.0
        for s, (l, g) in enumerate(steps[:len(ours)]):
            o = ours[s]
            worst = max(worst, abs(l - o["loss"]) / abs(o["loss"]))
            print("step %4d  torch loss %.6f norm %.5f | ot loss %.6f norm %.5f" % (s + 1, l, g, o["loss"],
                                                                                   o["grad_norm"]))
        print("largest relative loss difference over %d steps: %.2g" % (min(len(ours), len(steps)), worst))
    model.eval()
    with torch.no_grad():
        logits = model(pixel_values=torch.from_numpy((xho - a.mean) / a.std)).logits
    acc = (logits.argmax(-1).numpy() == yho).mean()
    print("torch %s: %d steps of %d, held-out top-1 %.2f%% (%d images)" % (torch.__version__, a.steps, a.batch,
                                                                       100 * acc, len(yho)))


if __name__ == "__main__":
    main()
