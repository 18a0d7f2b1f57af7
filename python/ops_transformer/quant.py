"""Weight-only INT8 linear layers and quantize_model (post-training, per row or per group).

Weights are quantized by libot (ot_qweight_quantize: symmetric, scale = absmax / 127 per row
or per group of 32 / 64 / 128 inputs, round half to even) and multiplied by its quantized
linear kernels (ot_qlinear_fwd: GEMV that streams the int8 weight once for up to 16 rows,
with float32 activations ("weight-only"); beyond, for groups other than 32, an int8 x int8
GEMM that quantizes the activations to int8 per row on the fly, scale absmax / 127, so each
output is off the float32 product by at most sum |w| * scale / 2; group 32: dequantized
tiles into the float32 GEMM).

Calibrated post-training quantization (scales searched on data) and quantization-aware
training are not implemented here yet: quantize_model refuses them with a message.
"""
import ctypes
from typing import Optional

import torch
from torch import Tensor

from . import _lib

OT_QW_INT8 = 2
GROUPS = (0, 32, 64, 128)


def _qweight(qdata, scales, group):
    N, K = qdata.shape
    return _lib.QWeight(OT_QW_INT8, N, K, group, qdata.data_ptr(),
                        ctypes.cast(ctypes.c_void_p(scales.data_ptr()), ctypes.POINTER(ctypes.c_float)), False)


def quantize_weight(w, group=0):
    """w: [N, K] -> (qdata [N, K] int8, scales [N, K // group or 1] f32) by libot's quantizer."""
    if group not in GROUPS:
        raise ValueError(f"quantize_weight: group={group} must be 0 (per row), 32, 64 or 128")
    _lib.need(w.dim() == 2 and w.numel() > 0, "quantize_weight", f"w {tuple(w.shape)} must be [N, K]")
    w = w.detach().float().contiguous()
    N, K = w.shape
    qw = _lib.QWeight()
    _lib.check(_lib.lib.ot_qweight_quantize(ctypes.byref(qw), OT_QW_INT8, group, w.data_ptr(), N, K))
    try:
        q = torch.empty(N, K, dtype=torch.int8)
        s = torch.empty(N, K // group if group else 1, dtype=torch.float32)
        ctypes.memmove(q.data_ptr(), qw.data, q.numel())
        ctypes.memmove(s.data_ptr(), ctypes.cast(qw.scales, ctypes.c_void_p), 4 * s.numel())
    finally:
        _lib.lib.ot_qweight_free(ctypes.byref(qw))
    return q, s


def dequantize_weight(qdata, scales):
    """[N, K] float32 = qdata * scale of its group."""
    g = qdata.shape[1] // scales.shape[1]
    return qdata.float() * scales.repeat_interleave(g, 1)


@torch.library.custom_op("ops_transformer::int8_linear", mutates_args=())
def int8_linear(x: Tensor, qdata: Tensor, scales: Tensor, bias: Optional[Tensor], group: int) -> Tensor:
    """x: [M, K] f32, qdata: [N, K] int8, scales f32, bias [N] f32 or None -> y [M, N] f32."""
    M = x.shape[0]
    y = torch.empty(M, qdata.shape[0], dtype=torch.float32)
    qw = _qweight(qdata, scales, group)
    _lib.sync_threads()
    _lib.check(_lib.lib.ot_qlinear_fwd(y.data_ptr(), x.data_ptr(), ctypes.byref(qw), _lib.ptr(bias), M))
    return y


@int8_linear.register_fake
def _(x, qdata, scales, bias, group):
    return x.new_empty((x.shape[0], qdata.shape[0]), dtype=torch.float32)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1], inputs[2])


def _backward(ctx, dy):
    qdata, scales = ctx.saved_tensors
    return dy @ dequantize_weight(qdata, scales), None, None, None, None


int8_linear.register_autograd(_backward, setup_context=_setup)


