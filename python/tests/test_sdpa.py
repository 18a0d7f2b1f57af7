"""scaled_dot_product_attention against torch's own: forward and gradients, every case."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import ops_transformer as ot
from ops_transformer import attention
from conftest import rel_err

TORCH_SDPA = attention.torch_sdpa
# (B, Hq, Hkv, Tq, Tk, D)
SHAPES = [
    (1, 1, 1, 1, 1, 8), (2, 4, 4, 17, 17, 16), (1, 2, 2, 5, 9, 8), (1, 2, 1, 9, 5, 8),
    (3, 6, 2, 33, 33, 64), (2, 8, 1, 1, 37, 32), (1, 3, 3, 70, 70, 24), (2, 4, 2, 65, 129, 40),
    (1, 2, 2, 129, 64, 128), (1, 1, 1, 3, 200, 8),
]
# f32: the kernels accumulate in f32 like torch (errors ~1e-6 relative);
# bf16: both round q, k, v, o and gradients to bf16 (8 bits): compared with torch in f32.
TOL = {torch.float32: 2e-5, torch.bfloat16: 3e-2}


def _qkv(B, Hq, Hkv, Tq, Tk, D, dtype):
    mk = lambda *s: torch.randn(*s).to(dtype).requires_grad_()
    return mk(B, Hq, Tq, D), mk(B, Hkv, Tk, D), mk(B, Hkv, Tk, D)


def _both(q, k, v, ref_f32=True, **kw):
    """Our output and gradients, and torch's (in f32 from the same inputs)."""
    o = ot.scaled_dot_product_attention(q, k, v, **kw)
    g = torch.randn(o.shape).to(o.dtype)
    ours = (o,) + torch.autograd.grad(o, (q, k, v), g)
    qr, kr, vr = (t.detach().float().requires_grad_() for t in (q, k, v))
    kwr = dict(kw)
    if isinstance(kwr.get("attn_mask"), torch.Tensor) and kwr["attn_mask"].dtype != torch.bool:
        kwr["attn_mask"] = kwr["attn_mask"].float()
    r = TORCH_SDPA(qr, kr, vr, **kwr)
    ref = (r,) + torch.autograd.grad(r, (qr, kr, vr), g.float())
    return ours, ref


