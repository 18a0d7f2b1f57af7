"""The binding itself: the library loads, errors carry its message, threads follow torch."""
import os

import pytest
import torch

import ops_transformer
from ops_transformer import _lib, attention


def test_library_found():
    assert os.path.exists(ops_transformer.LIBRARY_PATH)
    assert _lib.lib.ot_threads_get() >= 1


def test_bad_argument_raises_library_message():
    q = torch.randn(1, 3, 4, 8)
    k = torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match="Hq=3 is not a multiple of Hkv=2"):
        attention.flash_fwd(q, k, k.clone(), False, None, 0.5)
    with pytest.raises(ValueError, match="scale"):
        attention.flash_fwd(q, q.clone(), q.clone(), False, None, -1.0)


def test_unsupported_dtype_raises():
    with pytest.raises(TypeError, match="float32 or bfloat16"):
        _lib.ot_dtype(torch.zeros(1, dtype=torch.float64))


def test_threads_follow_torch():
    n0 = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        q = torch.randn(1, 1, 4, 8)
        attention.flash_fwd(q, q, q, True, None, 0.5)
        assert _lib.lib.ot_threads_get() == 1
        torch.set_num_threads(n0)
        attention.flash_fwd(q, q, q, True, None, 0.5)
        assert _lib.lib.ot_threads_get() == n0
    finally:
        torch.set_num_threads(n0)


def test_one_openmp_runtime():
    # torch is imported first, so libot binds to the libgomp torch loaded: one thread pool.
    with open("/proc/self/maps") as f:
        gomp = {line.split()[-1] for line in f if "libgomp" in line and line.split()[-1].startswith("/")}
    assert len({os.path.realpath(p) for p in gomp}) <= 1, gomp
