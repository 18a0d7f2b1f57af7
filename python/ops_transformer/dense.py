"""torch.nn.functional.linear over libot's GEMM: y = x W^T + b.

Public: linear (same signature and results as torch.nn.functional.linear), Linear (a drop-in
nn.Linear: same parameters and state_dict names). patch(linear=True) installs `linear` as
torch.nn.functional.linear, so every nn.Linear of a model runs here (see attention.patch).

The forward is ot_linear_fwd (one GEMM, the bias added in its epilogue); the backward is
ot_linear_bwd for dx = dy W (one GEMM) with db = column sums of dy, and one ot_gemm for
dW = dy^T x (transposed A, written in the weight's dtype, no zero fill). Which GEMM runs (libot's
own blocked GEMM or oneDNN) is chosen per shape by the library (README, "GEMM"). float32 and
bfloat16 (bf16 x bf16 natively where the CPU has avx512_bf16, else on f32 tiles converted in a
bounded workspace); CUDA, float64, other dtypes, autocast and sizes past int32 are computed by
torch's F.linear after one warning naming the reason.
"""
import warnings
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _lib

# torch's own implementation, captured before anything is patched.
torch_linear = torch.nn.functional.linear

_warned = set()
_INT_MAX = 2**31 - 1


def _warn(reason):
    """One warning per reason (never inside torch.compile's tracing)."""
    if reason in _warned or torch.compiler.is_compiling():
        return
    _warned.add(reason)
    warnings.warn(f"ops_transformer: {reason}; using torch's linear", RuntimeWarning, stacklevel=3)


def reset_warnings():
    """Forget which fallback reasons were already reported (tests)."""
    _warned.clear()


def _check_op_args(fn, x, w, b):
    """The custom ops' own argument check (they may be called directly): x [M, K], w [N, K]
    contiguous CPU tensors of one float dtype, b [N] or None. Sizes are checked by the library."""
    _lib.need_float_cpu(fn, x=x, weight=w)
    _lib.need(x.dim() == 2 and w.dim() == 2 and x.shape[1] == w.shape[1], fn,
              f"x {tuple(x.shape)} must be [M, K] and weight {tuple(w.shape)} [N, K]")
    _lib.need(x.is_contiguous() and w.is_contiguous(), fn, "x and weight must be contiguous")
    _lib.need(b is None or (b.dim() == 1 and b.shape[0] == w.shape[0] and b.device.type == "cpu"), fn,
              f"bias {tuple(b.shape) if b is not None else ''} must be a CPU [N={w.shape[0]}] tensor")


# ----------------------------------------------------------------- the ops ----
@torch.library.custom_op("ops_transformer::linear_fwd", mutates_args=())
def linear_fwd(x: Tensor, w: Tensor, b: Optional[Tensor]) -> Tensor:
    """x: [M, K], w: [N, K] (contiguous, one dtype: f32 or bf16), b: [N] or None -> y: [M, N]
    (x's dtype) = x w^T + b, one GEMM with the bias (used in f32) in its epilogue."""
    _check_op_args("linear", x, w, b)
    M, K = x.shape
    N = w.shape[0]
    y = x.new_empty((M, N))
    bf = b.float().contiguous() if b is not None else None
    p = _lib.ptr
    _lib.sync_threads()
    _lib.check(_lib.lib.ot_linear_fwd(_lib.ot_dtype(x), p(y), None, p(x), p(w), p(bf), M, N, K, 0),
               "ot_linear_fwd")
    return y


@linear_fwd.register_fake
def _(x, w, b):
    return x.new_empty((x.shape[0], w.shape[0]))


