"""ctypes binding over libot.so: loading, signatures, errors, threads, tensor pointers.

Tensors are passed by data pointer (zero-copy). Every entry point here takes
contiguous CPU tensors; callers make non-contiguous inputs contiguous first.
"""
import ctypes
import ctypes.util
import os
import subprocess
from ctypes import POINTER, c_bool, c_char_p, c_double, c_float, c_int, c_int64, c_size_t, c_uint64, c_void_p
from pathlib import Path

import torch

OT_F32, OT_BF16 = 0, 1
_STATUS_EXC = {1: ValueError, 2: MemoryError, 5: NotImplementedError}


class OtError(RuntimeError):
    """A libot call failed; the message is the library's (ot_last_error)."""


def _candidates():
    env = os.environ.get("OT_LIBRARY")
    if env:
        return [Path(env)], "OT_LIBRARY"
    out = [Path(__file__).resolve().parent / "libot.so"]
    try:
        from . import _build_config
        if _build_config.LIBRARY:
            out.append(Path(_build_config.LIBRARY))
    except ImportError:
        pass
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "ot"], capture_output=True,
                                text=True, check=True).stdout.strip()
        out.append(Path(libdir) / "libot.so")
    except (OSError, subprocess.CalledProcessError):
        pass
    found = ctypes.util.find_library("ot")
    if found:
        out.append(Path(found))
    return out, "the package, its build record, pkg-config and the linker path"


def _load():
    paths, where = _candidates()
    for p in paths:
        if str(p) and (p.exists() or not p.is_absolute()):
            # torch is imported first, so its OpenMP runtime (libgomp.so.1) is the one
            # libot binds to: one thread pool in the process, not two.
            return ctypes.CDLL(str(p)), str(p)
    raise ImportError(f"ops_transformer: libot.so not found (looked in {where}: "
                      f"{', '.join(map(str, paths)) or 'nothing'}); reinstall with `pip install ./python` "
                      f"from the repository, or set OT_LIBRARY=/path/to/libot.so")


lib, LIBRARY_PATH = _load()


class AttnShape(ctypes.Structure):
    _fields_ = [("B", c_int), ("Hq", c_int), ("Hkv", c_int), ("Tq", c_int), ("Tk", c_int),
                ("D", c_int), ("causal", c_bool), ("kv_len", POINTER(ctypes.c_int32)),
                ("scale", c_float), ("dropout_p", c_float), ("dropout_seed", c_uint64),
                ("dropout_offset", c_uint64), ("dropout_rows", c_void_p),
                ("dropout_sb", c_uint64), ("dropout_sh", c_uint64), ("dropout_si", c_uint64)]


class SparseLayout(ctypes.Structure):
    _fields_ = [("block_size", c_int), ("local_window", c_int), ("global_tokens", c_int)]


class AdamWCfg(ctypes.Structure):
    _fields_ = [("lr", c_float), ("beta1", c_float), ("beta2", c_float), ("eps", c_float),
                ("weight_decay", c_float), ("step", c_int64)]


class QWeight(ctypes.Structure):
    _fields_ = [("kind", c_int), ("rows", c_int), ("cols", c_int), ("group", c_int),
                ("data", c_void_p), ("scales", POINTER(c_float)), ("owned", c_bool), ("pack", c_int)]


class QSearchOpts(ctypes.Structure):
    _fields_ = [("alpha_steps", c_int), ("clip_steps", c_int), ("clip_step", c_float), ("act_int8", c_bool)]


class QSearchResult(ctypes.Structure):
    _fields_ = [("alpha", c_float), ("err_plain", c_double), ("err_scaled", c_double), ("err", c_double)]


