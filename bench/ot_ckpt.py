"""Writes bench/translate_torch.py's training state (weights and Adam moments) as an `ot train`
checkpoint directory, so that `ot train --resume DIR` continues a torch run: the side-by-side
experiments of bench/README.md hand a state from one implementation to the other in both
directions (translate_hf.load_ot_state reads ot's).

ot's checkpoints carry checksums (src/train/ckpt_files.c, src/io/files.c): one per tensor, one
over the metadata, and in optimizer.safetensors `params_checksum` over ot's flat parameter
buffer (src/model/layout.c: every parameter in layout order, each padded to 16 floats). The
hashes are ported here; the layout order is rebuilt for the Marian encoder-decoder, and checked
on every call against the template checkpoint's own weights, so a change of ot's layout stops
the writer instead of producing a file ot refuses.

The template is an ot checkpoint of the same model and recipe at the same step: its metadata
(settings, step, data position, learning-rate state) is kept; only the tensors change.
"""
import os
import shutil

import numpy as np

M64 = (1 << 64) - 1
_LANES = (0xcbf29ce484222325, 0x84222325cbf29ce4, 0x9e3779b97f4a7c15, 0x1234567887654321)
_PRIME = 0x100000001b3


def _fold(h, n):
    r = n
    for k in range(4):
        r ^= (h[k] + 0x9e3779b97f4a7c15 + ((r << 6) & M64) + (r >> 2)) & M64
        r ^= r >> 31
        r = (r * 0xbf58476d1ce4e5b9) & M64
    return r ^ (r >> 29)


def _lanes(words):
    """The four FNV-like lanes over whole groups of four 32-bit words."""
    h = np.array(_LANES, dtype=np.uint64)
    p = np.uint64(_PRIME)
    with np.errstate(over="ignore"):
        for row in words.reshape(-1, 4).astype(np.uint64):
            h = (h ^ row) * p
    return [int(x) for x in h]


def hash_bytes(b):
    """ot__hash_bytes: lanes over 16-byte groups, the tail bytes one by one into lane 0."""
    b = bytes(b)
    n = len(b)
    body = n - n % 16
    h = _lanes(np.frombuffer(b[:body], dtype="<u4"))
    for c in b[body:]:
        h[0] = ((h[0] ^ c) * _PRIME) & M64
    return _fold(h, n)


def hash_floats(x):
    """ot__hash_floats over n f32 values: lanes over groups of 4, tail values into lane 0."""
    w = np.ascontiguousarray(x, dtype=np.float32).view("<u4").reshape(-1)
    n = w.size
    h = _lanes(w[: n - n % 4])
    for v in w[n - n % 4:]:
        h[0] = ((h[0] ^ int(v)) * _PRIME) & M64
    return _fold(h, n)


def finalize64(x, s1, s2, s3):
    """The xor-shift-multiply finalizer ot's hashes share; shifts (30, 27, 31) are splitmix64's
    (the batcher, translate_torch.mix64), (31, 29, 32) the checkpoint checksums'."""
    x ^= x >> s1
    x = (x * 0xbf58476d1ce4e5b9) & M64
    x ^= x >> s2
    x = (x * 0x94d049bb133111eb) & M64
    return x ^ (x >> s3)


def _mix64(x):
    return finalize64(x, 31, 29, 32)


def meta_checksum(meta):
    """ot__meta_checksum: an order-free sum over every (key, value) but meta_checksum."""
    s = used = 0
    for k, v in meta.items():
        if k == "meta_checksum":
            continue
        hv = hash_bytes(v.encode())
        s = (s + _mix64(hash_bytes(k.encode()) ^ _mix64((hv + 0x9e3779b97f4a7c15) & M64))) & M64
        used += 1
    return _mix64(s ^ used)


def _layout(enc, dec):
    """ot's parameter order for a post-norm Marian model with biases (layout.c build_marian)."""
    def block(pre, cross):
        parts = ["self_attn_layer_norm", "self_attn.qkv_proj", "self_attn.out_proj"]
        if cross:
            parts += ["encoder_attn_layer_norm", "encoder_attn.qkv_proj", "encoder_attn.out_proj"]
        parts += ["final_layer_norm", "fc1", "fc2"]
        return [f"{pre}.{p}.{s}" for p in parts for s in ("weight", "bias")]
    out = ["model.shared.weight"]
    for i in range(enc):
        out += block(f"model.encoder.layers.{i}", False)
    for i in range(dec):
        out += block(f"model.decoder.layers.{i}", True)
    return out + ["final_logits_bias"]


