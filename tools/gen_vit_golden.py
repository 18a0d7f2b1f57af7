#!/usr/bin/env python3
"""Hugging Face ViTForImageClassification checkpoints and logits for tests/test_vit_hf.c,
made with `transformers` (CI never runs this: the outputs are committed).

Usage: PYTHON tools/gen_vit_golden.py [OUTDIR]        (default tests/golden; any Python with
       torch, transformers and safetensors, e.g. a venv: /path/venv/bin/python)
       PYTHON tools/gen_vit_golden.py --check DIR GOLDEN
           loads DIR (e.g. written by ot_model_save_hf) with ViTForImageClassification and
           prints the largest difference of its logits from GOLDEN's on GOLDEN's images.
       PYTHON tools/gen_vit_golden.py --mean [OUTDIR]
           for each <OUTDIR>/hf_vit_<case>/ written above: logits_mean.safetensors, the logits
           of the same model with mean pooling as timm's global_pool='avg' has it (the mean of
           the last block's patch tokens, CLS left out, then the final LayerNorm as timm's
           fc_norm, then the classifier) on the same pixel_values.

Writes <OUTDIR>/hf_vit_<case>/ with what save_pretrained writes (config.json,
model.safetensors) plus logits.safetensors: pixel_values [B, C, H, W] (F32) and their
logits [B, labels] (F32), and, for the interpolated case, pixel_values_interp (another
image size) and logits_interp (interpolate_pos_encoding=True).
Tiny random models at odd shapes (image sides that the patch does not divide, 3 heads,
odd label counts); every parameter gets extra noise (LayerNorm gains are not 1).
"""
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import ViTConfig, ViTForImageClassification

CASES = {
    # name: config, batch, interpolated image size (None: none)
    "a": (dict(image_size=20, patch_size=8, num_channels=3, hidden_size=12, num_hidden_layers=2,
               num_attention_heads=3, intermediate_size=19, num_labels=7, hidden_act="gelu"), 2, (29, 21)),
    "b": (dict(image_size=13, patch_size=4, num_channels=1, hidden_size=18, num_hidden_layers=1,
               num_attention_heads=3, intermediate_size=24, num_labels=5, hidden_act="gelu_new",
               layer_norm_eps=1e-6), 3, None),
}


def make(outdir, name, kw, B, interp):
    torch.manual_seed(ord(name))
    cfg = ViTConfig(**kw)
    model = ViTForImageClassification(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    d = os.path.join(outdir, "hf_vit_" + name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    S, C = cfg.image_size, cfg.num_channels
    g = torch.Generator().manual_seed(7)
    x = torch.randn(B, C, S, S, generator=g)
    out = {"pixel_values": x}
    with torch.no_grad():
        out["logits"] = model(pixel_values=x).logits.float().contiguous()
        if interp:
            xi = torch.randn(B, C, interp[0], interp[1], generator=g)
            out["pixel_values_interp"] = xi
            out["logits_interp"] = model(pixel_values=xi, interpolate_pos_encoding=True).logits.float().contiguous()
    save_file(out, os.path.join(d, "logits.safetensors"))
    print("%s: %s" % (d, {k: tuple(v.shape) for k, v in out.items()}))


def check(d, golden):
    model = ViTForImageClassification.from_pretrained(d).eval()
    g = load_file(golden)
    with torch.no_grad():
        y = model(pixel_values=g["pixel_values"]).logits
    print("%s: max |logits - golden| = %.3g" % (d, (y - g["logits"]).abs().max().item()))


def mean_pooled(outdir, name):
    d = os.path.join(outdir, "hf_vit_" + name)
    model = ViTForImageClassification.from_pretrained(d).eval()
    x = load_file(os.path.join(d, "logits.safetensors"))["pixel_values"]
    with torch.no_grad():
        out = model.vit(pixel_values=x, output_hidden_states=True)
        last = out.hidden_states[-1]   # the last block's output, before the final LayerNorm
        # (the CLS path as a check of that reading: LayerNorm(last)[:, 0] -> the HF logits)
        cls = model.classifier(model.vit.layernorm(last)[:, 0])
        assert (cls - model(pixel_values=x).logits).abs().max().item() < 1e-5
        logits = model.classifier(model.vit.layernorm(last[:, 1:].mean(dim=1)))
    save_file({"pixel_values": x, "logits": logits.float().contiguous()},
              os.path.join(d, "logits_mean.safetensors"))
    print("%s: logits_mean %s" % (d, tuple(logits.shape)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "--mean":
        outdir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "tests", "golden")
        for name in CASES:
            mean_pooled(outdir, name)
    else:
        outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "golden")
        for name, (kw, B, interp) in CASES.items():
            make(outdir, name, kw, B, interp)