def _check(ours, ref, tol):
    for name, a, b in zip(("o", "dq", "dk", "dv"), ours, ref):
        assert a.shape == b.shape and a.dtype == ours[0].dtype, name
        assert torch.isfinite(a).all(), name
        assert rel_err(a, b) < tol, (name, rel_err(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_matches_torch(shape, causal, dtype):
    q, k, v = _qkv(*shape, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no fallback here
        ours, ref = _both(q, k, v, is_causal=causal, enable_gqa=True)
    _check(ours, ref, TOL[dtype])


@pytest.mark.parametrize("scale", [0.05, 1.0, 3.0])
def test_scale(scale):
    q, k, v = _qkv(2, 2, 2, 11, 13, 16, torch.float32)
    _check(*_both(q, k, v, scale=scale), 2e-5)


def _lengths_mask(lens, Tk, kind, dtype=torch.float32):
    allowed = torch.arange(Tk) < torch.tensor(lens).view(-1, 1, 1, 1)    # [B, 1, 1, Tk]
    if kind == "bool":
        return allowed
    fill = float("-inf") if kind == "-inf" else torch.finfo(dtype).min
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, fill)


@pytest.mark.parametrize("kind", ["bool", "-inf", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_key_padding_masks(kind, dtype):
    B, H, Tq, Tk, D = 3, 4, 19, 23, 16
    q, k, v = _qkv(B, H, H // 2, Tq, Tk, D, dtype)
    mask = _lengths_mask([23, 7, 1], Tk, kind, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(*_both(q, k, v, attn_mask=mask, enable_gqa=True), TOL[dtype])


def test_float32_mask_with_bfloat16_inputs():
    q, k, v = _qkv(2, 2, 2, 9, 11, 16, torch.bfloat16)
    mask = _lengths_mask([11, 4], 11, "-inf", torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(*_both(q, k, v, attn_mask=mask), TOL[torch.bfloat16])


@pytest.mark.parametrize("Tq,Tk", [(13, 13), (7, 20), (20, 7)])
def test_causal_and_padding_masks(Tq, Tk):
    B, H, D = 2, 2, 8
    q, k, v = _qkv(B, H, H, Tq, Tk, D, torch.float32)
    causal = torch.ones(Tq, Tk, dtype=torch.bool).tril()                  # torch's is_causal mask
    lens = torch.tensor([Tk, max(1, Tk // 2)]).view(-1, 1, 1, 1)
    both = causal & (torch.arange(Tk) < lens)                             # [B, 1, Tq, Tk]
    additive = torch.zeros(both.shape).masked_fill(~both, float("-inf"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for m in (causal, both, additive):
            _check(*_both(q, k, v, attn_mask=m), 2e-5)


@pytest.mark.parametrize("Tq,Tk", [(5, 12), (12, 5), (1, 9)])
def test_bottom_right_causal_masks(Tq, Tk):
    # a KV cache's mask (new queries at the end of the keys), as Hugging Face passes it
    q, k, v = _qkv(2, 4, 2, Tq, Tk, 16, torch.float32)
    i, j = torch.arange(Tq).view(-1, 1), torch.arange(Tk)
    br = j <= i + (Tk - Tq)
    lens = torch.tensor([Tk, Tk - 2]).view(-1, 1, 1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for m in (br, br & (j < lens), torch.zeros(Tq, Tk).masked_fill(~br, float("-inf"))):
            _check(*_both(q, k, v, attn_mask=m, enable_gqa=True), 2e-5)


def test_fully_masked_sequence_gives_zero_like_torch():
    q, k, v = _qkv(2, 2, 2, 5, 6, 8, torch.float32)
    mask = _lengths_mask([6, 0], 6, "bool")
    ours, ref = _both(q, k, v, attn_mask=mask)
    _check(ours, ref, 2e-5)
    assert ours[0][1].abs().max() == 0


@pytest.mark.parametrize("dims", [3, 5])
def test_other_ranks(dims):
    shape = (5, 9, 16) if dims == 3 else (2, 3, 4, 9, 16)
    q, k, v = (torch.randn(shape).requires_grad_() for _ in range(3))
    lens = torch.randint(1, 10, shape[:-3] + (1, 1, 1)[: 3 if dims == 5 else 2])
    mask = torch.arange(9) < lens      # a length per sequence (dim -3 is the heads)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(*_both(q, k, v, is_causal=True), 2e-5)
        _check(*_both(q, k, v, attn_mask=mask), 2e-5)


def test_non_contiguous_inputs():
    x = torch.randn(2, 11, 3 * 4 * 16)
    q, k, v = (t.reshape(2, 11, 4, 16).transpose(1, 2) for t in x.split(64, -1))
    assert not q.is_contiguous()
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    _check(*_both(q, k, v, is_causal=True), 2e-5)


def test_finite_differences():
    # the analytic gradient (our flash backward) against central differences of our forward
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 6, 8, dtype=torch.float32) for _ in range(3))
    mask = _lengths_mask([5], 6, "bool")
    f = lambda q, k, v: (ot.scaled_dot_product_attention(q, k, v, attn_mask=mask) ** 2).sum()
    qs = [t.clone().requires_grad_() for t in (q, k, v)]
    grads = torch.autograd.grad(f(*qs), qs)
    eps = 1e-2
    for i in range(3):
        d = torch.randn_like(q)
        args_p = [t + eps * d if j == i else t for j, t in enumerate((q, k, v))]
        args_m = [t - eps * d if j == i else t for j, t in enumerate((q, k, v))]
        fd = (f(*[a.double().float() for a in args_p]) - f(*args_m)).item() / (2 * eps)
        an = (grads[i] * d).sum().item()
        assert abs(fd - an) <= 2e-2 * max(1.0, abs(an)), (i, fd, an)


# ---------------------------------------------------------------- fallbacks ----
def _fallback(reason_re, q, k, v, **kw):
    attention.reset_warnings()
    with pytest.warns(RuntimeWarning, match=reason_re):
        o = ot.scaled_dot_product_attention(q, k, v, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # one warning per reason
        ot.scaled_dot_product_attention(q, k, v, **kw)
    r = TORCH_SDPA(q, k, v, **kw)
    assert torch.equal(o, r) or kw.get("dropout_p", 0) > 0
    return o


def test_fallback_float64():
    q, k, v = (torch.randn(1, 2, 5, 8, dtype=torch.float64) for _ in range(3))
    _fallback("float64", q, k, v, is_causal=True)


# ------------------------------------------------------------------ dropout ----
def _probs(q, k, **kw):
    """The attention probabilities: attention over v = identity (Tk == D)."""
    eye = torch.eye(k.shape[2]).expand(k.shape[0], k.shape[1], -1, -1).contiguous()
    return ot.scaled_dot_product_attention(q, k, eye, **kw)


@pytest.mark.parametrize("masked", [False, True])
def test_dropout_semantics(masked):
    # torch's definition: each probability dropped with p, the others scaled by 1 / (1 - p);
    # masked: an arbitrary mask, computed by the math path (with its own seeded mask)
    B, H, T, p = 2, 4, 64, 0.3
    q, k = torch.randn(B, H, T, T), torch.randn(B, H, T, T)   # D = Tk: v can be the identity
    kw = dict(attn_mask=torch.rand(T, T) > 0.2) if masked else dict(is_causal=True)
    attention.reset_warnings()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if masked else "error")
        P = _probs(q, k, **kw)
        torch.manual_seed(5)
        Pd = _probs(q, k, dropout_p=p, **kw)
        torch.manual_seed(5)
        assert torch.equal(Pd, _probs(q, k, dropout_p=p, **kw))       # torch.manual_seed reproduces
        assert not torch.equal(Pd, _probs(q, k, dropout_p=p, **kw))   # and the next draw differs
    live = P > 0
    kept = Pd[live] != 0
    assert torch.allclose(Pd[live][kept], P[live][kept] / (1 - p), rtol=1e-5, atol=1e-7)
    assert (Pd[~live] == 0).all()
    assert abs((1 - kept.float().mean().item()) - p) < 0.02


@pytest.mark.parametrize("masked", [False, True])
def test_dropout_gradients_by_finite_differences(masked):
    # with the seed fixed the mask is fixed: the backward must regenerate the forward's mask
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 7, 8) for _ in range(3))
    mask = (torch.rand(7, 7) > 0.3) | torch.eye(7, dtype=torch.bool) if masked else None
    w = torch.randn(1, 2, 7, 8)

    def f(q, k, v):
        torch.manual_seed(42)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (ot.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.4,
                                                    is_causal=not masked) * w).sum()
    qs = [t.clone().requires_grad_() for t in (q, k, v)]
    grads = torch.autograd.grad(f(*qs), qs)
    eps = 1e-2
    for i in range(3):
        d = torch.randn_like(q)
        plus = [t + eps * d if j == i else t for j, t in enumerate((q, k, v))]
        minus = [t - eps * d if j == i else t for j, t in enumerate((q, k, v))]
        fd = (f(*plus) - f(*minus)).item() / (2 * eps)
        an = (grads[i] * d).sum().item()
        assert abs(fd - an) <= 2e-2 * max(1.0, abs(an)), (i, fd, an)


def test_fallback_arbitrary_masks():
    q, k, v = _qkv(2, 2, 2, 7, 9, 8, torch.float32)
    rnd = torch.rand(2, 1, 7, 9) > 0.3
    attention.reset_warnings()
    with pytest.warns(RuntimeWarning, match="neither a key-padding"):
        _check(*_both(q, k, v, attn_mask=rnd), 2e-5)
    bias = torch.randn(7, 9)
    with pytest.warns(RuntimeWarning, match="other than 0 and -inf"):
        _check(*_both(q, k, v, attn_mask=bias), 2e-5)
    left = (torch.arange(9) >= 3).view(1, 9)                # left padding: not a length mask
    attention.reset_warnings()
    with pytest.warns(RuntimeWarning, match="neither a key-padding"):
        _check(*_both(q, k, v, attn_mask=left), 2e-5)


def test_fallback_value_head_size_and_mask_grad():
    q, k = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    v = torch.randn(1, 2, 5, 4)
    _fallback("value head size", q, k, v)
    m = torch.zeros(5, 5, requires_grad=True)
    attention.reset_warnings()
    with pytest.warns(RuntimeWarning, match="requires grad"):
        o = ot.scaled_dot_product_attention(q, k, k, attn_mask=m)
    o.sum().backward()
    assert m.grad is not None


def test_fallback_non_cpu_device():
    # the path CUDA tensors take, exercised without a GPU on the meta device
    q = torch.randn(1, 2, 5, 8, device="meta")
    attention.reset_warnings()
    with pytest.warns(RuntimeWarning, match="meta tensors"):
        o = ot.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert o.device.type == "meta" and o.shape == q.shape


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_fallback_cuda():
    q, k, v = (torch.randn(1, 2, 5, 8, device="cuda") for _ in range(3))
    _fallback("cuda tensors", q, k, v)


def test_errors_are_torchs():
    q = torch.randn(1, 3, 5, 8)
    k = torch.randn(1, 2, 5, 8)
    with pytest.raises(RuntimeError):
        ot.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    with pytest.raises(RuntimeError):
        ot.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(5, 5, dtype=torch.bool),
                                        is_causal=True)


# --------------------------------------------------------- patch and compile ----
def test_patch_unpatch_and_decorator():
    orig = F.scaled_dot_product_attention
    assert orig is TORCH_SDPA
    ot.patch()
    try:
        assert F.scaled_dot_product_attention is ot.scaled_dot_product_attention
        assert torch.nn.functional.scaled_dot_product_attention is ot.scaled_dot_product_attention
    finally:
        ot.unpatch()
    assert F.scaled_dot_product_attention is TORCH_SDPA
    calls = []

    @ot.custom_op(replace="torch.nn.functional.scaled_dot_product_attention")
    def mine(*a, **kw):
        calls.append(1)
        return ot.scaled_dot_product_attention(*a, **kw)
    try:
        q = torch.randn(1, 1, 4, 8)
        F.scaled_dot_product_attention(q, q, q)
        assert calls == [1]
    finally:
        ot.unpatch()
    assert F.scaled_dot_product_attention is TORCH_SDPA


class _Block(torch.nn.Module):
    def __init__(self, C=32, H=4, Hkv=2):
        super().__init__()
        self.H, self.Hkv, self.D = H, Hkv, C // H
        self.qkv = torch.nn.Linear(C, (H + 2 * Hkv) * self.D)
        self.proj = torch.nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split([self.H * self.D, self.Hkv * self.D, self.Hkv * self.D], -1)
        q = q.view(B, T, self.H, self.D).transpose(1, 2)
        k = k.view(B, T, self.Hkv, self.D).transpose(1, 2)
        v = v.view(B, T, self.Hkv, self.D).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def test_torch_compile_fullgraph():
    m = _Block()
    x = torch.randn(2, 13, 32)
    ot.patch()
    try:
        eager = m(x)
        ge = torch.autograd.grad(eager.square().sum(), list(m.parameters()))
        torch._dynamo.reset()
        cm = torch.compile(m, fullgraph=True)
        comp = cm(x)
        gc = torch.autograd.grad(comp.square().sum(), list(m.parameters()))
    finally:
        ot.unpatch()
    assert rel_err(comp, eager) < 1e-5
    for a, b in zip(gc, ge):
        assert rel_err(a, b) < 1e-4
    # and the reference: the same module on torch's SDPA
    assert rel_err(eager, m(x)) < 1e-5


def test_opcheck():
    q, k, v = (torch.randn(1, 2, 5, 8, requires_grad=True) for _ in range(3))
    mask = torch.ones(1, 1, 1, 5, dtype=torch.bool)
    torch.library.opcheck(attention.sdpa_fwd, (q, k, v, mask, False, 0.35, 0.0, torch.zeros(1, dtype=torch.long)),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
