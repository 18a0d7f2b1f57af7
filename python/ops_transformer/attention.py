"""scaled_dot_product_attention over libot's flash attention, with torch's semantics.

Public: scaled_dot_product_attention (same signature and results as
torch.nn.functional.scaled_dot_product_attention), patch() / unpatch(), custom_op(replace=...).

Our kernels take q: [B, Hq, Tq, D], k, v: [B, Hkv, Tk, D] (f32 or bf16), causal
masking and per-sequence key lengths (kv_len). torch's masks are mapped onto
that when they are key-padding masks, causal masks (top-left as torch aligns is_causal, or
bottom-right as a KV cache needs) or both; anything else is computed by torch (one warning per
reason). `causal` below: 0 none, 1 top-left (query i sees keys j <= i), 2 bottom-right
(j <= i + Tk - Tq, the kernels' own alignment).
"""
import ctypes
import importlib
import math
import warnings
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _lib

# torch's own implementation, captured before anything is patched.
torch_sdpa = torch.nn.functional.scaled_dot_product_attention

_warned = set()


def _warn(reason):
    """One warning per reason (never inside torch.compile's tracing)."""
    if reason in _warned or torch.compiler.is_compiling():
        return
    _warned.add(reason)
    warnings.warn(f"ops_transformer: {reason}; using torch's scaled_dot_product_attention",
                  RuntimeWarning, stacklevel=3)


def reset_warnings():
    """Forget which fallback reasons were already reported (tests)."""
    _warned.clear()


# ------------------------------------------------------------ kernel calls ----
def _shape(B, Hq, Hkv, Tq, Tk, D, causal, kv_len, scale, p=0.0, seed=0):
    s = _lib.AttnShape(B, Hq, Hkv, Tq, Tk, D, causal, None, scale, p, seed, 0)
    if kv_len is not None:
        s.kv_len = ctypes.cast(ctypes.c_void_p(kv_len.data_ptr()), ctypes.POINTER(ctypes.c_int32))
    return s


def _topleft(k, v, Tq, kv_len):
    """torch's causal mask is top-left (query i sees keys j <= i); ours is bottom-right.
    They agree when Tq == Tk. For Tq < Tk the keys >= Tq are seen by nobody: drop them.
    For Tq > Tk pad the keys to Tq and mask the padding with kv_len."""
    B, Hkv, Tk, D = k.shape
    if Tq < Tk:
        kl = None if kv_len is None else kv_len.clamp(max=Tq)
        return k[:, :, :Tq].contiguous(), v[:, :, :Tq].contiguous(), kl
    kp = k.new_zeros(B, Hkv, Tq, D)
    vp = v.new_zeros(B, Hkv, Tq, D)
    kp[:, :, :Tk] = k
    vp[:, :, :Tk] = v
    kl = torch.full((B,), Tk, dtype=torch.int32) if kv_len is None else kv_len
    return kp, vp, kl


def flash_fwd(q, k, v, causal, kv_len, scale, p=0.0, seed=0):
    """q: [B,Hq,Tq,D], k, v: [B,Hkv,Tk,D] contiguous; causal 0/1/2 (above); kv_len: [B]
    int32 or None; attention dropout p with libot's mask stream `seed` (ot/attn.h)
    -> o: [B,Hq,Tq,D], lse: [B,Hq,Tq] f32."""
    B, Hq, Tq, D = q.shape
    Tk0 = k.shape[2]
    if causal == 1 and Tq != Tk0:
        k, v, kv_len = _topleft(k, v, Tq, kv_len)
    Hkv, Tk = k.shape[1], k.shape[2]
    o = torch.empty_like(q)
    lse = torch.empty((B, Hq, Tq), dtype=torch.float32)
    s = _shape(B, Hq, Hkv, Tq, Tk, D, causal != 0, kv_len, scale, p, seed)
    _lib.sync_threads()
    _lib.check(_lib.lib.ot_attn_flash_fwd(_lib.ot_dtype(q), o.data_ptr(), lse.data_ptr(), q.data_ptr(),
                                          k.data_ptr(), v.data_ptr(), ctypes.byref(s)), "flash_fwd")
    return o, lse