def params_checksum(flat, enc, dec):
    """params_checksum of ot's flat buffer, from {ot name: f32 values}."""
    order = _layout(enc, dec)
    if sorted(order) != sorted(flat):
        raise SystemExit(f"ot checkpoint: parameter names differ from ot's layout: "
                         f"{sorted(set(order) ^ set(flat))[:4]}")
    parts = []
    for n in order:
        x = np.asarray(flat[n], dtype=np.float32).reshape(-1)
        parts += [x, np.zeros((-x.size) % 16, np.float32)]
    return hash_floats(np.concatenate(parts))


def _rewrite(src, dst, tensors, extra=None):
    """Copies safetensors file src to dst with the given tensors replaced (same shapes), the
    per-tensor checksums, extra metadata and the metadata checksum recomputed."""
    from safetensors import safe_open
    from safetensors.numpy import save_file
    with safe_open(src, "np") as f:
        meta = dict(f.metadata() or {})
        t = {k: f.get_tensor(k) for k in f.keys()}
    for k, v in tensors.items():
        if k not in t:
            raise SystemExit(f"ot checkpoint: {src} has no tensor {k}")
        v = np.asarray(v, dtype=np.float32).reshape(-1)
        if v.size != t[k].size:
            raise SystemExit(f"ot checkpoint: {k} has {v.size} values, {src} {t[k].size}")
        t[k] = np.ascontiguousarray(v.reshape(t[k].shape))
    for k in t:
        meta["checksum." + k] = "%016x" % hash_bytes(t[k].tobytes())
    meta.update(extra or {})
    meta["meta_checksum"] = "%016x" % meta_checksum(meta)
    save_file(t, dst, metadata=meta)


def save_ot_state(model, opt, step, template, out_dir):
    """Writes model's weights and opt's Adam moments (torch.optim.Adam after `step` updates) as
    ot checkpoint out_dir, with template's metadata (an ot checkpoint of the same recipe at the
    same step; refused otherwise)."""
    from safetensors import safe_open
    from translate_hf import _param_names, load_hf, state_dict_hf
    with safe_open(os.path.join(template, "optimizer.safetensors"), "np") as f:
        meta = f.metadata() or {}
    if meta.get("step") != str(step):
        raise SystemExit(f"--ot-template {template}: its step is {meta.get('step')}, this state's {step}")
    enc, dec = len(model.enc.layers), len(model.dec.layers)
    # the layout check: the template's own weights must give its own params_checksum
    import copy
    probe = copy.deepcopy(model).float()
    load_hf(probe, template)
    got = params_checksum({n: (p if r is None else p[:r]).detach().numpy() for n, p, r in _param_names(probe)},
                          enc, dec)
    if "%016x" % got != meta.get("params_checksum"):
        raise SystemExit(f"--ot-template {template}: ot's parameter layout is not the one this writer "
                         f"knows (params_checksum {meta.get('params_checksum')}, computed {got:016x})")
    flat, mom = {}, {}
    for n, p, rows in _param_names(model):
        take = (lambda x: x.detach().float().reshape(-1)[: rows * p.shape[1]]) if rows is not None else \
               (lambda x: x.detach().float().reshape(-1))
        flat[n] = take(p).numpy()
        st = opt.state.get(p, {})
        for k in ("exp_avg", "exp_avg_sq"):
            mom[f"{k}.{n}"] = take(st[k]).numpy() if k in st else np.zeros_like(flat[n])
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(template):
        if not f.endswith(".safetensors"):
            shutil.copy(os.path.join(template, f), out_dir)
    hf = {k: v.numpy() for k, v in state_dict_hf(model).items()}
    _rewrite(os.path.join(template, "model.safetensors"), os.path.join(out_dir, "model.safetensors"), hf)
    _rewrite(os.path.join(template, "optimizer.safetensors"), os.path.join(out_dir, "optimizer.safetensors"),
             mom, {"params_checksum": "%016x" % params_checksum(flat, enc, dec)})
    print(f"wrote {out_dir}: an ot checkpoint at step {step} (ot train --resume {out_dir})")
