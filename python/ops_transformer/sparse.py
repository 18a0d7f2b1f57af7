"""BlockSparseAttention: libot's block-sparse flash attention as an nn.Module.

Layout (ot/attn.h, ot_attn_sparse_layout): keys and queries in blocks of block_size tokens;
query i (at key position p = i + Tk - Tq) attends key j iff p or j is one of the first
global_tokens positions, or j's block is in p's window of local_window blocks
([qb - w + 1, qb] when causal, [qb - w//2, qb + (w-1)//2] otherwise), and j <= p when causal.
Only the active (query tile, key tile) pairs are computed, forward and backward.
"""
import ctypes
import math
from typing import Tuple

import torch
from torch import Tensor

from . import _lib


def _args(q, k, causal, scale, block_size, local_window, global_tokens):
    B, Hq, Tq, D = q.shape
    s = _lib.AttnShape(B, Hq, k.shape[1], Tq, k.shape[2], D, causal, None, scale, 0.0, 0, 0)
    return s, _lib.SparseLayout(block_size, local_window, global_tokens)


@torch.library.custom_op("ops_transformer::sparse_fwd", mutates_args=())
def sparse_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, block_size: int,
               local_window: int, global_tokens: int) -> Tuple[Tensor, Tensor]:
    """q: [B,Hq,Tq,D], k, v: [B,Hkv,Tk,D] contiguous -> o [B,Hq,Tq,D], lse [B,Hq,Tq] f32."""
    s, lay = _args(q, k, causal, scale, block_size, local_window, global_tokens)
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32)
    _lib.sync_threads()
    _lib.check(_lib.lib.ot_attn_sparse_fwd(_lib.ot_dtype(q), o.data_ptr(), lse.data_ptr(), q.data_ptr(),
                                           k.data_ptr(), v.data_ptr(), ctypes.byref(s), ctypes.byref(lay)))
    return o, lse


@sparse_fwd.register_fake
def _(q, k, v, causal, scale, block_size, local_window, global_tokens):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


@torch.library.custom_op("ops_transformer::sparse_bwd", mutates_args=())
def sparse_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool,
               scale: float, block_size: int, local_window: int,
               global_tokens: int) -> Tuple[Tensor, Tensor, Tensor]:
    s, lay = _args(q, k, causal, scale, block_size, local_window, global_tokens)
    dout = dout.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    _lib.sync_threads()
    _lib.check(_lib.lib.ot_attn_sparse_bwd(_lib.ot_dtype(q), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                                           dout.data_ptr(), o.data_ptr(), lse.data_ptr(), q.data_ptr(),
                                           k.data_ptr(), v.data_ptr(), ctypes.byref(s), ctypes.byref(lay)))
    return dq, dk, dv


@sparse_bwd.register_fake
def _(dout, q, k, v, o, lse, causal, scale, block_size, local_window, global_tokens):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup(ctx, inputs, output):
    q, k, v = inputs[:3]
    ctx.cfg = inputs[3:]
    ctx.save_for_backward(q, k, v, *output)


def _backward(ctx, do, dlse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = sparse_bwd(do, q, k, v, o, lse, *ctx.cfg)
    return dq, dk, dv, None, None, None, None, None


sparse_fwd.register_autograd(_backward, setup_context=_setup)


class BlockSparseAttention(torch.nn.Module):
    """Block-sparse attention: forward(q [B,Hq,Tq,D], k, v [B,Hkv,Tk,D]) -> [B,Hq,Tq,D].
    CPU float32 / bfloat16; Hkv divides Hq (grouped-query attention); scale None: 1/sqrt(D)."""

    def __init__(self, block_size=64, local_window=3, global_tokens=10, causal=False, scale=None):
        super().__init__()
        if block_size < 1 or local_window < 1 or global_tokens < 0:
            raise ValueError(f"BlockSparseAttention: block_size={block_size} and local_window="
                             f"{local_window} must be >= 1, global_tokens={global_tokens} >= 0")
        self.block_size, self.local_window, self.global_tokens = block_size, local_window, global_tokens
        self.causal, self.scale = causal, scale

    def extra_repr(self):
        return (f"block_size={self.block_size}, local_window={self.local_window}, "
                f"global_tokens={self.global_tokens}, causal={self.causal}")

    def forward(self, q, k, v):
        fn = "BlockSparseAttention"
        _lib.need_float_cpu(fn, q=q, k=k, v=v)
        _lib.need(q.dim() == 4 and k.dim() == 4 and k.shape == v.shape, fn,
                  f"q {tuple(q.shape)} must be [B, Hq, Tq, D], k and v {tuple(k.shape)}, {tuple(v.shape)} "
                  f"the same [B, Hkv, Tk, D]")
        _lib.need(q.shape[0] == k.shape[0] and q.shape[3] == k.shape[3], fn,
                  f"q {tuple(q.shape)} and k {tuple(k.shape)} must agree on B and D")
        if k.shape[2] < q.shape[2]:
            raise ValueError(f"BlockSparseAttention: Tq={q.shape[2]} > Tk={k.shape[2]} (queries sit "
                             f"at the last Tq key positions)")
        scale = self.scale if self.scale is not None else 1.0 / math.sqrt(q.shape[-1])
        o, _ = sparse_fwd(q.contiguous(), k.contiguous(), v.contiguous(), self.causal, float(scale),
                          self.block_size, self.local_window, self.global_tokens)
        return o

    def mask(self, Tq, Tk):
        """[Tq, Tk] bool: which keys each query attends (dense attention with it equals forward)."""
        j = torch.arange(Tk)
        p = torch.arange(Tq).view(-1, 1) + (Tk - Tq)
        qb, kb, w = p // self.block_size, j // self.block_size, self.local_window
        lo, hi = (qb - (w - 1), qb) if self.causal else (qb - w // 2, qb + (w - 1) // 2)
        m = ((kb >= lo) & (kb <= hi)) | (p < self.global_tokens) | (j < self.global_tokens)
        return m & (j <= p) if self.causal else m
