"""Int8Linear and quantize_model (post-training, per row / per group) against torch."""
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
    if M > 16:   # the int8 GEMM: x quantized to int8 per row, scale absmax / 127, error <= scale / 2
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
    with pytest.raises(NotImplementedError, match="calibrated"):
        ot.quantize_model(mlp, calibrate_dataset=[x])
    with pytest.raises(NotImplementedError, match="qat"):
        ot.quantize_model(mlp, quant_config="qat_fp16")
    with pytest.raises(ValueError, match="quant_config"):
        ot.quantize_model(mlp, quant_config="int4")
    with pytest.raises(ValueError, match="group"):
        ot.Int8Linear(48, 8, group=32)


def test_quantize_hf_gpt2():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 97, (1, 12))
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
