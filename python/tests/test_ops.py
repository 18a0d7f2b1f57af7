"""Block-sparse attention, fused norms, RoPE, linear + cross-entropy, AdamW against torch."""
import pytest
import torch
import torch.nn.functional as F

import ops_transformer as ot
from ops_transformer import attention
from conftest import rel_err

DT = [torch.float32, torch.bfloat16]
TOL = {torch.float32: 2e-5, torch.bfloat16: 3e-2}


def _grads(out, inputs, g):
    return torch.autograd.grad(out, inputs, g, allow_unused=True)


def _leaf(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype).requires_grad_()


# ------------------------------------------------------------- block-sparse ----
@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("cfg", [  # (B, Hq, Hkv, Tq, Tk, D, block, window, global, causal)
    (1, 2, 2, 200, 200, 16, 16, 3, 10, False), (2, 4, 2, 130, 130, 32, 32, 3, 5, True),
    (1, 2, 1, 37, 90, 8, 8, 2, 0, True), (1, 1, 1, 1, 1, 8, 64, 3, 10, False),
    (1, 3, 3, 129, 129, 24, 64, 3, 10, False)])
def test_block_sparse_matches_dense_masked(cfg, dtype):
    B, Hq, Hkv, Tq, Tk, D, bs, w, gt, causal = cfg
    m = ot.BlockSparseAttention(block_size=bs, local_window=w, global_tokens=gt, causal=causal)
    q, k, v = _leaf(B, Hq, Tq, D, dtype=dtype), _leaf(B, Hkv, Tk, D, dtype=dtype), _leaf(B, Hkv, Tk, D, dtype=dtype)
    o = m(q, k, v)
    g = torch.randn(o.shape).to(dtype)
    ours = (o,) + _grads(o, (q, k, v), g)
    qr, kr, vr = (t.detach().float().requires_grad_() for t in (q, k, v))
    r = attention.torch_sdpa(qr, kr, vr, attn_mask=m.mask(Tq, Tk), enable_gqa=True)
    ref = (r,) + _grads(r, (qr, kr, vr), g.float())
    for a, b in zip(ours, ref):
        assert a.dtype == dtype and rel_err(a, b) < TOL[dtype]


def test_block_sparse_mask_is_the_librarys():
    from ops_transformer import _lib
    import ctypes
    m = ot.BlockSparseAttention(block_size=8, local_window=3, global_tokens=5, causal=True)
    s = _lib.AttnShape(1, 1, 1, 40, 50, 8, True, None, 0.0, 0.0, 0, 0)
    lay = _lib.SparseLayout(8, 3, 5)
    buf = torch.empty(40, 50, dtype=torch.uint8)
    _lib.check(_lib.lib.ot_attn_sparse_mask(buf.data_ptr(), ctypes.byref(s), ctypes.byref(lay)))
    assert torch.equal(buf.bool(), m.mask(40, 50))


def test_block_sparse_bad_arguments():
    with pytest.raises(ValueError, match="block_size"):
        ot.BlockSparseAttention(block_size=0)
    m = ot.BlockSparseAttention()
    x = torch.randn(1, 3, 8, 8)
    with pytest.raises(ValueError, match="not a multiple of Hkv"):
        m(x, torch.randn(1, 2, 8, 8), torch.randn(1, 2, 8, 8))


