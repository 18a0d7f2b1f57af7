"""Weight-only INT8 linear layers, quantize_model (post-training, plain or calibrated) and
quantization-aware training.

Weights are quantized by libot (ot_qweight_quantize: symmetric, scale = absmax / 127 per row
or per group of 32 / 64 / 128 inputs, round half to even) and multiplied by its quantized
linear kernels (ot_qlinear_fwd: up to 3 rows, a GEMV that streams the int8 weight once with
float32 activations ("weight-only"); from 4 rows, for groups other than 32, an int8 x int8
GEMM that quantizes the activations to int8 per row on the fly, scale absmax / 127, so each
output is off the float32 product by at most sum |w| * scale / 2; group 32: the GEMV up to 16
rows, then dequantized tiles into the float32 GEMM).

Calibrated post-training quantization (quantize_model(..., calibrate_dataset=batches)) is
libot's AWQ-style search (ot_qsearch): the inputs of every linear layer are recorded on the
calibration batches; per layer it picks per-input-channel scales s = mean|x|^alpha (alpha on
the grid 0, 0.05, ..., 1) and then a clip ratio of the int8 scales per output row (1 down to
0.8), each minimizing the layer's output error ||x W^T - (x / s) Q(W diag(s))^T|| on those
inputs, plus for groups other than 32 the error of the int8 x int8 GEMM that runs 4 rows or
more (its input rows x / s quantized to int8 per row); alpha 0 and clip 1 are plain PTQ, so the
search never does worse on them. An
arbitrary torch model gives no place to fold 1 / s into, so the Int8Linear keeps it as an
explicit per-input scale of its activations (one multiply per input; none when alpha = 0).
(`ot quantize --calibrate` folds the scales into the previous norm or linear layer instead.)

Quantization-aware training (quantize_model(model, "qat_fp16")) replaces every linear layer
by a QATLinear: float32 master weights, the forward on the weights fake-quantized by the same
quantizer (ot_qweight_fake_quant: dequantize(quantize(w)), bit for bit), the backward
straight-through (the weight's gradient is that of the fake-quantized weight, unchanged);
under torch.autocast (float16 or bfloat16) the matmul runs in the autocast dtype. convert(model)
then replaces each QATLinear by the Int8Linear of its weights: the same int8 values and scales
the forward ran with.
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


def quantize_weight(w, group=0, clip=None):
    """w: [N, K] -> (qdata [N, K] int8, scales [N, K // group or 1] f32) by libot's quantizer;
    clip: [N] ratios in (0, 1] of each row's scales (calibration), None: absmax / 127."""
    if group not in GROUPS:
        raise ValueError(f"quantize_weight: group={group} must be 0 (per row), 32, 64 or 128")
    _lib.need(w.dim() == 2 and w.numel() > 0, "quantize_weight", f"w {tuple(w.shape)} must be [N, K]")
    w = w.detach().float().contiguous()
    N, K = w.shape
    if clip is not None:
        clip = clip.detach().float().contiguous()
        _lib.need(clip.shape == (N,), "quantize_weight", f"clip {tuple(clip.shape)} must be [{N}]")
    qw = _lib.QWeight()
    _lib.check(_lib.lib.ot_qweight_quantize_clip(ctypes.byref(qw), OT_QW_INT8, group, w.data_ptr(), N, K,
                                                 _lib.ptr(clip)))
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
        self.register_buffer("input_scale", None)   # [in] 1 / s of a calibrated layer, or None

    @classmethod
    def from_float(cls, weight, bias=None, group=0, channel_scale=None, clip=None):
        """weight: [out, in] (nn.Linear layout), bias: [out] or None. channel_scale: [in] s of a
        calibrated layer (the weight stored is Q(W diag(s)), the input multiplied by 1 / s);
        clip: [out] ratios in (0, 1] of each row's int8 scales (None: 1)."""
        m = cls(weight.shape[1], weight.shape[0], bias is not None, group)
        w = weight.detach().float()
        if channel_scale is not None:
            s = channel_scale.detach().float().contiguous()
            w = w * s
            m.input_scale = (1.0 / s.double()).float()
        m.qweight, m.scales = quantize_weight(w, group, clip)
        if bias is not None:
            m.bias = bias.detach().float().contiguous().clone()
        return m

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, group={self.group or 'row'}"
                f"{', calibrated input scale' if self.input_scale is not None else ''}")

    def _direct_qweight(self):
        """The QWeight view of the buffers, rebuilt only when a buffer was replaced (its data
        pointer or shape changed)."""
        key = (self.qweight.data_ptr(), self.qweight.shape, self.scales.data_ptr())
        c = self.__dict__.get("_qw_cache")
        if c is None or c[0] != key:
            c = (key, _qweight(self.qweight, self.scales, self.group))
            self.__dict__["_qw_cache"] = c
        return c[1]

    def _direct(self, x):
        """Eager inference (no autograd, no tracing) on a contiguous float32 CPU input: the C
        kernel called directly, the same ot_qlinear_fwd the custom op runs, without its dispatch
        (which costs more than a decode step's GEMV of a small layer). None when x does not
        qualify; forward then takes the custom op."""
        if (type(x) is not torch.Tensor or x.dtype != torch.float32 or x.device.type != "cpu"
                or self.input_scale is not None or (x.requires_grad and torch.is_grad_enabled())
                or torch.compiler.is_compiling() or not x.is_contiguous() or x.dim() < 1
                or x.shape[-1] != self.in_features or x.numel() == 0
                or self.qweight.device.type != "cpu" or not self.qweight.is_contiguous()
                or (self.bias is not None and (self.bias.dtype != torch.float32
                                               or not self.bias.is_contiguous()))):
            return None
        M = x.numel() // self.in_features
        y = torch.empty(*x.shape[:-1], self.out_features, dtype=torch.float32)
        b = self.bias
        _lib.sync_threads()
        _lib.check(_lib.lib.ot_qlinear_fwd(y.data_ptr(), x.data_ptr(), ctypes.byref(self._direct_qweight()),
                                           b.data_ptr() if b is not None else None, M))
        return y

    def forward(self, x):
        y = self._direct(x)
        if y is not None:
            return y
        _lib.need_float_cpu("Int8Linear", x=x)
        _lib.need(x.dim() >= 1 and x.shape[-1] == self.in_features and x.numel() > 0, "Int8Linear",
                  f"x {tuple(x.shape)} must be [..., in_features={self.in_features}]")
        shape = x.shape
        xr = x.reshape(-1, shape[-1]).float()
        if self.input_scale is not None:
            xr = xr * self.input_scale
        xr = xr.contiguous()
        y = int8_linear(xr, self.qweight, self.scales, self.bias, self.group)
        return y.view(*shape[:-1], self.out_features).to(x.dtype)


def _as_linear(mod):
    """(weight [out, in], bias) of an nn.Linear or a transformers Conv1D ([in, out]), else None."""
    if isinstance(mod, torch.nn.Linear):
        return mod.weight, mod.bias
    if type(mod).__name__ == "Conv1D" and hasattr(mod, "nf"):
        return mod.weight.t(), mod.bias
    return None


# ------------------------------------------------------------ calibration ---
def qsearch(weight, x, group=0, xmean=None, alpha_steps=20, clip_steps=10, clip_step=0.02, act_int8=None):
    """libot's AWQ-style search for one linear layer (ot_qsearch). weight: [N, K], x: [R, K]
    calibration inputs, xmean: [K] mean |x| over all calibration rows (None: over x).
    Returns (s [K] per-input-channel scales (ones when alpha = 0), clip [N] per-row clip
    ratios, {"alpha", "err_plain", "err_scaled", "err"}): the output errors are
    sum_n ||x (w_n - deq_n / s)||^2 / R of plain PTQ, after the alpha search, and of the choice;
    act_int8 (default: group != 32, where Int8Linear runs 4 rows or more through the int8 x int8
    GEMM) adds the error of that GEMM, whose input rows x / s are quantized to int8 per row."""
    if act_int8 is None:
        act_int8 = group != 32
    _lib.need(weight.dim() == 2 and x.dim() == 2 and x.shape[1] == weight.shape[1], "qsearch",
              f"weight {tuple(weight.shape)} must be [N, K] and x {tuple(x.shape)} [R, K]")
    w = weight.detach().float().contiguous()
    xx = x.detach().float().contiguous()
    N, K = w.shape
    s, clip = torch.ones(K), torch.ones(N)
    xm = None if xmean is None else xmean.detach().float().contiguous()
    res, opts = _lib.QSearchResult(), _lib.QSearchOpts(alpha_steps, clip_steps, clip_step, act_int8)
    _lib.sync_threads()
    _lib.check(_lib.lib.ot_qsearch(ctypes.byref(res), s.data_ptr(), clip.data_ptr(), w.data_ptr(), N, K, group,
                                   xx.data_ptr(), xx.shape[0], _lib.ptr(xm), ctypes.byref(opts)))
    return s, clip, {"alpha": res.alpha, "err_plain": res.err_plain, "err_scaled": res.err_scaled,
                     "err": res.err}


class _Recorder:
    """Inputs of one linear layer over the calibration batches: every row in the mean |x|, at
    most `quota` evenly strided rows per batch (up to max_rows) kept for the search."""

    def __init__(self, K, quota, max_rows):
        self.asum, self.n, self.rows, self.kept = torch.zeros(K, dtype=torch.float64), 0, [], 0
        self.quota, self.max_rows = quota, max_rows

    def __call__(self, mod, args):
        x = args[0].detach().reshape(-1, args[0].shape[-1]).float()
        self.asum += x.abs().sum(0, dtype=torch.float64)
        self.n += x.shape[0]
        take = min(self.quota, self.max_rows - self.kept, x.shape[0])
        if take > 0:
            idx = torch.linspace(0, x.shape[0] - 1, take).round().long()
            self.rows.append(x[idx].clone())
            self.kept += take


def _run_batch(model, batch):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def _calibrate(model, targets, dataset, max_rows, group, search):
    """targets: [(parent, name, child, weight, bias, group)] -> {id(child): (s, clip, info)}."""
    n = len(dataset) if hasattr(dataset, "__len__") else 0
    quota = max(1, -(-max_rows // n)) if n else max_rows
    recs, hooks = {}, []
    for _, _, child, w, _, _ in targets:
        recs[id(child)] = _Recorder(w.shape[1], quota, max_rows)
        hooks.append(child.register_forward_pre_hook(recs[id(child)]))
    try:
        with torch.no_grad():
            for batch in dataset:
                _run_batch(model, batch)
    finally:
        for h in hooks:
            h.remove()
    out = {}
    for _, name, child, w, _, g in targets:
        r = recs[id(child)]
        if not r.n:
            raise ValueError(f"quantize_model: layer {name} saw no input on calibrate_dataset (is it used "
                             f"by the forward?); pass skip=({name!r},) to keep it in float")
        out[id(child)] = qsearch(w, torch.cat(r.rows), g, (r.asum / r.n).float(), **search)
    return out


# ---------------------------------------------------- quantization-aware ---
@torch.library.custom_op("ops_transformer::fake_quant", mutates_args=())
def fake_quant(w: Tensor, group: int) -> Tensor:
    """w: [N, K] f32 -> dequantize(quantize(w)) by libot (ot_qweight_fake_quant), bit for bit
    Int8Linear.from_float's weights; backward: straight-through (the gradient unchanged)."""
    out = torch.empty_like(w)
    _lib.sync_threads()
    _lib.check(_lib.lib.ot_qweight_fake_quant(out.data_ptr(), w.data_ptr(), w.shape[0], w.shape[1], group, None))
    return out


@fake_quant.register_fake
def _(w, group):
    return torch.empty_like(w)


fake_quant.register_autograd(lambda ctx, g: (g, None), setup_context=lambda ctx, inputs, output: None)


class QATLinear(torch.nn.Module):
    """Quantization-aware linear layer: weight [out, in] float32 master (a Parameter), forward
    y = x fake_quant(weight)^T + bias (in the autocast dtype under torch.autocast), gradients
    straight-through to the master weight. to_int8() gives the Int8Linear of the same weights."""

    def __init__(self, in_features, out_features, bias=True, group=0):
        super().__init__()
        if group not in GROUPS or (group and in_features % group):
            raise ValueError(f"QATLinear: group={group} must be 0, 32, 64 or 128 and divide "
                             f"in_features={in_features}")
        self.in_features, self.out_features, self.group = in_features, out_features, group
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.bias = torch.nn.Parameter(torch.zeros(out_features)) if bias else None

    @classmethod
    def from_float(cls, weight, bias=None, group=0):
        m = cls(weight.shape[1], weight.shape[0], bias is not None, group)
        with torch.no_grad():
            m.weight.copy_(weight.detach().float())
            if bias is not None:
                m.bias.copy_(bias.detach().float())
        return m

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, group={self.group or 'row'}")

    def forward(self, x):
        _lib.need(self.weight.device.type == "cpu", "QATLinear", "the weights must be CPU tensors")
        w = fake_quant(self.weight.float().contiguous(), self.group)
        return torch.nn.functional.linear(x, w, self.bias)   # under autocast: its dtype

    def to_int8(self):
        return Int8Linear.from_float(self.weight, self.bias, self.group)


def convert(model):
    """Replaces every QATLinear of model (in place) by the Int8Linear of its weights (the int8
    values and scales its forward ran with). Returns model."""
    for mod in list(model.modules()):
        for cname, child in list(mod.named_children()):
            if isinstance(child, QATLinear):
                setattr(mod, cname, child.to_int8())
    return model


# ------------------------------------------------------------ the model ---
def _parse_config(quant_config):
    """-> (group, qat)"""
    names = {"int8": 0, "int8_g32": 32, "int8_g64": 64, "int8_g128": 128,
             "qat_fp16": 0, "qat": 0, "qat_g32": 32, "qat_g64": 64, "qat_g128": 128}
    if isinstance(quant_config, dict):
        group, qat = quant_config.get("group", 0), bool(quant_config.get("qat", False))
    elif quant_config in names:
        group, qat = names[quant_config], quant_config.startswith("qat")
    else:
        raise ValueError(f"quantize_model: quant_config={quant_config!r}: one of {sorted(names)} "
                         f"or {{'group': 0|32|64|128, 'qat': bool}}")
    if group not in GROUPS:
        raise ValueError(f"quantize_model: group={group} must be 0, 32, 64 or 128")
    return group, qat


def quantize_model(model, quant_config="int8", calibrate_dataset=None, skip=(), calib_rows=512,
                   search=None):
    """Replaces every nn.Linear (and transformers' Conv1D) of model, in place. Returns model.
    quant_config:
      "int8" (one scale per row), "int8_g32" / "int8_g64" / "int8_g128" (per group of inputs),
      or {"group": 0|32|64|128}: post-training int8 Int8Linear layers;
      "qat_fp16" (per row; "qat_g32" ... per group, or {"group": g, "qat": True}):
      quantization-aware training, QATLinear layers (fake-quantized forward, straight-through
      backward; train under torch.autocast as you like), then convert(model) for Int8Linear.
    calibrate_dataset (post-training only): an iterable of batches, each passed to the model as
      model(batch), model(*batch) or model(**batch); the scales of each layer are searched on its
      inputs (libot's AWQ-style search, see the module docstring; calib_rows rows per layer,
      search: qsearch's alpha_steps / clip_steps / clip_step).
    skip: names (or name suffixes) of modules to keep in float.
    Layers whose in_features the group does not divide keep one scale per row."""
    group, qat = _parse_config(quant_config)
    if qat and calibrate_dataset is not None:
        raise ValueError("quantize_model: calibrate_dataset is for post-training quantization; "
                         "quantization-aware training learns its weights (drop calibrate_dataset)")
    targets = []
    for name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            full = f"{name}.{cname}" if name else cname
            wb = _as_linear(child)
            if wb is None or any(full == s or full.endswith("." + s) for s in skip):
                continue
            w, b = wb
            g = group if group and w.shape[1] % group == 0 else 0
            targets.append((mod, full, child, w, b, g))
    found = _calibrate(model, targets, calibrate_dataset, calib_rows, group, search or {}) \
        if calibrate_dataset is not None else {}
    for mod, full, child, w, b, g in targets:
        cname = full.rsplit(".", 1)[-1]
        if qat:
            new = QATLinear.from_float(w, b, g)
        elif id(child) in found:
            s, clip, info = found[id(child)]
            new = Int8Linear.from_float(w, b, g, s if info["alpha"] > 0 else None, clip)
            new.calibration = info
        else:
            new = Int8Linear.from_float(w, b, g)
        setattr(mod, cname, new)
    return model
