"""Copies a GPT-2 checkpoint of `ot train` (or a Hugging Face GPT-2 directory) into OUT as a
Hugging Face directory (config.json, model.safetensors, tokenizer files) with outlier
activation channels that leave the function unchanged: in every block, channels
k = OFFSET, OFFSET + STRIDE, ... of ln_1 and ln_2 (gain and bias) times FACTOR and the
same input rows of attn.c_attn / mlp.c_fc (Conv1D [in, out]) divided by FACTOR. The f32
model computes the same logits (up to rounding); its int8 quantization sees what trained
LLMs show (a few large activation channels meeting small weights), the case that calibrated
(AWQ-style) quantization addresses.

Usage: python bench/inject_outliers.py CKPT OUT [--factor 16] [--stride 32] [--offset 5]
"""
import argparse
import json
import os
import shutil

import numpy as np
from safetensors.numpy import load_file, save_file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--factor", type=float, default=16.0)
    ap.add_argument("--stride", type=int, default=32)
    ap.add_argument("--offset", type=int, default=5)
    a = ap.parse_args()
    src = a.ckpt
    if os.path.exists(os.path.join(src, "latest")):   # a run directory
        src = os.path.join(src, open(os.path.join(src, "latest")).read().strip())
    w = load_file(os.path.join(src, "model.safetensors"))
    cfg = json.load(open(os.path.join(src, "config.json")))
    C = cfg["n_embd"]
    ch = np.arange(a.offset, C, a.stride)
    for l in range(cfg["n_layer"]):
        for ln, mat in (("ln_1", "attn.c_attn"), ("ln_2", "mlp.c_fc")):
            for p in ("weight", "bias"):
                t = w.get(f"h.{l}.{ln}.{p}")
                if t is not None:
                    t[ch] *= a.factor
            w[f"h.{l}.{mat}.weight"][ch, :] /= a.factor
    os.makedirs(a.out, exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in w.items()}, os.path.join(a.out, "model.safetensors"))
    for f in ("config.json", "vocab.json", "merges.txt"):
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), a.out)
    print(f"{a.out}: {len(ch)} channels of {C} x {a.factor:g} in {cfg['n_layer']} blocks")


if __name__ == "__main__":
    main()