@torch.library.custom_op("ops_transformer::linear_bwd", mutates_args=())
def linear_bwd(dy: Tensor, x: Tensor, w: Tensor, need_x: bool, need_w: bool,
               need_b: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """Gradients of linear_fwd for dy: [M, N] -> dx [M, K] = dy w (x's dtype), dW [N, K] = dy^T x
    (w's dtype), db [N] f32 = column sums of dy; each empty when not asked for."""
    _check_op_args("linear backward", x, w, None)
    M, K = x.shape
    N = w.shape[0]
    _lib.need(dy.shape == (M, N) and dy.dtype == x.dtype, "linear backward",
              f"dy {tuple(dy.shape)} {dy.dtype} must be [M={M}, N={N}] {x.dtype}")
    dy = dy.contiguous()
    dt = _lib.ot_dtype(x)
    dx = x.new_empty((M, K) if need_x else (0,))          # (distinct empties: outputs never alias)
    dw = w.new_empty((N, K) if need_w else (0,))
    db = torch.zeros(N if need_b else 0, dtype=torch.float32)
    p = _lib.ptr
    _lib.sync_threads()
    if need_x or need_b:   # dx = dy w (one GEMM) and db += column sums of dy
        _lib.check(_lib.lib.ot_linear_bwd(dt, p(dx) if need_x else None, None, p(db) if need_b else None,
                                          p(dy), None, p(x), p(w), M, N, K, 0), "ot_linear_bwd")
    if need_w:             # dW = dy^T x: one GEMM, A transposed, overwritten (beta 0)
        _lib.gemm(True, False, N, K, M, dy, x, dw)
    return dx, dw, db


@linear_bwd.register_fake
def _(dy, x, w, need_x, need_w, need_b):
    return (x.new_empty(x.shape if need_x else (0,)), w.new_empty(w.shape if need_w else (0,)),
            w.new_empty((w.shape[0] if need_b else 0,), dtype=torch.float32))


def _setup(ctx, inputs, output):
    x, w, b = inputs
    ctx.b_dtype = b.dtype if b is not None else None
    ctx.save_for_backward(x, w)


def _backward(ctx, dy):
    x, w = ctx.saved_tensors
    nx, nw, nb = ctx.needs_input_grad[:3]
    nb = bool(nb) and ctx.b_dtype is not None
    dx, dw, db = linear_bwd(dy, x, w, bool(nx), bool(nw), nb)
    return (dx if nx else None, dw if nw else None, db.to(ctx.b_dtype) if nb else None)


linear_fwd.register_autograd(_backward, setup_context=_setup)


# -------------------------------------------------------------- the wrapper ---
def _static_reason(input, weight, bias):
    """Why our GEMM cannot take this call, or None. 'torch': torch raises or handles an edge
    case (mixed dtypes, empty tensors, a 1-D weight) the same as before: defer silently."""
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        return "torch"
    if bias is not None and not isinstance(bias, Tensor):
        return "torch"
    ts = (input, weight) + ((bias,) if bias is not None else ())
    if any(t.device.type != "cpu" for t in ts):
        return f"{next(t.device.type for t in ts if t.device.type != 'cpu')} tensors (the GEMM runs on the CPU)"
    if input.dtype != weight.dtype or (bias is not None and bias.dtype != input.dtype):
        return "torch"
    if input.dtype not in (torch.float32, torch.bfloat16):
        return f"dtype {input.dtype} (the GEMM takes float32 and bfloat16)"
    if torch.is_autocast_enabled("cpu"):
        return "torch.autocast is on (it casts F.linear's inputs; the GEMM takes them as given)"
    if weight.dim() != 2 or input.dim() < 1 or input.shape[-1] != weight.shape[1]:
        return "torch"   # torch's matmul semantics or its shape error
    if bias is not None and bias.shape != (weight.shape[0],):
        return "torch"
    if input.numel() == 0 or weight.numel() == 0:
        return "torch"
    M = input.numel() // input.shape[-1]
    if max(M, weight.shape[0], weight.shape[1]) > _INT_MAX:
        return "a dimension above 2^31 - 1 (the GEMM takes int sizes)"
    return None


def linear(input, weight, bias=None):
    """torch.nn.functional.linear computed by libot's GEMM: input [..., K], weight [N, K], bias
    [N] or None -> [..., N] = input weight^T + bias, with autograd (dx, dW, db). Same arguments,
    shapes and results (to rounding); what the GEMM does not take (CUDA, float64, autocast, ...)
    is computed by torch after one RuntimeWarning naming the reason, and what torch rejects
    (mismatched shapes or dtypes) raises torch's own error."""
    reason = _static_reason(input, weight, bias)
    if reason is not None:
        if reason != "torch":
            _warn(reason)
        return torch_linear(input, weight, bias)
    K, N = weight.shape[1], weight.shape[0]
    x = input.reshape(-1, K).contiguous()
    y = linear_fwd(x, weight.contiguous(), bias)
    return y.view(*input.shape[:-1], N)


class Linear(torch.nn.Linear):
    """nn.Linear whose forward runs on libot's GEMM (`linear` above): the same constructor,
    parameters (weight [out_features, in_features], bias [out_features]) and state_dict names,
    so it loads an nn.Linear's state_dict as is. `Linear.from_linear(m)` wraps an existing
    nn.Linear's parameters (shared, not copied)."""

    def forward(self, input):
        return linear(input, self.weight, self.bias)

    @classmethod
    def from_linear(cls, m):
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features, new.out_features = m.in_features, m.out_features
        new.weight = m.weight
        new.register_parameter("bias", m.bias)
        return new
