"""Fused ops: residual + LayerNorm / RMSNorm, RoPE (NeoX and GPT-J), linear + cross-entropy.

Each is a torch.library custom op (fake + autograd) over libot's kernels. Activations are
float32 or bfloat16 (f32 arithmetic); norm gains and biases are used in float32.
"""
import ctypes
import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _lib

_EMPTY = lambda t: t.new_empty((0,))


def _rows(x):
    return x.reshape(-1, x.shape[-1]).contiguous()


# ----------------------------------------------------- residual + LayerNorm ----
@torch.library.custom_op("ops_transformer::add_norm_fwd", mutates_args=())
def add_norm_fwd(x: Tensor, r: Optional[Tensor], g: Tensor, b: Optional[Tensor], eps: float,
                 rms: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """x, r: [N, C] (dt), g, b: [C] f32 -> y [N, C], res = x + r [N, C] (empty when r is None),
    mean [N] f32 (empty for RMSNorm), rstd [N] f32."""
    N, C = x.shape
    y = torch.empty_like(x)
    res = torch.empty_like(x) if r is not None else _EMPTY(x)
    mean = torch.empty(N if not rms else 0, dtype=torch.float32)
    rstd = torch.empty(N, dtype=torch.float32)
    p = _lib.ptr
    _lib.sync_threads()
    rp = p(res) if r is not None else None
    if rms:
        st = _lib.lib.ot_rmsnorm_fwd(_lib.ot_dtype(x), p(y), p(rstd), rp, p(x), p(r), p(g), N, C, eps)
    else:
        st = _lib.lib.ot_layernorm_fwd(_lib.ot_dtype(x), p(y), p(mean), p(rstd), rp, p(x), p(r), p(g),
                                       p(b), N, C, eps)
    _lib.check(st)
    return y, res, mean, rstd


@add_norm_fwd.register_fake
def _(x, r, g, b, eps, rms):
    N = x.shape[0]
    return (torch.empty_like(x), torch.empty_like(x) if r is not None else _EMPTY(x),
            x.new_empty((0 if rms else N,), dtype=torch.float32), x.new_empty((N,), dtype=torch.float32))


@torch.library.custom_op("ops_transformer::add_norm_bwd", mutates_args=())
def add_norm_bwd(dy: Tensor, dres: Optional[Tensor], res: Tensor, mean: Tensor, rstd: Tensor,
                 g: Tensor, has_b: bool, rms: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """-> dx [N, C] (the gradient of both x and r), dg [C] f32, db [C] f32 (empty: no bias)."""
    N, C = res.shape
    dy = dy.contiguous()
    dres = dres.contiguous() if dres is not None else None
    dx = torch.empty_like(res)
    dg = torch.zeros(C, dtype=torch.float32)
    db = torch.zeros(C if has_b else 0, dtype=torch.float32)
    p = _lib.ptr
    _lib.sync_threads()
    if rms:
        st = _lib.lib.ot_rmsnorm_bwd(_lib.ot_dtype(res), p(dx), p(dg), p(dy), p(dres), p(res), p(rstd),
                                     p(g), N, C)
    else:
        st = _lib.lib.ot_layernorm_bwd(_lib.ot_dtype(res), p(dx), p(dg), p(db) if has_b else None, p(dy),
                                       p(dres), p(res), p(mean), p(rstd), p(g), N, C)
    _lib.check(st)
    return dx, dg, db


@add_norm_bwd.register_fake
def _(dy, dres, res, mean, rstd, g, has_b, rms):
    C = res.shape[1]
    return (torch.empty_like(res), res.new_empty((C,), dtype=torch.float32),
            res.new_empty((C if has_b else 0,), dtype=torch.float32))


def _norm_setup(ctx, inputs, output):
    x, r, g, b, eps, rms = inputs
    y, res, mean, rstd = output
    ctx.has_r, ctx.has_b, ctx.rms = r is not None, b is not None, rms
    ctx.save_for_backward(res if r is not None else x, mean, rstd, g)


def _norm_backward(ctx, dy, dres, dmean, drstd):
    res, mean, rstd, g = ctx.saved_tensors
    if not ctx.has_r:
        dres = None
    dx, dg, db = add_norm_bwd(dy, dres, res, mean, rstd, g, ctx.has_b, ctx.rms)
    return dx, (dx if ctx.has_r else None), dg, (db if ctx.has_b else None), None, None


add_norm_fwd.register_autograd(_norm_backward, setup_context=_norm_setup)


def _add_norm(x, residual, weight, bias, eps, rms):
    fn = "fused_add_rms_norm" if rms else "fused_add_layer_norm"
    _lib.need_float_cpu(fn, x=x, residual=residual)
    _lib.need(x.dim() >= 1 and x.numel() > 0, fn, f"x {tuple(x.shape)} must be a non-empty [..., C] tensor")
    _lib.need(residual is None or residual.shape == x.shape, fn,
              f"residual {tuple(residual.shape) if residual is not None else ''} must have x's shape {tuple(x.shape)}")
    C = x.shape[-1]
    for name, t in (("weight", weight), ("bias", bias)):
        _lib.need(t is None or (t.shape == (C,) and t.device.type == "cpu"), fn,
                  f"{name} {tuple(t.shape) if t is not None else ''} must be a CPU [C={C}] tensor")
    shape = x.shape
    xr = _rows(x)
    rr = _rows(residual) if residual is not None else None
    g = weight.float().contiguous()
    b = bias.float().contiguous() if bias is not None else None
    y, res, _, _ = add_norm_fwd(xr, rr, g, b, float(eps), rms)
    return y.view(shape), (res.view(shape) if residual is not None else x)


def fused_add_layer_norm(x, residual, weight, bias=None, eps=1e-5):
    """(layer_norm(x + residual), x + residual); residual may be None: (layer_norm(x), x).
    x, residual: [..., C] float32 / bfloat16; weight, bias: [C]."""
    return _add_norm(x, residual, weight, bias, eps, False)


def fused_add_rms_norm(x, residual, weight, eps=1e-6):
    """(rms_norm(x + residual) * weight, x + residual), as Llama's RMSNorm: y = s * w /
    sqrt(mean(s^2) + eps) with s = x + residual (residual may be None)."""
    return _add_norm(x, residual, weight, None, eps, True)


class FusedAddLayerNorm(torch.nn.LayerNorm):
    """nn.LayerNorm whose forward(x, residual=None) returns (norm(x + residual), x + residual)."""

    def forward(self, x, residual=None):
        return fused_add_layer_norm(x, residual, self.weight, self.bias, self.eps)


class FusedAddRMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x, residual=None):
        return fused_add_rms_norm(x, residual, self.weight, self.eps)


# --------------------------------------------------------------------- RoPE ----
_tables = {}
STYLES = {"neox": 0, "gptj": 1}


def _rope_table(Tmax, rot, base):
    key = (Tmax, rot, base)
    if key not in _tables:
        t = torch.empty(Tmax, rot, dtype=torch.float32)
        _lib.check(_lib.lib.ot_rope_table(t.data_ptr(), Tmax, rot, base))
        _tables.clear()     # keep one table (the current length)
        _tables[key] = t
    return _tables[key]


def _rope_call(fn, x, pos0, rot, base, style):
    B, H, T, D = x.shape
    tab = _rope_table(pos0 + T, rot, base)
    _lib.sync_threads()
    _lib.check(fn(_lib.ot_dtype(x), x.data_ptr(), tab.data_ptr(), pos0 + T, B, H, T, D, rot, pos0, style))
    return x


@torch.library.custom_op("ops_transformer::rope", mutates_args=())
def rope(x: Tensor, pos0: int, rot: int, base: float, style: int) -> Tensor:
    """x: [B, H, T, D] -> x rotated on its first rot dims; row t at position pos0 + t."""
    return _rope_call(_lib.lib.ot_rope_fwd, x.clone(memory_format=torch.contiguous_format), pos0, rot,
                      base, style)


@rope.register_fake
def _(x, pos0, rot, base, style):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("ops_transformer::rope_bwd", mutates_args=())
def rope_bwd(dy: Tensor, pos0: int, rot: int, base: float, style: int) -> Tensor:
    return _rope_call(_lib.lib.ot_rope_bwd, dy.clone(memory_format=torch.contiguous_format), pos0, rot,
                      base, style)


@rope_bwd.register_fake
def _(dy, pos0, rot, base, style):
    return torch.empty_like(dy, memory_format=torch.contiguous_format)


def _rope_setup(ctx, inputs, output):
    ctx.cfg = inputs[1:]


rope.register_autograd(lambda ctx, dy: (rope_bwd(dy, *ctx.cfg), None, None, None, None),
                       setup_context=_rope_setup)


def apply_rope(x, pos0=0, base=10000.0, rot_dims=None, style="neox"):
    """Rotary embedding of x: [B, H, T, D] (float32 / bfloat16), row t at position pos0 + t,
    angle pos * base^(-2i / rot_dims) on the first rot_dims (even, default D) dims.
    style "neox": pairs (i, i + rot/2) (Hugging Face Llama / GPT-NeoX, rotate_half);
    "gptj": pairs (2i, 2i + 1) (GPT-J, Meta's original Llama)."""
    _lib.need_float_cpu("apply_rope", x=x)
    if style not in STYLES:
        raise ValueError(f"apply_rope: style={style!r} must be 'neox' or 'gptj'")
    if x.dim() != 4:
        raise ValueError(f"apply_rope: x must be [B, H, T, D] (got {tuple(x.shape)})")
    rot = x.shape[-1] if rot_dims is None else int(rot_dims)
    return rope(x.contiguous(), int(pos0), rot, float(base), STYLES[style])


# --------------------------------------------------- linear + cross-entropy ----
@torch.library.custom_op("ops_transformer::linear_xent", mutates_args=())
def linear_xent(x: Tensor, w: Tensor, target: Tensor, ignore_index: int, chunk: int,
                want_grad: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """x: [N, C], w: [V, C] (dt), target: [N] int -> loss (scalar f32, mean over the targets
    != ignore_index), dx [N, C] (dt), dw [V, C] f32 (gradients of the loss; empty when not
    want_grad). Logits are made chunk rows at a time and never kept."""
    N, C = x.shape
    V = w.shape[0]
    t32 = target.to(torch.int32).contiguous()
    count = int((t32 != ignore_index).sum())
    x, w = x.contiguous(), w.contiguous()
    dx = torch.empty_like(x) if want_grad else _EMPTY(x)
    dw = torch.empty(V, C, dtype=torch.float32) if want_grad else x.new_empty((0,), dtype=torch.float32)
    if count == 0:   # torch's mean over no targets
        if want_grad:
            dx.zero_()
            dw.zero_()
        return torch.tensor(float("nan")), dx, dw
    total = 0.0
    part = ctypes.c_float()
    dt = _lib.ot_dtype(x)
    _lib.sync_threads()
    for i in range(0, N, chunk):                          # the three GEMMs are libot's (ot_gemm)
        xc = x[i:i + chunk]
        n = xc.shape[0]
        lg = x.new_empty((n, V))
        _lib.gemm(False, True, n, V, C, xc, w, lg)       # logits [n, V] = xc w^T
        _lib.check(_lib.lib.ot_xent_fused(dt, lg.data_ptr(), V, t32[i:].data_ptr(), n, V, ignore_index,
                                          float(count), None, ctypes.addressof(part), want_grad))
        total += part.value
        if want_grad:                                     # lg now holds dlogits
            _lib.gemm(False, False, n, C, V, lg, w, dx[i:i + n])              # dx rows = dlogits w
            _lib.gemm(True, False, V, C, n, lg, xc, dw, beta=1.0 if i else 0.0)   # dw (+)= dlogits^T xc
    return torch.tensor(total, dtype=torch.float32), dx, dw


@linear_xent.register_fake
def _(x, w, target, ignore_index, chunk, want_grad):
    e = x.new_empty((0,))
    return (x.new_empty((), dtype=torch.float32), torch.empty_like(x) if want_grad else e,
            w.new_empty(w.shape, dtype=torch.float32) if want_grad else e.float())


def _xent_setup(ctx, inputs, output):
    ctx.w_dtype = inputs[1].dtype
    ctx.save_for_backward(output[1], output[2])


def _xent_backward(ctx, dloss, ddx, ddw):
    dx, dw = ctx.saved_tensors
    if dx.numel() == 0 and dw.numel() == 0:
        raise RuntimeError("linear_cross_entropy: called without gradients (want_grad was False)")
    return dx * dloss.to(dx.dtype), (dw * dloss).to(ctx.w_dtype), None, None, None, None


linear_xent.register_autograd(_xent_backward, setup_context=_xent_setup)


def linear_cross_entropy(x, weight, target, ignore_index=-100, chunk=1024):
    """F.cross_entropy(x @ weight.T, target, ignore_index=ignore_index) without keeping the
    [N, V] logits: each chunk of rows is projected, its loss and gradients computed in place
    by libot's fused softmax + cross-entropy, and the logits dropped (the projection and the
    two gradient GEMMs are libot's ot_gemm). x: [..., C], weight:
    [V, C] (float32 / bfloat16, same dtype), target: [...] integer class indices."""
    fn = "linear_cross_entropy"
    _lib.need_float_cpu(fn, x=x, weight=weight)
    _lib.need(weight.dim() == 2 and x.dim() >= 1 and x.shape[-1] == weight.shape[1] and x.numel() > 0, fn,
              f"x {tuple(x.shape)} must be [..., C] and weight {tuple(weight.shape)} [V, C]")
    _lib.need(target.numel() * x.shape[-1] == x.numel() and not target.is_floating_point(), fn,
              f"target {tuple(target.shape)} must hold one class index per row of x {tuple(x.shape)}")
    _lib.need(chunk >= 1, fn, f"chunk={chunk} must be >= 1")
    xr = _rows(x)
    want = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    loss, _, _ = linear_xent(xr, weight.contiguous(), target.reshape(-1), int(ignore_index),
                             int(chunk), bool(want))
    return loss
