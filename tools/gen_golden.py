#!/usr/bin/python3
"""Golden files for tests/test_golden.c, computed with PyTorch.

Usage:  /usr/bin/python3 tools/gen_golden.py [outdir]     (default: tests/golden)

Each op gets tests/golden/<op>.safetensors holding, for 1-2 small odd shapes
("cases"), the inputs, the outputs and the gradients of the op with the exact
semantics of include/ot/ops.h. Inputs are drawn in float32 (so the C side sees
the very same numbers), everything is computed in float64 by torch (autograd
for gradients) and stored as F32; token/target ids and kv_len are I32.
The safetensors format is written by hand here (no `safetensors` package).

Conventions
  * tensor names are "c<i>.<name>" for case i; metadata (all strings) holds
    "op", "cases" and the per-case scalars "c<i>.<key>" (integers, floats
    written with repr(), flags as "0"/"1").
  * a "loss" is implicit: gradients are those of sum(out * d<out>) for the
    given upstream gradients d<out> (dy, dout, ...), i.e. vector-Jacobian
    products; parameter gradients are the full gradient (the C test starts
    its += accumulators from zero).

Files, per case (shapes in brackets):
  linear     meta M N K act(none|gelu). x[M,K] w[N,K] b[N] dy[M,N] ->
             y[M,N] (= act(x w^T + b), GELU tanh form), pre[M,N] (x w^T + b,
             gelu only), dx[M,K] dw[N,K] db[N].
  qkv        meta B T C Hq Hkv D. x[B,T,C] w[(Hq+2Hkv)D,C] b[(Hq+2Hkv)D]
             dq[B,Hq,T,D] dk,dv[B,Hkv,T,D] -> q[B,Hq,T,D] k,v[B,Hkv,T,D]
             dx[B,T,C] dw db. Rows of w: q heads, then k heads, then v heads.
  embed      meta B T C V Tpos. tokens[B*T] (I32, with repeats) wte[V,C]
             wpe[Tpos,C] dout[B*T,C] -> out[B*T,C] dwte[V,C] dwpe[T,C].
  layernorm  meta N C eps has_r has_beta. x[N,C] r[N,C] g[C] beta[C] dy[N,C]
             dres[N,C] -> y[N,C] res[N,C] (= x + r) mean[N] rstd[N] (biased
             variance) dx[N,C] (gradient of x and of r, includes dres) dg[C]
             dbeta[C]. Without r: res = x and no dres; without beta: no dbeta.
  rmsnorm    same keys without beta/mean: y = res * rstd * g,
             rstd = 1/sqrt(mean(res^2) + eps).
  gelu       meta n. x[n] dy[n] -> y[n] dx[n]   (tanh approximation).
  swiglu     meta N F. x[N,2F] (= [gate | up]) dy[N,F] -> y[N,F] dx[N,2F].
  rope       meta B H T D rot pos0 base style(neox|gptj) Tmax. x[B,H,T,D]
             dy -> y (rotated) dx. Row t has position pos0 + t; NeoX pairs
             (i, i + rot/2), GPT-J pairs (2i, 2i+1); angle pos*base^(-2i/rot).
  softmax    meta N V. x[N,V] dy -> y dx.
  xent       meta N V ld ignore_index count. logits[N,ld] (columns >= V are
             padding holding large values that must be ignored) targets[N]
             (I32, some == ignore_index) -> row_loss[N] mean_loss[1]
             (= sum row_loss / count) dlogits[N,ld] (= (softmax - onehot) /
             count; 0 in padding columns and ignored rows).
  xent_ls    as xent plus meta eps (label smoothing, f32): row_loss = PyTorch
             F.cross_entropy(..., label_smoothing=eps, reduction='none'), mean_loss
             = the 'sum' reduction / count, dlogits its gradient.
  adamw      meta n steps lr beta1 beta2 eps weight_decay grad_scale.
             p0[n] g1..g3[n] (raw gradients; the op scales them by grad_scale)
             -> p1..p3[n] (after each torch.optim.AdamW step), m3 v3[n]
             (exp_avg, exp_avg_sq after the last step).
  attention  meta B Hq Hkv Tq Tk D causal scale (0 = 1/sqrt(D) rounded to f32)
             has_kv_len. q[B,Hq,Tq,D] k,v[B,Hkv,Tk,D] kv_len[B] (I32, if any)
             dout[B,Hq,Tq,D] -> o[B,Hq,Tq,D] lse[B,Hq,Tq] (natural log; -inf for
             a row that sees no key, whose o and gradients are 0) dq dk dv.
             Causal is bottom-right aligned: query i sees key j iff
             j <= i + Tk - Tq; keys j >= kv_len[b] are masked; GQA: query
             head h uses kv head h // (Hq/Hkv). The mask is built explicitly.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


# ---------------------------------------------------------------- writer ----
class Golden:
    def __init__(self, op):
        self.op = op
        self.tensors = []          # (name, np.ndarray)
        self.meta = {"op": op}
        self.ncase = 0

    def case(self):
        self.prefix = "c%d." % self.ncase
        self.ncase += 1
        return self

    def put(self, name, t):
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu().numpy()
        a = np.asarray(t)
        a = a.astype(np.int32 if a.dtype.kind in "iu" else np.float32)
        self.tensors.append((self.prefix + name, np.ascontiguousarray(a)))

    def set(self, key, value):
        if isinstance(value, bool):
            value = "1" if value else "0"
        elif isinstance(value, float):
            value = repr(value)
        self.meta[self.prefix + key] = str(value)

    def write(self, outdir):
        self.meta["cases"] = str(self.ncase)
        header = {"__metadata__": self.meta}
        off = 0
        for name, a in self.tensors:
            dt = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}[a.dtype]
            header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
            off += a.nbytes
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * ((8 - (8 + len(h)) % 8) % 8)
        path = os.path.join(outdir, self.op + ".safetensors")
        with open(path + ".tmp", "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for _, a in self.tensors:
                f.write(a.astype(a.dtype.newbyteorder("<")).tobytes())
        os.replace(path + ".tmp", path)
        return path, 8 + len(h) + off


def rnd(*shape, scale=1.0, shift=0.0):
    """float32 normal draw (* scale + shift, in f32) promoted to float64, so the
    value is exactly representable in f32 and the C side sees the same input."""
    return (torch.randn(*shape, dtype=torch.float32) * scale + shift).double()


def r32(t):
    return t.float().double()


def f32(x):
    return float(np.float32(x))


def leaf(t):
    return t.clone().requires_grad_(True)


# ------------------------------------------------------------------- ops ----
def gen_linear(g):
    for M, N, K, act in [(5, 7, 9, "none"), (3, 11, 6, "gelu")]:
        g.case()
        x, w, b, dy = leaf(rnd(M, K)), leaf(rnd(N, K, scale=0.5)), leaf(rnd(N)), rnd(M, N)
        pre = x @ w.T + b
        y = F.gelu(pre, approximate="tanh") if act == "gelu" else pre
        (y * dy).sum().backward()
        for k, v in dict(M=M, N=N, K=K, act=act).items(): g.set(k, v)
        for k, v in dict(x=x, w=w, b=b, dy=dy, y=y, dx=x.grad, dw=w.grad, db=b.grad).items(): g.put(k, v)
        if act == "gelu": g.put("pre", pre)


def gen_qkv(g):
    for B, T, C, Hq, Hkv, D in [(2, 3, 8, 4, 2, 3), (1, 5, 6, 2, 2, 5)]:
        g.case()
        R = (Hq + 2 * Hkv) * D
        x, w, b = leaf(rnd(B, T, C)), leaf(rnd(R, C, scale=0.5)), leaf(rnd(R))
        y = x @ w.T + b                                   # [B, T, R]
        heads = lambda y0, H: y0.reshape(B, T, H, D).transpose(1, 2)
        q = heads(y[..., :Hq * D], Hq)
        k = heads(y[..., Hq * D:(Hq + Hkv) * D], Hkv)
        v = heads(y[..., (Hq + Hkv) * D:], Hkv)
        dq, dk, dv = rnd(*q.shape), rnd(*k.shape), rnd(*v.shape)
        ((q * dq).sum() + (k * dk).sum() + (v * dv).sum()).backward()
        for kk, vv in dict(B=B, T=T, C=C, Hq=Hq, Hkv=Hkv, D=D).items(): g.set(kk, vv)
        for kk, vv in dict(x=x, w=w, b=b, dq=dq, dk=dk, dv=dv, q=q, k=k, v=v,
                           dx=x.grad, dw=w.grad, db=b.grad).items(): g.put(kk, vv)


def gen_embed(g):
    g.case()
    B, T, C, V, Tpos = 2, 3, 5, 7, 4
    tokens = torch.tensor([3, 0, 6, 3, 3, 1], dtype=torch.int64)   # repeats accumulate
    wte, wpe = leaf(rnd(V, C)), leaf(rnd(Tpos, C))
    pos = torch.arange(T).repeat(B)
    out = wte[tokens] + wpe[pos]
    dout = rnd(B * T, C)
    (out * dout).sum().backward()
    for k, v in dict(B=B, T=T, C=C, V=V, Tpos=Tpos).items(): g.set(k, v)
    for k, v in dict(tokens=tokens, wte=wte, wpe=wpe, dout=dout, out=out,
                     dwte=wte.grad, dwpe=wpe.grad[:T]).items(): g.put(k, v)


def gen_norm(g, kind):
    cases = [(5, 7, True, True), (3, 33, False, False)]
    for N, C, has_r, has_beta in cases:
        g.case()
        eps = 1e-5
        x = leaf(rnd(N, C, shift=0.5))
        r = leaf(rnd(N, C)) if has_r else None
        gain = leaf(rnd(C, scale=0.3, shift=1.0))
        beta = leaf(rnd(C, scale=0.3)) if (has_beta and kind == "layernorm") else None
        res = x + r if has_r else x * 1.0
        if kind == "layernorm":
            mean = res.mean(-1, keepdim=True)
            var = ((res - mean) ** 2).mean(-1, keepdim=True)
            rstd = 1.0 / torch.sqrt(var + eps)
            y = (res - mean) * rstd * gain + (beta if beta is not None else 0.0)
        else:
            rstd = 1.0 / torch.sqrt((res * res).mean(-1, keepdim=True) + eps)
            y = res * rstd * gain
        dy = rnd(N, C)
        loss = (y * dy).sum()
        dres = rnd(N, C) if has_r else None
        if dres is not None: loss = loss + (res * dres).sum()
        loss.backward()
        for k, v in dict(N=N, C=C, eps=eps, has_r=has_r).items(): g.set(k, v)
        if kind == "layernorm": g.set("has_beta", beta is not None)
        g.put("x", x); g.put("g", gain); g.put("dy", dy)
        g.put("y", y); g.put("res", res); g.put("rstd", rstd.reshape(N))
        g.put("dx", x.grad); g.put("dg", gain.grad)
        if has_r: g.put("r", r); g.put("dres", dres)
        if kind == "layernorm":
            g.put("mean", mean.reshape(N))
            if beta is not None: g.put("beta", beta); g.put("dbeta", beta.grad)


def gen_gelu(g):
    g.case()
    n = 37
    x = leaf(r32(torch.linspace(-6, 6, n) + rnd(n, scale=0.05)))
    y = F.gelu(x, approximate="tanh")
    dy = rnd(n)
    (y * dy).sum().backward()
    g.set("n", n)
    for k, v in dict(x=x, dy=dy, y=y, dx=x.grad).items(): g.put(k, v)


def gen_swiglu(g):
    g.case()
    N, Fd = 3, 7
    x = leaf(rnd(N, 2 * Fd, scale=2.0))
    y = F.silu(x[:, :Fd]) * x[:, Fd:]
    dy = rnd(N, Fd)
    (y * dy).sum().backward()
    for k, v in dict(N=N, F=Fd).items(): g.set(k, v)
    for k, v in dict(x=x, dy=dy, y=y, dx=x.grad).items(): g.put(k, v)


def gen_rope(g):
    for style, (B, H, T, D, rot, pos0) in [("neox", (1, 2, 3, 10, 6, 2)), ("gptj", (2, 1, 3, 7, 4, 5))]:
        g.case()
        base = 10000.0
        x = leaf(rnd(B, H, T, D))
        half = rot // 2
        pos = torch.arange(pos0, pos0 + T, dtype=torch.float64)
        inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / rot)
        ang = pos[:, None] * inv[None, :]                   # [T, half]
        c, s = torch.cos(ang), torch.sin(ang)
        if style == "neox":
            i1, i2 = list(range(half)), list(range(half, rot))
        else:
            i1, i2 = list(range(0, rot, 2)), list(range(1, rot, 2))
        x1, x2 = x[..., i1], x[..., i2]
        y = x.clone()
        y[..., i1] = x1 * c - x2 * s
        y[..., i2] = x2 * c + x1 * s
        dy = rnd(B, H, T, D)
        (y * dy).sum().backward()
        for k, v in dict(B=B, H=H, T=T, D=D, rot=rot, pos0=pos0, base=base, style=style,
                         Tmax=pos0 + T + 1).items(): g.set(k, v)
        for k, v in dict(x=x, dy=dy, y=y, dx=x.grad).items(): g.put(k, v)


def gen_softmax(g):
    g.case()
    N, V = 3, 11
    x = leaf(rnd(N, V, scale=3.0))
    y = torch.softmax(x, -1)
    dy = rnd(N, V)
    (y * dy).sum().backward()
    for k, v in dict(N=N, V=V).items(): g.set(k, v)
    for k, v in dict(x=x, dy=dy, y=y, dx=x.grad).items(): g.put(k, v)


def gen_xent(g):
    for N, V, ld, targets, count in [(5, 9, 12, [3, -100, 8, 0, 3], 4.0),
                                     (3, 13, 13, [12, 5, -100], 7.0)]:
        g.case()
        ignore = -100
        logits = rnd(N, ld, scale=2.0)
        logits[:, V:] = 30.0                                 # padding must be ignored
        z = leaf(logits[:, :V])
        t = torch.tensor(targets)
        keep = t != ignore
        row = torch.zeros(N)
        lp = torch.log_softmax(z, -1)
        row = torch.where(keep, -lp.gather(1, t.clamp(min=0)[:, None])[:, 0], row)
        mean = row.sum() / count
        mean.backward()
        dl = torch.zeros(N, ld)
        dl[:, :V] = z.grad
        for k, v in dict(N=N, V=V, ld=ld, ignore_index=ignore, count=count).items(): g.set(k, v)
        g.put("logits", logits); g.put("targets", t)
        g.put("row_loss", row); g.put("mean_loss", mean.reshape(1)); g.put("dlogits", dl)


def gen_xent_ls(g):
    for N, V, ld, targets, count, eps in [(5, 9, 12, [3, -100, 8, 0, 3], 4.0, 0.1),
                                          (3, 13, 13, [12, 5, -100], 7.0, 0.25),
                                          (4, 33, 40, [0, 32, 7, 7], 3.0, 0.9)]:
        g.case()
        ignore = -100
        logits = rnd(N, ld, scale=2.0)
        logits[:, V:] = 30.0                                 # padding must be ignored
        z = leaf(logits[:, :V])
        t = torch.tensor(targets)
        row = F.cross_entropy(z, t, ignore_index=ignore, label_smoothing=eps, reduction="none")
        mean = F.cross_entropy(z, t, ignore_index=ignore, label_smoothing=eps,
                               reduction="sum") / count
        mean.backward()
        dl = torch.zeros(N, ld)
        dl[:, :V] = z.grad
        for k, v in dict(N=N, V=V, ld=ld, ignore_index=ignore, count=count,
                         eps=f32(eps)).items(): g.set(k, v)
        g.put("logits", logits); g.put("targets", t)
        g.put("row_loss", row); g.put("mean_loss", mean.reshape(1)); g.put("dlogits", dl)


def gen_adamw(g):
    for n, lr, wd, gs in [(13, 1e-2, 0.1, 1.0), (5, 3e-3, 0.0, 0.25)]:
        g.case()
        b1, b2, eps, steps = 0.9, 0.999, 1e-8, 3
        lr, wd, gs = f32(lr), f32(wd), f32(gs)      # the C config holds floats
        b1f, b2f, epsf = f32(b1), f32(b2), f32(eps)
        p = torch.nn.Parameter(rnd(n))
        g.put("p0", p)
        opt = torch.optim.AdamW([p], lr=lr, betas=(b1f, b2f), eps=epsf, weight_decay=wd)
        for s in range(1, steps + 1):
            graw = rnd(n, scale=0.1 * s)
            g.put("g%d" % s, graw)
            p.grad = graw * gs
            opt.step()
            g.put("p%d" % s, p)
        st = opt.state[p]
        g.put("m%d" % steps, st["exp_avg"]); g.put("v%d" % steps, st["exp_avg_sq"])
        for k, v in dict(n=n, steps=steps, lr=lr, beta1=b1f, beta2=b2f, eps=epsf,
                         weight_decay=wd, grad_scale=gs).items(): g.set(k, v)


def gen_attention(g):
    for B, Hq, Hkv, Tq, Tk, D, causal, scale, kv_len in [
            (2, 4, 2, 3, 5, 7, True, 0.0, [5, 4]),
            (1, 2, 2, 4, 3, 5, True, 0.3, None)]:   # Tq > Tk: query row 0 sees no key
        g.case()
        q, k, v = leaf(rnd(B, Hq, Tq, D)), leaf(rnd(B, Hkv, Tk, D)), leaf(rnd(B, Hkv, Tk, D))
        sc = scale if scale != 0.0 else f32(1.0 / math.sqrt(D))
        G = Hq // Hkv
        ke, ve = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
        s = (q @ ke.transpose(-1, -2)) * sc                 # [B, Hq, Tq, Tk]
        i = torch.arange(Tq)[:, None]
        j = torch.arange(Tk)[None, :]
        vis = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
        if causal: vis = vis & (j <= i + (Tk - Tq))
        if kv_len is not None:
            vis = vis & (j[None, None] < torch.tensor(kv_len)[:, None, None, None])
        vis = vis.expand(B, Hq, Tq, Tk)
        any_ = vis.any(-1, keepdim=True)
        s_m = s.masked_fill(~vis, float("-inf")).masked_fill(~any_, 0.0)
        p = torch.softmax(s_m, -1) * any_
        o = p @ ve
        lse = torch.logsumexp(s_m, -1).masked_fill(~any_[..., 0], float("-inf"))
        dout = rnd(B, Hq, Tq, D)
        (o * dout).sum().backward()
        for kk, vv in dict(B=B, Hq=Hq, Hkv=Hkv, Tq=Tq, Tk=Tk, D=D, causal=causal, scale=scale,
                           has_kv_len=kv_len is not None).items(): g.set(kk, vv)
        for kk, vv in dict(q=q, k=k, v=v, dout=dout, o=o, lse=lse,
                           dq=q.grad, dk=k.grad, dv=v.grad).items(): g.put(kk, vv)
        if kv_len is not None: g.put("kv_len", torch.tensor(kv_len))


GENS = {
    "linear": gen_linear, "qkv": gen_qkv, "embed": gen_embed,
    "layernorm": lambda g: gen_norm(g, "layernorm"), "rmsnorm": lambda g: gen_norm(g, "rmsnorm"),
    "gelu": gen_gelu, "swiglu": gen_swiglu, "rope": gen_rope, "softmax": gen_softmax,
    "xent": gen_xent, "adamw": gen_adamw, "attention": gen_attention,
    "xent_ls": gen_xent_ls,
}


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
    os.makedirs(outdir, exist_ok=True)
    total = 0
    for i, (op, fn) in enumerate(GENS.items()):
        torch.manual_seed(1000 + i)
        g = Golden(op)
        fn(g)
        path, size = g.write(outdir)
        assert size < 100_000, (path, size)
        total += size
        print("%-40s %6d bytes, %d tensors" % (os.path.relpath(path), size, len(g.tensors)))
    print("total %d bytes" % total)
    assert total < 1_000_000


if __name__ == "__main__":
    main()