class Int8Linear(torch.nn.Module):
    """nn.Linear with an int8 weight (per row: group=0, or per group of 32/64/128 inputs).
    forward(x [..., in_features]) -> [..., out_features] in x's dtype, computed in float32.
    Gradients flow to x (through the dequantized weight); the weight is frozen."""

    def __init__(self, in_features, out_features, bias=True, group=0):
        super().__init__()
        if group not in GROUPS or (group and in_features % group):
            raise ValueError(f"Int8Linear: group={group} must be 0, 32, 64 or 128 and divide "
                             f"in_features={in_features}")
        self.in_features, self.out_features, self.group = in_features, out_features, group
        self.register_buffer("qweight", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("scales", torch.zeros(out_features, in_features // group if group else 1))
        self.register_buffer("bias", torch.zeros(out_features) if bias else None)

    @classmethod
    def from_float(cls, weight, bias=None, group=0):
        """weight: [out, in] (nn.Linear layout), bias: [out] or None."""
        m = cls(weight.shape[1], weight.shape[0], bias is not None, group)
        m.qweight, m.scales = quantize_weight(weight, group)
        if bias is not None:
            m.bias = bias.detach().float().contiguous().clone()
        return m

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, group={self.group or 'row'}")

    def forward(self, x):
        _lib.need_float_cpu("Int8Linear", x=x)
        _lib.need(x.dim() >= 1 and x.shape[-1] == self.in_features and x.numel() > 0, "Int8Linear",
                  f"x {tuple(x.shape)} must be [..., in_features={self.in_features}]")
        shape = x.shape
        xr = x.reshape(-1, shape[-1]).float().contiguous()
        y = int8_linear(xr, self.qweight, self.scales, self.bias, self.group)
        return y.view(*shape[:-1], self.out_features).to(x.dtype)


def _as_linear(mod):
    """(weight [out, in], bias) of an nn.Linear or a transformers Conv1D ([in, out]), else None."""
    if isinstance(mod, torch.nn.Linear):
        return mod.weight, mod.bias
    if type(mod).__name__ == "Conv1D" and hasattr(mod, "nf"):
        return mod.weight.t(), mod.bias
    return None


def quantize_model(model, quant_config="int8", calibrate_dataset=None, skip=()):
    """Replaces every nn.Linear (and transformers' Conv1D) of model, in place, by an Int8Linear
    with post-training int8 weights. quant_config: "int8" (one scale per output row),
    "int8_g32" / "int8_g64" / "int8_g128" (per group of inputs), or {"group": 0|32|64|128}.
    skip: names (or name suffixes) of modules to keep in float. Returns model.
    Layers whose in_features the group does not divide keep one scale per row."""
    if calibrate_dataset is not None or quant_config == "qat_fp16":
        raise NotImplementedError("quantize_model: calibrated post-training quantization and "
                                  "quantization-aware training (qat_fp16) are not implemented yet; "
                                  "use quant_config='int8' or 'int8_g32'/'int8_g64'/'int8_g128'")
    if isinstance(quant_config, dict):
        group = quant_config.get("group", 0)
    else:
        names = {"int8": 0, "int8_g32": 32, "int8_g64": 64, "int8_g128": 128}
        if quant_config not in names:
            raise ValueError(f"quantize_model: quant_config={quant_config!r}: one of {sorted(names)} "
                             f"or {{'group': 0|32|64|128}}")
        group = names[quant_config]
    if group not in GROUPS:
        raise ValueError(f"quantize_model: group={group} must be 0, 32, 64 or 128")
    for name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            full = f"{name}.{cname}" if name else cname
            wb = _as_linear(child)
            if wb is None or any(full == s or full.endswith("." + s) for s in skip):
                continue
            w, b = wb
            g = group if group and w.shape[1] % group == 0 else 0
            setattr(mod, cname, Int8Linear.from_float(w, b, g))
    return model
