#!/usr/bin/python3
"""Hugging Face checkpoints for tests/test_model.c's loader test, made with the
`transformers` library (not needed by CI: the outputs are committed).

Usage:
  /usr/bin/python3 -m pip install --target /tmp/hfpy "transformers==4.40.2"
  rm -rf /tmp/hfpy/numpy*          # keep Debian's numpy, which torch 1.13 is built against
  PYTHONPATH=/tmp/hfpy /usr/bin/python3 tools/gen_hf_golden.py [outdir]   (default: tests/golden)

Writes <outdir>/hf_gpt2/ and <outdir>/hf_llama/, each with what save_pretrained
writes (config.json + model.safetensors) and logits.safetensors holding
tokens [B, T] (I32) and the model's float32 logits [B, T, V] (F32).
Tiny randomly initialised models: vocab 50, hidden 32, 2 layers, 4 heads
(Llama: 2 kv heads, SwiGLU 64, untied), max 16 positions; every parameter
gets extra noise so that LayerNorm gains/biases are not 1/0.
"""
import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import Golden  # noqa: E402

torch.set_default_dtype(torch.float32)   # gen_golden sets float64; checkpoints are F32

B, T, V = 2, 8, 50


def save(model, outdir, name):
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(d, safe_serialization=True)
    os.chmod(os.path.join(d, "model.safetensors"), 0o644)
    for extra in ("generation_config.json",):
        p = os.path.join(d, extra)
        if os.path.exists(p):
            os.remove(p)
    tokens = torch.randint(0, V, (B, T), dtype=torch.int64)
    with torch.no_grad():
        logits = model(tokens).logits.float()
    g = Golden("logits")
    g.case()
    g.prefix = ""
    g.put("tokens", tokens.to(torch.int32))
    g.put("logits", logits)
    path, size = g.write(d)
    total = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print("%-28s %7d bytes in %s" % (os.path.relpath(d), total, ", ".join(sorted(os.listdir(d)))))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
    torch.manual_seed(77)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=16,
                                      initializer_range=0.1))
    save(gpt2, outdir, "hf_gpt2")
    torch.manual_seed(78)
    cfg = LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=0.1,
                      attn_implementation="eager")
    save(LlamaForCausalLM(cfg), outdir, "hf_llama")


if __name__ == "__main__":
    main()
