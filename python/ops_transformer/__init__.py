"""ops_transformer: PyTorch custom ops over libot (the ops-transformer C library).

    import ops_transformer
    ops_transformer.patch()   # torch.nn.functional.scaled_dot_product_attention -> libot flash attention
    ops_transformer.patch(linear=True)   # ... and torch.nn.functional.linear -> libot's GEMM

CPU tensors, float32 and bfloat16; other cases fall back to torch with one warning.
"""
import torch  # noqa: F401  (first: libot then binds to torch's OpenMP runtime)

from ._lib import LIBRARY_PATH, OtError
from .attention import custom_op, patch, scaled_dot_product_attention, unpatch
from .dense import Linear, linear
from .fused import (FusedAddLayerNorm, FusedAddRMSNorm, apply_rope, fused_add_layer_norm,
                    fused_add_rms_norm, linear_cross_entropy)
from .memory import MemoryTracker
from .optim import AdamW
from .quant import Int8Linear, QATLinear, convert, quantize_model
from .sparse import BlockSparseAttention

__all__ = ["LIBRARY_PATH", "OtError", "custom_op", "patch", "scaled_dot_product_attention", "unpatch",
           "Linear", "linear", "BlockSparseAttention", "FusedAddLayerNorm", "FusedAddRMSNorm", "apply_rope",
           "fused_add_layer_norm", "fused_add_rms_norm", "linear_cross_entropy", "AdamW", "MemoryTracker",
           "Int8Linear", "QATLinear", "convert", "quantize_model"]
__version__ = "0.1.0"
