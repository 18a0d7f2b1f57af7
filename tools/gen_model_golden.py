#!/usr/bin/python3
"""Whole-model golden files for tests/test_model.c, computed with PyTorch.

Usage:  /usr/bin/python3 tools/gen_model_golden.py [outdir]   (default: tests/golden)

Two tiny decoder models written out by hand (no `transformers`), in float64:
  model_gpt2.safetensors   GPT-2 family: LayerNorm, GELU (tanh), learned
                           positions, tied embeddings, biases, Conv1D weights
                           stored [in, out] exactly as Hugging Face does.
  model_llama.safetensors  Llama family: RMSNorm, SwiGLU, RoPE (NeoX / HF
                           rotate_half), grouped-query attention (2 kv heads
                           for 4 query heads), untied lm_head, no biases.
Both: vocab 50 (the C side pads it to 64), d_model 32, 2 layers, 4 heads,
max_seq 16, batch 2 x 8 tokens, one target set to ignore_index = -1.

Each file holds (names exactly as Hugging Face's state dicts, GPT-2 without
the "transformer." prefix):
  <hf name>          every weight (drawn in float32, so the C side sees the
                     same numbers), F32
  grad.<hf name>     d loss / d weight (float64 autograd, stored F32)
  tokens, targets    [B, T] I32
  logits             [B*T, V] F32
  loss               [1] F32: sum of token losses over non-ignored targets / count
metadata (strings): family, vocab, d_model, n_layers, n_heads, n_kv_heads, d_ff,
max_seq, eps, rope_base, B, T, ignore_index, count.
The safetensors writer is gen_golden.Golden (imported), with an empty prefix.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import Golden  # noqa: E402

torch.set_default_dtype(torch.float64)

V, C, L, H, T_MAX, B, T = 50, 32, 2, 4, 16, 2, 8
IGNORE = -1


def rnd(*shape, scale=1.0, shift=0.0):
    return (torch.randn(*shape, dtype=torch.float32) * scale + shift).double().requires_grad_(True)


def attention(q, k, v):
    """q: [B, Hq, T, D], k/v: [B, Hkv, T, D]; causal; query head h uses kv head h // (Hq/Hkv)."""
    rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    D = q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    n = q.shape[2]
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def heads(x, h):  # [B, T, h*D] -> [B, h, T, D]
    b, t, _ = x.shape
    return x.reshape(b, t, h, -1).transpose(1, 2)


def merge(x):  # [B, h, T, D] -> [B, T, h*D]
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def loss_of(logits, targets):
    lg = logits.reshape(-1, V)
    tg = targets.reshape(-1).long()
    count = int((tg != IGNORE).sum())
    loss = F.cross_entropy(lg, tg, ignore_index=IGNORE, reduction="sum") / count
    return loss, count


def batch():
    tokens = torch.randint(0, V, (B, T), dtype=torch.int32)
    targets = torch.randint(0, V, (B, T), dtype=torch.int32)
    targets[1, 3] = IGNORE
    return tokens, targets


def gpt2():
    F_ = 4 * C
    eps = 1e-5
    W = {"wte.weight": rnd(V, C, scale=0.3), "wpe.weight": rnd(T_MAX, C, scale=0.1)}
    for i in range(L):
        p = "h.%d." % i
        W[p + "ln_1.weight"] = rnd(C, scale=0.1, shift=1.0)
        W[p + "ln_1.bias"] = rnd(C, scale=0.1)
        W[p + "attn.c_attn.weight"] = rnd(C, 3 * C, scale=0.2)     # Conv1D: [in, out]
        W[p + "attn.c_attn.bias"] = rnd(3 * C, scale=0.1)
        W[p + "attn.c_proj.weight"] = rnd(C, C, scale=0.2)
        W[p + "attn.c_proj.bias"] = rnd(C, scale=0.1)
        W[p + "ln_2.weight"] = rnd(C, scale=0.1, shift=1.0)
        W[p + "ln_2.bias"] = rnd(C, scale=0.1)
        W[p + "mlp.c_fc.weight"] = rnd(C, F_, scale=0.2)
        W[p + "mlp.c_fc.bias"] = rnd(F_, scale=0.1)
        W[p + "mlp.c_proj.weight"] = rnd(F_, C, scale=0.1)
        W[p + "mlp.c_proj.bias"] = rnd(C, scale=0.1)
    W["ln_f.weight"] = rnd(C, scale=0.1, shift=1.0)
    W["ln_f.bias"] = rnd(C, scale=0.1)
    tokens, targets = batch()

    x = W["wte.weight"][tokens.long()] + W["wpe.weight"][:T]
    for i in range(L):
        p = "h.%d." % i
        h = F.layer_norm(x, (C,), W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=-1)
        o = merge(attention(heads(q, H), heads(k, H), heads(v, H)))
        x = x + o @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        h = F.gelu(h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), W["ln_f.weight"], W["ln_f.bias"], eps)
    logits = x @ W["wte.weight"].T
    meta = dict(family="gpt2", d_ff=F_, n_kv_heads=H, eps=eps, rope_base=0.0)
    return W, tokens, targets, logits, meta


