"""MemoryTracker: libot's numbers are the library's own report; torch's are the profiler's."""
import ctypes
import re

import pytest
import torch

import ops_transformer as ot
from ops_transformer import memory


def _library_report(tmp_path):
    """ot_mem_report's own table, printed by the library into a file."""
    libc = ctypes.CDLL(None)
    libc.fopen.restype, libc.fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    ot._lib.lib.ot_mem_report.argtypes = [ctypes.c_void_p]
    path = tmp_path / "report.txt"
    f = libc.fopen(str(path).encode(), b"w")
    ot._lib.lib.ot_mem_report(f)
    libc.fclose(f)
    rows = {}
    for line in path.read_text().splitlines()[1:]:
        m = re.match(r"(\w+)\s+([\d.]+)\s+([\d.]+)", line)
        rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return rows


def test_tracker_equals_library_report(tmp_path):
    tr = ot.MemoryTracker()
    q, k, v = (torch.randn(2, 4, 300, 64, requires_grad=True) for _ in range(3))
    with tr.trace():
        o = ot.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.sum().backward()
        big = torch.empty(3 * 1048576, dtype=torch.uint8)   # 3 MiB through torch's allocator
        del big
    s = tr.stats()
    rep = _library_report(tmp_path)
    for name, v in s["libot"].items():
        assert abs(rep[name][0] - v["end"] / 1048576) < 0.006, name
        assert abs(rep[name][1] - v["peak"] / 1048576) < 0.006, name
    # the flash kernels' working memory is libot's workspace category
    assert s["libot"]["workspace"]["peak"] > 0
    t = s["torch_cpu"]
    assert t["peak"] >= 3 * 1048576 and t["allocated"] >= 3 * 1048576 + 4 * q.numel() * 4
    assert t["allocations"] > 0 and t["net"] == t["allocated"] - t["freed"]
    text = tr.report()
    assert "workspace" in text and "torch CPU allocator" in text


def test_peaks_are_the_blocks():
    tr = ot.MemoryTracker(torch_cpu=False)
    with tr.trace():
        pass
    s = tr.stats()
    assert s["torch_cpu"] is None
    for v in s["libot"].values():
        assert v["peak"] == v["end"] == v["start"]


def test_stats_before_trace():
    with pytest.raises(RuntimeError, match="nothing traced"):
        ot.MemoryTracker().stats()
