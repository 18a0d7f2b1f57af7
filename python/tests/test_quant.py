"""Int8Linear and quantize_model against torch: post-training (per row / per group), calibrated
(libot's AWQ-style search) and quantization-aware training (fake-quantized forward,
straight-through backward, convert to Int8Linear)."""
import copy

import pytest
import torch

import ops_transformer as ot
from ops_transformer import quant
from conftest import rel_err


def _torch_quantize(w, group):
    N, K = w.shape
    g = group or K
    wg = w.view(N, K // g, g)
    scale = wg.abs().amax(-1) / 127
    q = torch.where(scale[..., None] > 0, torch.round(wg / scale.clamp_min(1e-30)[..., None]), 0)
    return q.view(N, K).to(torch.int8), scale


@pytest.mark.parametrize("group", [0, 32, 64, 128])
@pytest.mark.parametrize("M", [1, 3, 16, 17, 70])
def test_int8_linear(group, M):
    N, K = 37, 256
    w, b = torch.randn(N, K), torch.randn(N)
    w[3] = 0                                             # an all-zero row: scale 0
    lin = ot.Int8Linear.from_float(w, b, group)
    q, s = _torch_quantize(w, group)
    assert torch.equal(lin.qweight, q)
    assert torch.allclose(lin.scales, s, rtol=1e-7, atol=0)
    x = torch.randn(M, K, requires_grad=True)
    y = lin(x)
    wd = quant.dequantize_weight(q, s)
    ref = x @ wd.t() + b
    # the int8 GEMM (from 4 rows, groups of 32 from 17; OT_QLINEAR_I8_MIN in ot/quant.h): x
    # quantized to int8 per row, scale absmax / 127, error <= scale / 2
    if M > 16 or (M >= 4 and group != 32):
        xa = x.detach().abs()
        sx = xa.amax(dim=1, keepdim=True) / 127
        bound = sx / 2 * wd.abs().sum(dim=1) * (1 + 2**-20) + 1e-5 * (xa @ wd.abs().t() + b.abs())
        assert bool(((y - ref).abs() <= bound).all())
        assert rel_err(y, ref) < 2e-2
    else:
        assert rel_err(y, ref) < 1e-5
    assert (wd - w).abs().max() <= s.max() / 2 + 1e-6  # |w - q s| <= s / 2
    (dx,) = torch.autograd.grad(y.sum(), x)
    assert rel_err(dx, torch.ones(M, N) @ wd) < 1e-5


@pytest.mark.parametrize("group", [0, 64])
def test_int8_linear_direct_path(group, monkeypatch):
    """Eager inference calls the kernel directly (no custom-op dispatch): the same numbers as the
    custom op, bit for bit; inputs that need autograd, a non-contiguous view or bf16 still go
    through the op; a buffer replaced after a call is seen by the next one."""
    torch.manual_seed(1)
    N, K = 45, 128
    lin = ot.Int8Linear.from_float(torch.randn(N, K), torch.randn(N), group)
    calls = []
    op = quant.int8_linear
    monkeypatch.setattr(quant, "int8_linear", lambda *a: calls.append(1) or op(*a))
    for M in (1, 5, 40):
        x = torch.randn(2, M, K)
        with torch.no_grad():
            y = lin(x)
        assert not calls
        assert torch.equal(y, op(x.reshape(-1, K), lin.qweight, lin.scales, lin.bias, group).view(2, M, N))
    xg = torch.randn(3, K, requires_grad=True)
    y = lin(xg)
    assert calls and y.requires_grad
    calls.clear()
    with torch.no_grad():
        xt = torch.randn(K, 6).t()                       # not contiguous
        assert torch.equal(lin(xt), op(xt.contiguous(), lin.qweight, lin.scales, lin.bias, group))
        assert calls
        calls.clear()
        w2 = ot.Int8Linear.from_float(torch.randn(N, K), None, group)
        lin.qweight, lin.scales, lin.bias = w2.qweight, w2.scales, None
        x = torch.randn(4, K)
        assert torch.equal(lin(x), w2(x)) and not calls
        with pytest.raises(ValueError, match="in_features"):
            lin(torch.randn(4, K + 1))


def test_quantize_model_mlp_and_errors():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10))
    x = torch.randn(5, 64)
    ref = mlp(x).detach()
    qm = ot.quantize_model(mlp, quant_config="int8_g32", skip=("2",))
    assert isinstance(qm[0], ot.Int8Linear) and qm[0].group == 32
    assert isinstance(qm[2], torch.nn.Linear)            # skipped
    y = qm(x)
    assert rel_err(y, ref, floor=1.0) < 2e-2                # int8 error, small
    with pytest.raises(ValueError, match="calibrate_dataset is for post-training"):
        ot.quantize_model(mlp, quant_config="qat_fp16", calibrate_dataset=[x])
    with pytest.raises(ValueError, match="quant_config"):
        ot.quantize_model(mlp, quant_config="int4")
    with pytest.raises(ValueError, match="group"):
        ot.Int8Linear(48, 8, group=32)


