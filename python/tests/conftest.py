import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


def rel_err(a, b, floor=0.1):
    """max |a - b| / max(max |b|, floor), in float64 (the floor: a gradient that is
    mathematically 0, e.g. dq of a query seeing one key, is rounding noise in both)."""
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(floor)).item()