# -------------------------------------------------------------------- norms ----
@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("shape", [(1, 3), (3, 7, 33), (2, 5, 256), (64, 129)])
@pytest.mark.parametrize("with_res", [False, True])
@pytest.mark.parametrize("kind", ["ln", "ln_nobias", "rms"])
def test_norms(kind, with_res, shape, dtype):
    C = shape[-1]
    x = _leaf(*shape, dtype=dtype)
    r = _leaf(*shape, dtype=dtype) if with_res else None
    w = (torch.randn(C) * 0.5 + 1).requires_grad_()
    b = torch.randn(C).requires_grad_() if kind == "ln" else None
    if kind == "rms":
        y, s = ot.fused_add_rms_norm(x, r, w, eps=1e-6)
    else:
        y, s = ot.fused_add_layer_norm(x, r, w, b, eps=1e-5)
    gy, gs = torch.randn(shape), torch.randn(shape)
    leaves = [t for t in (x, r, w, b) if t is not None]
    ours = (y, s) + _grads((y, s), leaves, (gy.to(dtype), gs.to(dtype)))
    xf = x.detach().float().requires_grad_()
    rf = r.detach().float().requires_grad_() if with_res else None
    wf = w.detach().clone().requires_grad_()
    bf = b.detach().clone().requires_grad_() if b is not None else None
    sf = xf + rf if with_res else xf
    if kind == "rms":
        yf = sf * torch.rsqrt(sf.pow(2).mean(-1, keepdim=True) + 1e-6) * wf
    else:
        yf = F.layer_norm(sf, (C,), wf, bf, 1e-5)
    lf = [t for t in (xf, rf, wf, bf) if t is not None]
    ref = (yf, sf) + _grads((yf, sf), lf, (gy.to(dtype).float(), gs.to(dtype).float()))
    assert y.dtype == dtype and s.dtype == dtype
    # gains' gradients sum over rows: bf16 rounding of the inputs adds up
    for i, (a, c) in enumerate(zip(ours, ref)):
        assert rel_err(a, c, floor=1.0) < TOL[dtype] * (3 if i >= 4 else 1), i


def test_norm_modules_and_errors():
    ln = ot.FusedAddLayerNorm(16)
    x = torch.randn(4, 16)
    y, s = ln(x)
    assert rel_err(y, torch.nn.functional.layer_norm(x, (16,), ln.weight, ln.bias)) < 1e-5 and s is x
    rms = ot.FusedAddRMSNorm(16)
    assert rms(x, x)[0].shape == x.shape
    with pytest.raises(ValueError, match="eps"):
        ot.fused_add_layer_norm(x, None, ln.weight, eps=0.0)