def rope(x, base):  # x: [B, h, T, D], NeoX / HF rotate_half, positions 0..T-1
    D = x.shape[-1]
    inv = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(x.shape[2], dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], dim=-1)
    sin = torch.cat([ang.sin(), ang.sin()], dim=-1)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def llama():
    F_, Hkv, eps, base = 64, 2, 1e-5, 10000.0
    D = C // H
    W = {"model.embed_tokens.weight": rnd(V, C, scale=0.5)}
    for i in range(L):
        p = "model.layers.%d." % i
        W[p + "input_layernorm.weight"] = rnd(C, scale=0.1, shift=1.0)
        W[p + "self_attn.q_proj.weight"] = rnd(H * D, C, scale=0.3)
        W[p + "self_attn.k_proj.weight"] = rnd(Hkv * D, C, scale=0.3)
        W[p + "self_attn.v_proj.weight"] = rnd(Hkv * D, C, scale=0.3)
        W[p + "self_attn.o_proj.weight"] = rnd(C, H * D, scale=0.2)
        W[p + "post_attention_layernorm.weight"] = rnd(C, scale=0.1, shift=1.0)
        W[p + "mlp.gate_proj.weight"] = rnd(F_, C, scale=0.3)
        W[p + "mlp.up_proj.weight"] = rnd(F_, C, scale=0.3)
        W[p + "mlp.down_proj.weight"] = rnd(C, F_, scale=0.2)
    W["model.norm.weight"] = rnd(C, scale=0.1, shift=1.0)
    W["lm_head.weight"] = rnd(V, C, scale=0.3)
    tokens, targets = batch()

    x = W["model.embed_tokens.weight"][tokens.long()]
    for i in range(L):
        p = "model.layers.%d." % i
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        q = rope(heads(h @ W[p + "self_attn.q_proj.weight"].T, H), base)
        k = rope(heads(h @ W[p + "self_attn.k_proj.weight"].T, Hkv), base)
        v = heads(h @ W[p + "self_attn.v_proj.weight"].T, Hkv)
        x = x + merge(attention(q, k, v)) @ W[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = F.silu(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)
        x = x + g @ W[p + "mlp.down_proj.weight"].T
    x = rmsnorm(x, W["model.norm.weight"], eps)
    logits = x @ W["lm_head.weight"].T
    meta = dict(family="llama", d_ff=F_, n_kv_heads=Hkv, eps=eps, rope_base=base)
    return W, tokens, targets, logits, meta


def write(outdir, name, build):
    W, tokens, targets, logits, meta = build()
    loss, count = loss_of(logits, targets)
    loss.backward()
    g = Golden(name)
    g.case()
    g.prefix = ""                   # plain Hugging Face names
    for k, w in W.items():
        g.put(k, w)
    for k, w in W.items():
        g.put("grad." + k, w.grad)
    g.put("tokens", tokens)
    g.put("targets", targets)
    g.put("logits", logits.reshape(B * T, V))
    g.put("loss", loss.reshape(1))
    meta.update(vocab=V, d_model=C, n_layers=L, n_heads=H, max_seq=T_MAX, B=B, T=T,
                ignore_index=IGNORE, count=count)
    for k, v in meta.items():
        g.set(k, v)
    path, size = g.write(outdir)
    assert size < 300_000, (path, size)
    print("%-40s %6d bytes, %d tensors, loss %.6f" % (os.path.relpath(path), size, len(g.tensors),
                                                      float(loss)))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(4242)
    write(outdir, "model_gpt2", gpt2)
    torch.manual_seed(4243)
    write(outdir, "model_llama", llama)


if __name__ == "__main__":
    main()
