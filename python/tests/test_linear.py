"""ops_transformer.linear / Linear (libot's GEMM) against torch.nn.functional.linear."""
import pytest
import torch
import torch.nn.functional as F

import ops_transformer as ot
from ops_transformer import _lib, dense
from conftest import rel_err

TORCH_LINEAR = dense.torch_linear
# max |ours - ref| / max |ref| against a float64 reference: f32 GEMMs (K up to 300) round
# to ~1e-6; bf16 inputs are exact in f32, the products accumulate in f32 and the output
# (and dW, dx) is rounded once to bf16 (2^-8 relative, ~4e-3)
TOL = {torch.float32: 2e-5, torch.bfloat16: 1e-2}


def _run(fn, x, w, b, g):
    y = fn(x, w, b)
    leaves = [t for t in (x, w, b) if t is not None]
    return (y,) + torch.autograd.grad(y, leaves, g)


def _ref(x, w, b, g):
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    br = b.detach().double().requires_grad_() if b is not None else None
    return _run(TORCH_LINEAR, xr, wr, br, g.double())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("xshape", [(17,), (1, 17), (5, 17), (2, 7, 17), (3, 33, 301)])
@pytest.mark.parametrize("N", [1, 13, 257])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_matches_torch(bias, N, xshape, dtype):
    K = xshape[-1]
    x = torch.randn(xshape).to(dtype).requires_grad_()
    w = (torch.randn(N, K) / K ** 0.5).to(dtype).requires_grad_()
    b = torch.randn(N).to(dtype).requires_grad_() if bias else None
    g = torch.randn(xshape[:-1] + (N,)).to(dtype)
    ours = _run(ot.linear, x, w, b, g)
    ref = _ref(x, w, b, g)
    for a, r in zip(ours, ref):
        assert a.dtype == dtype and a.shape == r.shape
        assert rel_err(a, r) < TOL[dtype]


def test_linear_partial_grads_and_noncontiguous():
    # only x needs a gradient, then only the weight; a transposed (non-contiguous) input
    x = torch.randn(19, 6).t().requires_grad_()          # [6, 19], strides (1, 6)
    w = torch.randn(9, 19)
    b = torch.randn(9, requires_grad=True)
    y = ot.linear(x, w, b)
    dx, db = torch.autograd.grad(y.square().sum(), (x, b))
    xr, br = x.detach().requires_grad_(), b.detach().requires_grad_()
    rx, rb = torch.autograd.grad(TORCH_LINEAR(xr, w, br).square().sum(), (xr, br))
    assert rel_err(dx, rx) < 1e-5 and rel_err(db, rb) < 1e-5
    wq = w.clone().requires_grad_()
    (dw,) = torch.autograd.grad(ot.linear(x.detach(), wq).sum(), (wq,))
    assert rel_err(dw, x.detach().sum(0).expand(9, 19)) < 1e-5


def test_linear_module_is_a_drop_in():
    torch.manual_seed(1)
    ref = torch.nn.Linear(21, 11)
    m = ot.Linear(21, 11)
    m.load_state_dict(ref.state_dict())
    assert list(m.state_dict()) == list(ref.state_dict()) == ["weight", "bias"]
    x = torch.randn(4, 3, 21)
    assert rel_err(m(x), ref(x)) < 1e-5
    wrapped = ot.Linear.from_linear(torch.nn.Linear(21, 11, bias=False))
    assert wrapped.bias is None and list(wrapped.state_dict()) == ["weight"]
    assert rel_err(wrapped(x), TORCH_LINEAR(x, wrapped.weight)) < 1e-5


def test_compile_fullgraph_equals_eager():
    torch.manual_seed(2)
    m = torch.nn.Sequential(ot.Linear(29, 37), torch.nn.GELU(), ot.Linear(37, 5, bias=False))
    x = torch.randn(3, 7, 29)
    eager = m(x)
    ge = torch.autograd.grad(eager.square().sum(), list(m.parameters()))
    torch._dynamo.reset()
    comp = torch.compile(m, fullgraph=True)(x)
    gc = torch.autograd.grad(comp.square().sum(), list(m.parameters()))
    assert rel_err(comp, eager) < 1e-6
    for a, b in zip(gc, ge):
        assert rel_err(a, b) < 1e-6