P, F = c_void_p, POINTER(c_float)
_SIGS = {
    "ot_last_error": ([], c_char_p),
    "ot_threads_set": ([c_int], None),
    "ot_threads_get": ([], c_int),
    "ot_mem_current": ([c_int], c_size_t),
    "ot_mem_peak": ([c_int], c_size_t),
    "ot_mem_reset_peak": ([], None),
    "ot_mem_category_name": ([c_int], c_char_p),
    "ot_attn_flash_fwd": ([c_int, P, P, P, P, P, POINTER(AttnShape)], c_int),
    "ot_attn_flash_bwd": ([c_int, P, P, P, P, P, P, P, P, P, POINTER(AttnShape)], c_int),
    "ot_attn_sparse_fwd": ([c_int, P, P, P, P, P, POINTER(AttnShape), POINTER(SparseLayout)], c_int),
    "ot_attn_sparse_bwd": ([c_int, P, P, P, P, P, P, P, P, P, POINTER(AttnShape),
                            POINTER(SparseLayout)], c_int),
    "ot_attn_sparse_mask": ([P, POINTER(AttnShape), POINTER(SparseLayout)], c_int),
    "ot_layernorm_fwd": ([c_int, P, P, P, P, P, P, P, P, c_int, c_int, c_float], c_int),
    "ot_layernorm_bwd": ([c_int, P, P, P, P, P, P, P, P, P, c_int, c_int], c_int),
    "ot_rmsnorm_fwd": ([c_int, P, P, P, P, P, P, c_int, c_int, c_float], c_int),
    "ot_rmsnorm_bwd": ([c_int, P, P, P, P, P, P, P, c_int, c_int], c_int),
    "ot_rope_table": ([P, c_int, c_int, c_float], c_int),
    "ot_rope_fwd": ([c_int, P, P, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_int], c_int),
    "ot_rope_bwd": ([c_int, P, P, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_int], c_int),
    "ot_xent_fused": ([c_int, P, c_int, P, c_int, c_int, c_int, c_float, P, P, c_bool], c_int),
    "ot_adamw": ([P, P, P, P, P, c_size_t, POINTER(AdamWCfg), c_float], c_int),
    "ot_qweight_quantize": ([POINTER(QWeight), c_int, c_int, P, c_int, c_int], c_int),
    "ot_qweight_free": ([POINTER(QWeight)], None),
    "ot_qweight_quantize_clip": ([POINTER(QWeight), c_int, c_int, P, c_int, c_int, P], c_int),
    "ot_qweight_fake_quant": ([P, P, c_int, c_int, c_int, P], c_int),
    "ot_qsearch": ([POINTER(QSearchResult), P, P, P, c_int, c_int, c_int, P, c_int, P,
                    POINTER(QSearchOpts)], c_int),
    "ot_qweight_dequantize": ([POINTER(QWeight), P], c_int),
    "ot_qlinear_fwd": ([P, P, POINTER(QWeight), P, c_int], c_int),
    "ot_gemm": ([c_int, c_int, c_bool, c_bool, c_int, c_int, c_int, c_float, P, c_int, P, c_int, c_float,
                 P, c_int], c_int),
    "ot_gemm_bf16_native": ([], c_bool),
    "ot_linear_fwd": ([c_int, P, P, P, P, P, c_int, c_int, c_int, c_int], c_int),
    "ot_linear_bwd": ([c_int, P, P, P, P, P, P, P, c_int, c_int, c_int, c_int], c_int),
    "ot_sumsq": ([P, c_size_t], c_double),
}
for _name, (_args, _res) in _SIGS.items():
    _fn = getattr(lib, _name)
    _fn.argtypes, _fn.restype = _args, _res


def last_error():
    return lib.ot_last_error().decode("utf-8", "replace")


def check(status, what=""):
    """Raise the library's message as a Python exception when status != OT_OK."""
    if status != 0:
        exc = _STATUS_EXC.get(status, OtError)
        raise exc(last_error() or f"{what}: libot status {status}")


_threads = [None]


def sync_threads():
    """The library follows torch.get_num_threads() (one OpenMP pool, never more threads)."""
    n = torch.get_num_threads()
    if _threads[0] != n:
        lib.ot_threads_set(n)
        _threads[0] = n


def ot_dtype(t):
    if t.dtype == torch.float32:
        return OT_F32
    if t.dtype == torch.bfloat16:
        return OT_BF16
    raise TypeError(f"ops_transformer: dtype {t.dtype} is not supported (float32 or bfloat16)")


def need(cond, fn, msg):
    """Raise ValueError('fn: msg') unless cond (arguments a kernel would misread)."""
    if not cond:
        raise ValueError(f"{fn}: {msg}")


def need_float_cpu(fn, **tensors):
    """Every given tensor (None skipped) on the CPU, float32 or bfloat16, all one dtype."""
    dt = None
    for name, t in tensors.items():
        if t is None:
            continue
        need(isinstance(t, torch.Tensor), fn, f"{name} must be a tensor (got {type(t).__name__})")
        need(t.device.type == "cpu", fn, f"{name} is on {t.device}: the kernels take CPU tensors")
        need(t.dtype in (torch.float32, torch.bfloat16), fn,
             f"{name} has dtype {t.dtype}: the kernels take float32 or bfloat16")
        need(dt is None or t.dtype == dt, fn, f"{name} has dtype {t.dtype}, unlike {dt} before it")
        dt = t.dtype


def ptr(t):
    """Data pointer of a contiguous CPU tensor, or None for None."""
    if t is None:
        return None
    assert t.device.type == "cpu" and t.is_contiguous(), "internal: pass contiguous CPU tensors"
    return t.data_ptr()


def fptr(t):
    return ctypes.cast(ctypes.c_void_p(ptr(t)), F) if t is not None else None


def gemm(ta, tb, M, N, K, a, b, c, beta=0.0, lda=None, ldb=None, ldc=None):
    """C[M, N] = op(A) op(B) + beta C through ot_gemm (libot's own GEMM or oneDNN, chosen per
    shape): a, b contiguous, one dtype (f32 / bf16); c contiguous, f32 or a's dtype; op(X) = X^T
    when its flag is set; leading dimensions default to the rows' lengths."""
    lda = lda if lda is not None else (M if ta else K)
    ldb = ldb if ldb is not None else (K if tb else N)
    ldc = ldc if ldc is not None else N
    check(lib.ot_gemm(ot_dtype(a), ot_dtype(c), ta, tb, M, N, K, 1.0, ptr(a), lda, ptr(b), ldb, beta,
                      ptr(c), ldc), "ot_gemm")