def flash_bwd(dout, q, k, v, o, lse, causal, kv_len, scale, p=0.0, seed=0):
    """Gradients of flash_fwd: dq [B,Hq,Tq,D], dk, dv [B,Hkv,Tk,D]."""
    B, Hq, Tq, D = q.shape
    Tk0 = k.shape[2]
    if causal == 1 and Tq != Tk0:
        k, v, kv_len = _topleft(k, v, Tq, kv_len)
    Hkv, Tk = k.shape[1], k.shape[2]
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    s = _shape(B, Hq, Hkv, Tq, Tk, D, causal != 0, kv_len, scale, p, seed)
    _lib.sync_threads()
    _lib.check(_lib.lib.ot_attn_flash_bwd(_lib.ot_dtype(q), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                                          dout.data_ptr(), o.data_ptr(), lse.data_ptr(), q.data_ptr(),
                                          k.data_ptr(), v.data_ptr(), ctypes.byref(s)), "flash_bwd")
    if Tk != Tk0:
        if Tk < Tk0:   # keys nobody sees: zero gradient
            dk = torch.cat([dk, dk.new_zeros(B, Hkv, Tk0 - Tk, D)], 2)
            dv = torch.cat([dv, dv.new_zeros(B, Hkv, Tk0 - Tk, D)], 2)
        else:
            dk, dv = dk[:, :, :Tk0].contiguous(), dv[:, :, :Tk0].contiguous()
    return dq, dk, dv


# ------------------------------------------------------------- mask analysis --
def mask_plan(mask, is_causal, B, Tq, Tk):
    """mask: [b, h, tq, tk] with each dim 1 or full (bool: True = attend; float: added to
    the scores). Returns (causal 0/1/2, kv_len [B] int32 or None) when our kernel computes
    exactly what torch does, else a string saying why not."""
    if mask is None:
        return int(is_causal), None
    if mask.dtype == torch.bool:
        allowed = mask
    else:
        neg = torch.isneginf(mask)
        low = mask == torch.finfo(mask.dtype).min   # Hugging Face's "minus infinity"
        allowed = mask == 0
        if not bool((allowed | neg | low).all()):
            return "attn_mask has additive values other than 0 and -inf (a bias, not a mask)"
        if bool(low.any()) and not bool(allowed.any(-1).all()):
            return "attn_mask masks a whole row with finfo.min (torch averages such rows)"
    allowed = allowed.expand(allowed.shape[0], allowed.shape[1], allowed.shape[2], Tk)
    j = torch.arange(Tk)
    lens = allowed.sum(-1, dtype=torch.int32)                      # [b, h, tq]
    flat = lens.reshape(lens.shape[0], -1)
    if bool((flat == flat[:, :1]).all()):
        L = flat[:, 0]
        if bool((allowed == (j < L.view(-1, 1, 1, 1))).all()):
            return int(is_causal), L.expand(B).contiguous()
    if not is_causal and allowed.shape[2] == Tq and Tq > 1:
        last = lens[:, :, -1]                      # the last query row sees every valid key
        if bool((last == last[:, :1]).all()):
            L = last[:, 0].view(-1, 1, 1, 1)
            i = torch.arange(Tq).view(-1, 1)
            for kind, shift in ((1, 0), (2, Tk - Tq)):
                if bool((allowed == ((j <= i + shift) & (j < L))).all()):
                    return kind, L.view(-1).expand(B).contiguous()
    return "attn_mask is neither a key-padding mask (keys >= a length per sequence) nor a causal one"


def _plan_tensor(B, mode, causal, kv_len, Tk):
    p = torch.empty(B + 2, dtype=torch.int32)
    p[0], p[1] = mode, int(causal)
    p[2:] = Tk if kv_len is None else kv_len
    return p