def test_patch_linear_and_unpatch():
    assert F.linear is TORCH_LINEAR
    calls = []
    real = dense.linear_fwd

    m = torch.nn.Linear(10, 4)
    x = torch.randn(2, 10)
    ot.patch()                                   # the default: SDPA only
    try:
        assert F.linear is TORCH_LINEAR
    finally:
        ot.unpatch()
    ot.patch(linear=True)
    try:
        assert F.linear is ot.linear and torch.nn.functional.linear is ot.linear
        dense.linear_fwd = lambda *a: calls.append(1) or real(*a)
        y = m(x)                                 # nn.Linear calls F.linear
    finally:
        dense.linear_fwd = real
        ot.unpatch()
    assert calls == [1] and F.linear is TORCH_LINEAR
    assert rel_err(y, TORCH_LINEAR(x, m.weight, m.bias)) < 1e-6


def _fallback(reason_re, *args):
    dense.reset_warnings()
    with pytest.warns(RuntimeWarning, match=reason_re):
        y = ot.linear(*args)
    return y


def test_fallback_float64_warns_once_and_is_correct():
    x, w, b = torch.randn(3, 5, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64), None
    y = _fallback("dtype torch.float64", x, w, b)
    assert torch.equal(y, TORCH_LINEAR(x, w))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ot.linear(x, w)                         # once per reason


def test_fallback_meta_device_and_autocast():
    # the path CUDA tensors take, exercised without a GPU on the meta device
    x, w = torch.randn(3, 5, device="meta"), torch.randn(4, 5, device="meta")
    y = _fallback("meta tensors", x, w)
    assert y.device.type == "meta" and y.shape == (3, 4)
    x, w, b = torch.randn(3, 5), torch.randn(4, 5), torch.randn(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = _fallback("autocast", x, w, b)
        assert y.dtype == torch.bfloat16
        assert torch.equal(y, TORCH_LINEAR(x, w, b))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_fallback_cuda():
    x, w = torch.randn(3, 5, device="cuda"), torch.randn(4, 5, device="cuda")
    assert rel_err(_fallback("cuda tensors", x, w).cpu(), TORCH_LINEAR(x.cpu(), w.cpu())) < 1e-5


def test_edge_cases_and_errors_are_torchs():
    # empty inputs, a zero contraction: torch's results; mismatched shapes or dtypes: torch's error
    w, b = torch.randn(4, 5), torch.randn(4)
    assert ot.linear(torch.randn(0, 5), w, b).shape == (0, 4)
    assert torch.equal(ot.linear(torch.randn(2, 0), torch.randn(4, 0), b), b.expand(2, 4))
    with pytest.raises(RuntimeError):
        ot.linear(torch.randn(3, 6), w)
    with pytest.raises(RuntimeError):
        ot.linear(torch.randn(3, 5, dtype=torch.bfloat16), w)


def test_op_bad_arguments_raise_the_librarys_message():
    # the custom ops called directly: shapes are checked in Python, sizes by libot
    x, w = torch.randn(3, 5), torch.randn(4, 5)
    with pytest.raises(ValueError, match=r"ot_linear_fwd: M=0 must be > 0"):
        dense.linear_fwd(torch.randn(0, 5), w, None)
    with pytest.raises(ValueError, match=r"ot_linear_fwd: K=0 must be > 0"):
        dense.linear_fwd(torch.randn(3, 0), torch.randn(4, 0), None)
    with pytest.raises(ValueError, match=r"weight \(4, 6\) \[N, K\]"):
        dense.linear_fwd(x, torch.randn(4, 6), None)
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        dense.linear_fwd(x.double(), w.double(), None)
    with pytest.raises(ValueError, match=r"dy \(3, 5\)"):
        dense.linear_bwd(torch.randn(3, 5), x, w, True, True, False)
    with pytest.raises(ValueError, match="ot_gemm: N=0 must be > 0"):
        _lib.check(_lib.lib.ot_gemm(0, 0, False, False, 2, 0, 2, 1.0, x.data_ptr(), 2, w.data_ptr(), 2,
                                    0.0, x.data_ptr(), 2))


def test_opcheck():
    x = torch.randn(6, 7, requires_grad=True)
    w = torch.randn(5, 7, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    torch.library.opcheck(dense.linear_fwd, (x, w, b))
    torch.library.opcheck(dense.linear_fwd, (x, w, None))
    torch.library.opcheck(dense.linear_bwd, (torch.randn(6, 5), x.detach(), w.detach(), True, True, True))