# --------------------------------------------------------------------- RoPE ----
def _rope_ref(x, pos0, base, rot, style):
    B, H, T, D = x.shape
    inv = 1.0 / base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)
    ang = (torch.arange(pos0, pos0 + T, dtype=torch.float64).view(-1, 1) * inv).float()   # [T, rot/2]
    cos, sin = ang.cos(), ang.sin()
    xr, xp = x[..., :rot], x[..., rot:]
    if style == "neox":       # Hugging Face rotate_half
        c, s = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
        x1, x2 = xr[..., : rot // 2], xr[..., rot // 2:]
        out = xr * c + torch.cat([-x2, x1], -1) * s
    else:                     # GPT-J: interleaved pairs
        c, s = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
        rh = torch.stack([-xr[..., 1::2], xr[..., ::2]], -1).flatten(-2)
        out = xr * c + rh * s
    return torch.cat([out, xp], -1)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("cfg", [(1, 1, 1, 8, None, 0), (2, 3, 17, 64, None, 5),
                                 (1, 2, 9, 40, 20, 0), (2, 4, 33, 128, 64, 100)])
def test_rope(cfg, style, dtype):
    B, H, T, D, rot, pos0 = cfg
    x = _leaf(B, H, T, D, dtype=dtype)
    y = ot.apply_rope(x, pos0=pos0, base=10000.0, rot_dims=rot, style=style)
    g = torch.randn(y.shape).to(dtype)
    (dx,) = _grads(y, (x,), g)
    xf = x.detach().float().requires_grad_()
    yr = _rope_ref(xf, pos0, 10000.0, rot or D, style)
    (dxr,) = _grads(yr, (xf,), g.float())
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert y.dtype == dtype and rel_err(y, yr) < tol and rel_err(dx, dxr) < tol


def test_rope_errors():
    with pytest.raises(ValueError, match="style"):
        ot.apply_rope(torch.randn(1, 1, 2, 8), style="x")
    with pytest.raises(ValueError, match="rot"):
        ot.apply_rope(torch.randn(1, 1, 2, 8), rot_dims=7)


# ------------------------------------------------------ linear + cross-entropy ----
@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("cfg", [(1, 8, 5, 1), (37, 32, 101, 8), (300, 64, 1000, 128), (10, 16, 7, 1024)])
def test_linear_cross_entropy(cfg, dtype):
    N, C, V, chunk = cfg
    x, w = _leaf(N, C, dtype=dtype), (torch.randn(V, C) * 0.3).to(dtype).requires_grad_()
    t = torch.randint(0, V, (N,))
    t[::3] = -100
    if N == 1:
        t[0] = 2
    loss = ot.linear_cross_entropy(x, w, t, chunk=chunk)
    dx, dw = torch.autograd.grad(loss * 2.0, (x, w))
    xf, wf = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    ref = F.cross_entropy(xf @ wf.t(), t)
    dxr, dwr = torch.autograd.grad(ref * 2.0, (xf, wf))
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert abs(loss.item() - ref.item()) < tol * max(1, ref.item())
    assert dx.dtype == dtype and dw.dtype == dtype
    assert rel_err(dx, dxr) < tol and rel_err(dw, dwr) < tol


def test_linear_cross_entropy_errors_and_edge():
    x, w = torch.randn(4, 8), torch.randn(10, 8)
    with pytest.raises(ValueError, match="target"):
        ot.linear_cross_entropy(x, w, torch.tensor([0, 1, 2, 10]))
    assert torch.isnan(ot.linear_cross_entropy(x, w, torch.full((4,), -100)))
    assert torch.isnan(F.cross_entropy(x @ w.t(), torch.full((4,), -100)))


# -------------------------------------------------------------------- AdamW ----
def test_adamw_matches_torch():
    torch.manual_seed(3)
    shapes = [(7,), (33, 17), (128, 64)]
    ps = [torch.randn(s, requires_grad=True) for s in shapes]
    pr = [p.detach().clone().requires_grad_() for p in ps]
    kw = dict(lr=1e-2, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
    opt, ref = ot.AdamW(ps, **kw), torch.optim.AdamW(pr, **kw)
    for _ in range(6):
        grads = [torch.randn(s) for s in shapes]
        for p, q, g in zip(ps, pr, grads):
            p.grad, q.grad = g.clone(), g.clone()
        opt.step()
        ref.step()
    for p, q in zip(ps, pr):
        assert rel_err(p, q, floor=1.0) < 1e-6
        assert rel_err(opt.state[p]["exp_avg_sq"], ref.state[q]["exp_avg_sq"], floor=1e-3) < 1e-6


def test_adamw_errors_and_defaults():
    p = torch.nn.Parameter(torch.randn(4, dtype=torch.float64))
    p.grad = torch.ones_like(p)
    with pytest.raises(TypeError, match="float32"):
        ot.AdamW([p]).step()
    with pytest.raises(ValueError, match="amsgrad"):
        ot.AdamW([p], amsgrad=True)
    d = ot.AdamW([torch.nn.Parameter(torch.randn(2))]).defaults
    t = torch.optim.AdamW([torch.nn.Parameter(torch.randn(2))]).defaults
    assert all(d[k] == t[k] for k in ("lr", "betas", "eps", "weight_decay"))


def test_compile_fused_ops():
    # a small model of the fused ops: compiled (fullgraph) equals eager
    torch.manual_seed(0)
    w_ln, w_out = torch.ones(32, requires_grad=True), torch.randn(50, 32, requires_grad=True)
    t = torch.randint(0, 50, (2 * 9,))

    def f(x, r):
        y, s = ot.fused_add_rms_norm(x, r, w_ln)
        h = ot.apply_rope(y.view(2, 9, 4, 8).transpose(1, 2), style="gptj")
        h = ot.BlockSparseAttention(4, 2, 1, causal=True)(h, h, h).transpose(1, 2).reshape(2, 9, 32)
        return ot.linear_cross_entropy(h + s, w_out, t)
    x, r = torch.randn(2, 9, 32), torch.randn(2, 9, 32)
    eager = f(x, r)
    ge = torch.autograd.grad(eager, (w_ln, w_out))
    torch._dynamo.reset()
    comp = torch.compile(f, fullgraph=True)(x, r)
    gc = torch.autograd.grad(comp, (w_ln, w_out))
    assert abs(comp.item() - eager.item()) < 1e-5
    for a, b in zip(gc, ge):
        assert rel_err(a, b) < 1e-5


def test_bad_arguments_raise_not_crash():
    x = torch.randn(4, 8)
    cases = [
        (lambda: ot.fused_add_layer_norm(x, None, torch.ones(7)), "weight"),
        (lambda: ot.fused_add_rms_norm(x, torch.randn(4, 9), torch.ones(8)), "residual"),
        (lambda: ot.fused_add_rms_norm(x.double(), None, torch.ones(8)), "float64"),
        (lambda: ot.fused_add_rms_norm(x, x.bfloat16(), torch.ones(8)), "dtype"),
        (lambda: ot.apply_rope(torch.randn(1, 1, 2, 8), rot_dims=10), "rot"),
        (lambda: ot.linear_cross_entropy(x, torch.randn(5, 7), torch.zeros(4, dtype=torch.long)), "weight"),
        (lambda: ot.linear_cross_entropy(x, torch.randn(5, 8), torch.zeros(3, dtype=torch.long)), "target"),
        (lambda: ot.linear_cross_entropy(x, torch.randn(5, 8), torch.tensor([0, 1, 5, 2])), "target"),
        (lambda: ot.BlockSparseAttention()(torch.randn(1, 2, 4, 8), torch.randn(2, 2, 4, 8),
                                           torch.randn(2, 2, 4, 8)), "agree"),
        (lambda: ot.BlockSparseAttention()(torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8),
                                           torch.randn(1, 2, 5, 8)), "the same"),
        (lambda: ot.Int8Linear.from_float(torch.randn(4, 8))(torch.randn(3, 7)), "in_features"),
    ]
    for f, msg in cases:
        with pytest.raises(ValueError, match=msg):
            f()


def test_opcheck_every_op():
    # schema, fake (meta) implementations, autograd registration, AOT dispatch with dynamic shapes
    from ops_transformer import fused, quant, sparse
    utils = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
    x, r = torch.randn(6, 16, requires_grad=True), torch.randn(6, 16, requires_grad=True)
    g, b = torch.ones(16, requires_grad=True), torch.zeros(16, requires_grad=True)
    torch.library.opcheck(fused.add_norm_fwd, (x, r, g, b, 1e-5, False), test_utils=utils)
    torch.library.opcheck(fused.add_norm_fwd, (x, None, g, None, 1e-6, True), test_utils=utils)
    torch.library.opcheck(fused.rope, (torch.randn(1, 2, 5, 8, requires_grad=True), 3, 8, 10000.0, 1),
                          test_utils=utils)
    torch.library.opcheck(fused.linear_xent, (x, torch.randn(11, 16, requires_grad=True),
                                              torch.randint(0, 11, (6,)), -100, 4, True), test_utils=utils)
    qkv = [torch.randn(1, 2, 20, 8, requires_grad=True) for _ in range(3)]
    torch.library.opcheck(sparse.sparse_fwd, (*qkv, True, 0.3, 4, 2, 3), test_utils=utils)
    qd, sc = quant.quantize_weight(torch.randn(12, 32), 32)
    torch.library.opcheck(quant.int8_linear, (torch.randn(3, 32, requires_grad=True), qd, sc, None, 32),
                          test_utils=utils)