def _torch_ref(q, k, v, mask, is_causal, scale):
    return torch_sdpa(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale,
                      enable_gqa=q.shape[1] != k.shape[1])


def _math_probs(q, k, v, mask, is_causal, scale, p, seed):
    """Materialized attention in f32 as torch's math backend: (P, Pd, k, v) with P the
    probabilities and Pd = Z * P / (1 - p) the dropped ones (Z drawn from a torch generator
    seeded with `seed`, so the backward regenerates it); k, v repeated over the GQA groups."""
    Hq, Tq = q.shape[1], q.shape[2]
    Hkv, Tk = k.shape[1], k.shape[2]
    G = Hq // Hkv
    qf = q.float()
    kf, vf = k.float().repeat_interleave(G, 1), v.float().repeat_interleave(G, 1)
    S = (qf @ kf.transpose(-1, -2)) * scale
    if is_causal:
        S = S.masked_fill(~torch.ones(Tq, Tk, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        S = S.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else S + mask.float()
    P = torch.softmax(S, -1).nan_to_num(0.0)          # a fully masked row: 0, as torch
    keep = None
    if p > 0:
        gen = torch.Generator().manual_seed(seed & (2**63 - 1))
        keep = (torch.rand(P.shape, generator=gen) >= p).float() / (1 - p)
    return P, keep, qf, kf, vf


def _math_fwd(q, k, v, mask, is_causal, scale, p, seed):
    P, keep, qf, kf, vf = _math_probs(q, k, v, mask, is_causal, scale, p, seed)
    return ((P * keep if keep is not None else P) @ vf).to(q.dtype)


def _math_bwd(dout, q, k, v, mask, is_causal, scale, p=0.0, seed=0):
    """Backward of torch's math attention (f32, materialized scores), for the forwards torch
    (or _math_fwd) computed: autograd is not recorded inside a custom op, so it is written out."""
    B, Hq, Tq, D = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G = Hq // Hkv
    P, keep, qf, kf, vf = _math_probs(q, k, v, mask, is_causal, scale, p, seed)
    Pd = P * keep if keep is not None else P
    do = dout.float()
    O = Pd @ vf
    dv = Pd.transpose(-1, -2) @ do
    dP = do @ vf.transpose(-1, -2)
    if keep is not None:
        dP = dP * keep
    dS = P * (dP - (do * O).sum(-1, keepdim=True))
    dq = (dS @ kf) * scale
    dk = (dS.transpose(-1, -2) @ qf) * scale
    dk, dv = (t.view(B, Hkv, G, Tk, D).sum(2) for t in (dk, dv))
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ----------------------------------------------------------------- the ops ----
@torch.library.custom_op("ops_transformer::sdpa_fwd", mutates_args=())
def sdpa_fwd(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], is_causal: bool,
             scale: float, dropout_p: float, seed: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """q: [B,Hq,Tq,D], k, v: [B,Hkv,Tk,D] contiguous; mask [b,h,tq,tk] or None; dropout_p
    with the mask stream seed ([1] int64) -> (o [B,Hq,Tq,D], lse [B,Hq,Tq] f32,
    plan [B+2] int32: mode, causal, kv_len)."""
    B, Hq, Tq, D = q.shape
    Tk = k.shape[2]
    sd = int(seed[0]) & (2**64 - 1)
    plan = mask_plan(mask, is_causal, B, Tq, Tk)
    if isinstance(plan, str):
        _warn(plan)
        with torch.no_grad():
            if dropout_p > 0:
                o = _math_fwd(q, k, v, mask, is_causal, scale, dropout_p, sd)
            else:
                o = _torch_ref(q, k, v, mask, is_causal, scale).contiguous()
        return o, q.new_zeros((B, Hq, Tq), dtype=torch.float32), _plan_tensor(B, 1, is_causal, None, Tk)
    causal, kv_len = plan
    if kv_len is not None and bool((kv_len == Tk).all()):
        kv_len = None
    o, lse = flash_fwd(q, k, v, causal, kv_len, scale, dropout_p, sd)
    return o, lse, _plan_tensor(B, 0, causal, kv_len, Tk)


@sdpa_fwd.register_fake
def _(q, k, v, mask, is_causal, scale, dropout_p, seed):
    B, Hq, Tq, _ = q.shape
    return (torch.empty_like(q), q.new_empty((B, Hq, Tq), dtype=torch.float32),
            q.new_empty((B + 2,), dtype=torch.int32))


@torch.library.custom_op("ops_transformer::sdpa_bwd", mutates_args=())
def sdpa_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, plan: Tensor,
             mask: Optional[Tensor], is_causal: bool, scale: float, dropout_p: float,
             seed: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Gradients (dq, dk, dv) of sdpa_fwd; plan and seed from the forward."""
    sd = int(seed[0]) & (2**64 - 1)
    if int(plan[0]) == 1:      # torch (or the math path) computed the forward: the math backward
        return _math_bwd(dout, q, k, v, mask, is_causal, scale, dropout_p, sd)
    Tk = k.shape[2]
    kv_len = plan[2:].contiguous()
    if bool((kv_len == Tk).all()):
        kv_len = None
    return flash_bwd(dout.contiguous(), q, k, v, o, lse, int(plan[1]), kv_len, scale, dropout_p, sd)


@sdpa_bwd.register_fake
def _(dout, q, k, v, o, lse, plan, mask, is_causal, scale, dropout_p, seed):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup(ctx, inputs, output):
    q, k, v, mask, is_causal, scale, dropout_p, seed = inputs
    o, lse, plan = output
    ctx.save_for_backward(q, k, v, o, lse, plan, mask, seed)
    ctx.is_causal, ctx.scale, ctx.dropout_p = is_causal, scale, dropout_p


def _backward(ctx, do, dlse, dplan):
    q, k, v, o, lse, plan, mask, seed = ctx.saved_tensors
    dq, dk, dv = sdpa_bwd(do, q, k, v, o, lse, plan, mask, ctx.is_causal, ctx.scale, ctx.dropout_p, seed)
    return dq, dk, dv, None, None, None, None, None


sdpa_fwd.register_autograd(_backward, setup_context=_setup)


# -------------------------------------------------------------- the wrapper ---
def _static_reason(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """Why our kernel cannot take this call (known without reading data), or None.
    'torch' means: torch raises or handles an edge case; defer silently."""
    ts = (q, k, v)
    if not all(isinstance(t, Tensor) for t in ts):
        return "torch"
    if any(t.device.type != "cpu" for t in ts) or (attn_mask is not None and attn_mask.device.type != "cpu"):
        return f"{q.device.type} tensors (the kernels run on the CPU)"
    if q.dim() < 3 or q.dim() != k.dim() or q.dim() != v.dim():
        return "torch"
    if q.dtype != k.dtype or q.dtype != v.dtype:
        return "torch"
    if q.dtype not in (torch.float32, torch.bfloat16):
        return f"dtype {q.dtype} (the kernels take float32 and bfloat16)"
    if not (0.0 <= dropout_p < 1.0):
        return "torch"
    if is_causal and attn_mask is not None:
        return "torch"   # torch raises
    if q.shape[:-3] != k.shape[:-3] or k.shape[:-1] != v.shape[:-1]:
        return "torch"
    Hq, Hkv = q.shape[-3], k.shape[-3]
    if Hq != Hkv and (not enable_gqa or Hq % Hkv != 0):
        return "torch"
    if q.shape[-1] != k.shape[-1]:
        return "torch"
    if v.shape[-1] != q.shape[-1]:
        return "value head size differs from the query's (the kernels take one head size)"
    if q.numel() == 0 or k.numel() == 0:
        return "torch"
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        return f"scale={scale} (the kernels take a finite scale > 0)"
    if attn_mask is not None:
        if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
            return "torch"   # torch raises
        if attn_mask.dim() < 2:
            return "torch"
        if attn_mask.requires_grad:
            return "attn_mask requires grad (the kernels give no mask gradient)"
        try:
            torch.broadcast_shapes(attn_mask.shape, q.shape[:-1] + (k.shape[-2],))
        except RuntimeError:
            return "torch"
    return None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention computed by libot's flash attention
    (forward and backward). Same arguments, shapes and results; what the kernels do not
    cover (CUDA, float64, a mask that is neither key padding nor causal, ...) is computed by
    torch after one warning naming the reason. Attention dropout (dropout_p > 0) has torch's
    definition (probabilities dropped with p, the rest scaled by 1 / (1 - p)) with libot's
    counter-based mask, seeded from torch's generator: reproducible under torch.manual_seed,
    but not the same elements torch's own kernel would drop."""
    reason = _static_reason(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if reason is not None:
        if reason != "torch":
            _warn(reason)
        return torch_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                          is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    *lead, Tq, D = query.shape
    Hq, Hkv, Tk = query.shape[-3], key.shape[-3], key.shape[-2]
    B = math.prod(lead[:-1]) if len(lead) > 1 else 1
    q = query.reshape(B, Hq, Tq, D).contiguous()
    k = key.reshape(B, Hkv, Tk, D).contiguous()
    v = value.reshape(B, Hkv, Tk, D).contiguous()
    mask = None
    if attn_mask is not None:
        if query.dim() == 4:
            mask = attn_mask.reshape((1,) * (4 - attn_mask.dim()) + tuple(attn_mask.shape))
        else:   # 3 or 5+ dims: spell the mask out over the flattened batch
            mask = attn_mask.expand(query.shape[:-1] + (Tk,)).reshape(B, Hq, Tq, Tk)
    s = float(scale) if scale is not None else 1.0 / math.sqrt(D)
    p = float(dropout_p)
    # the dropout mask's stream: drawn from torch's generator (torch.manual_seed reproduces it)
    seed = torch.randint(-2**63, 2**63 - 1, (1,), dtype=torch.int64) if p > 0 else torch.zeros(1, dtype=torch.int64)
    o, _, _ = sdpa_fwd(q, k, v, mask, bool(is_causal), s, p, seed)
    return o.reshape(query.shape)


# ---------------------------------------------------------- patch / unpatch ---
_originals = {}


def _resolve(path):
    mod_name, _, attr = path.rpartition(".")
    owner = importlib.import_module(mod_name)
    return owner, attr


def custom_op(replace):
    """Decorator: `@custom_op(replace="torch.nn.functional.scaled_dot_product_attention")`
    installs the decorated function at that dotted path (unpatch() restores the original)."""
    def deco(fn):
        owner, attr = _resolve(replace)
        if replace not in _originals:
            _originals[replace] = getattr(owner, attr)
        setattr(owner, attr, fn)
        return fn
    return deco


def patch(linear=False):
    """Replace torch.nn.functional.scaled_dot_product_attention with ours (idempotent); with
    linear=True also torch.nn.functional.linear (so every nn.Linear runs on libot's GEMM,
    ops_transformer.dense). patch() alone leaves F.linear as it is; unpatch() restores both."""
    custom_op(replace="torch.nn.functional.scaled_dot_product_attention")(scaled_dot_product_attention)
    if linear:
        from .dense import linear as ot_linear
        custom_op(replace="torch.nn.functional.linear")(ot_linear)


def unpatch():
    """Restore everything patch() or custom_op(replace=...) replaced."""
    for path, orig in list(_originals.items()):
        owner, attr = _resolve(path)
        setattr(owner, attr, orig)
        del _originals[path]