def test_quantize_hf_gpt2():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    # 3 tokens: the GEMV with f32 activations, exact (from 4 rows the int8 GEMM quantizes
    # them; test_int8_linear bounds that)
    ids = torch.randint(0, 97, (1, 3))
    with torch.no_grad():
        ref = model(ids).logits
        # the expected result: every Conv1D / Linear weight replaced by its dequantized copy
        deq = transformers.GPT2LMHeadModel(cfg).eval()
        deq.load_state_dict(model.state_dict())
        for mod in deq.modules():
            wb = quant._as_linear(mod)
            if wb is not None:
                q, s = quant.quantize_weight(wb[0], 64)
                wd = quant.dequantize_weight(q, s)
                if isinstance(mod, torch.nn.Linear):    # untie lm_head from the embedding
                    mod.weight = torch.nn.Parameter(wd)
                else:
                    mod.weight.copy_(wd.t())
        want = deq(ids).logits
        ot.quantize_model(model, quant_config={"group": 64})
        got = model(ids).logits
    assert sum(isinstance(m, ot.Int8Linear) for m in model.modules()) == 2 * 4 + 1
    assert rel_err(got, want) < 1e-4
    assert rel_err(got, ref, floor=1.0) < 5e-2


# ------------------------------------------------------------ calibrated PTQ ---
def _outlier_x(R, K, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(R, K, generator=g)
    x[:, 5::13] *= 40.0                                   # outlier input channels
    return x


@pytest.mark.parametrize("group", [0, 32])
def test_qsearch_reduces_output_error(group):
    N, K = 48, 256
    w = torch.randn(N, K) * 0.1
    x, held = _outlier_x(128, K, 1), _outlier_x(128, K, 2)
    s, clip, info = quant.qsearch(w, x, group)
    assert info["alpha"] > 0 and info["err"] <= info["err_scaled"] <= info["err_plain"]
    assert info["err"] < 0.7 * info["err_plain"]
    plain = ot.Int8Linear.from_float(w, None, group)
    cal = ot.Int8Linear.from_float(w, None, group, s, clip)
    ref = held @ w.t()
    # 16 rows at a time: the weight-only GEMV (the error is the weights')
    e_plain = sum(((plain(h) - r) ** 2).sum() for h, r in zip(held.split(16), ref.split(16)))
    e_cal = sum(((cal(h) - r) ** 2).sum() for h, r in zip(held.split(16), ref.split(16)))
    assert e_cal < 0.8 * e_plain
    # the stored weight is Q(W diag(s)) with the clipped scales, the input scaled by 1 / s
    q, sc = quant.quantize_weight(w * s, group, clip)
    assert torch.equal(cal.qweight, q) and torch.equal(cal.scales, sc)
    assert torch.allclose(cal.input_scale, 1 / s)
    with pytest.raises(ValueError, match="group"):
        quant.qsearch(w, x, 48)
    with pytest.raises(ValueError, match="not finite"):
        quant.qsearch(w, torch.full((4, K), float("nan")), group)


def test_quantize_model_calibrated():
    torch.manual_seed(0)
    K = 128
    mlp = torch.nn.Sequential(torch.nn.Linear(K, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    data = [_outlier_x(32, K, i) for i in range(8)]
    held = _outlier_x(64, K, 99)
    ref = mlp(held).detach()
    plain = ot.quantize_model(copy.deepcopy(mlp), "int8")
    cal = ot.quantize_model(copy.deepcopy(mlp), "int8", calibrate_dataset=data)
    assert isinstance(cal[0], ot.Int8Linear) and cal[0].calibration["alpha"] > 0
    assert cal[0].input_scale is not None
    with torch.no_grad():
        e_plain = sum(((plain(h) - r) ** 2).sum() for h, r in zip(held.split(16), ref.split(16)))
        e_cal = sum(((cal(h) - r) ** 2).sum() for h, r in zip(held.split(16), ref.split(16)))
    assert e_cal < 0.9 * e_plain              # (measured 0.80: the second layer has no outliers)
    # dict batches and a layer the data never reaches
    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.unused = torch.nn.Linear(K, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.a(x)
    with pytest.raises(ValueError, match="saw no input"):
        ot.quantize_model(Two(), "int8", calibrate_dataset=[{"x": data[0]}])
    m = ot.quantize_model(Two(), "int8", calibrate_dataset=[{"x": data[0]}], skip=("unused",))
    assert isinstance(m.a, ot.Int8Linear) and isinstance(m.unused, torch.nn.Linear)


def test_quantize_hf_gpt2_calibrated():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    data = [torch.randint(0, 97, (2, 16)) for _ in range(4)]
    ids = torch.randint(0, 97, (1, 12))
    with torch.no_grad():
        ref = model(ids).logits
        ot.quantize_model(model, quant_config="int8_g32", calibrate_dataset=data)
        got = model(ids).logits
    assert sum(isinstance(m, ot.Int8Linear) for m in model.modules()) == 2 * 4 + 1
    assert rel_err(got, ref, floor=1.0) < 5e-2


# -------------------------------------------------- quantization-aware training ---
@pytest.mark.parametrize("group", [0, 32])
def test_fake_quant_forward_and_ste(group):
    N, K, M = 24, 96, 5
    w = torch.randn(N, K)
    q, s = quant.quantize_weight(w, group)
    wq = quant.fake_quant(w, group)
    assert torch.equal(wq, quant.dequantize_weight(q, s))   # bit for bit the int8 export's weights
    lin = ot.QATLinear.from_float(w, torch.randn(N), group)
    x = torch.randn(M, K, requires_grad=True)
    y = lin(x)
    dy = torch.randn(M, N)
    y.backward(dy)
    # straight-through: the gradients of the linear layer at the fake-quantized weights
    assert torch.allclose(y, x @ wq.t() + lin.bias, rtol=1e-5, atol=1e-5)
    assert torch.allclose(lin.weight.grad, dy.t() @ x.detach(), rtol=1e-5, atol=1e-5)
    assert torch.allclose(x.grad, dy @ wq, rtol=1e-5, atol=1e-5)
    assert torch.allclose(lin.bias.grad, dy.sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("config", ["qat_fp16", "qat_g32"])
def test_qat_train_and_convert(config):
    torch.manual_seed(0)
    K = 64
    model = torch.nn.Sequential(torch.nn.Linear(K, 128), torch.nn.GELU(), torch.nn.Linear(128, 4))
    ot.quantize_model(model, config)
    assert all(isinstance(model[i], ot.QATLinear) for i in (0, 2))
    teacher = torch.nn.Linear(K, 4)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for step in range(60):
        x = torch.randn(32, K)
        with torch.autocast("cpu", dtype=torch.float16 if config == "qat_fp16" else torch.bfloat16):
            out = model(x)
        loss = torch.nn.functional.mse_loss(out.float(), teacher(x).detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])
    x = torch.randn(3, K)   # 3 rows: the GEMV with f32 activations (exact; see test_int8_linear)
    with torch.no_grad():
        want = model(x)
        ot.convert(model)
        assert all(isinstance(model[i], ot.Int8Linear) for i in (0, 2))
        got = model(x)
    assert rel_err(got, want) < 1e-4           # the int8 export runs the fake-quantized weights
