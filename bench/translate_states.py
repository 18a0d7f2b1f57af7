"""Training states of the translate side-by-side (bench/README.md, "What is known"), compared and
perturbed. A state is an ot checkpoint directory, a Hugging Face Marian directory or a
translate_torch.py --save-every file (.pt); all are read by their HF tensor names.

  python bench/translate_states.py diff INIT A B [A B ...]
      per pair: median and largest over tensors of |A - B| / |A - INIT| (how far apart two runs
      are, relative to how far each tensor has moved; the attention key biases, whose true
      gradient is zero, left out)
  python bench/translate_states.py qk STATE ...
      per decoder layer, the Frobenius norm of W_q^T W_k of its cross-attention, and the largest
  python bench/translate_states.py perturb SRC OUT SEED SCALE
      an ot checkpoint OUT holding SRC's model (an ot checkpoint) with every matrix w plus
      SCALE * std(w) * N(0, 1) (numpy seed SEED), for `ot train --init-from OUT` and
      `translate_torch.py --load-hf OUT`
  python bench/translate_states.py swap A B REGEX OUT
      an ot checkpoint OUT: training state A (an ot checkpoint: weights and Adam moments) with
      the tensors whose ot name (fused qkv_proj) matches REGEX taken from B (another ot
      checkpoint at the same step), for `ot train --resume OUT`
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def load(path):
    """{HF name: f64 array} of a state (see the module's docstring)."""
    if path.endswith(".pt"):
        import torch
        import translate_hf as th
        m, _ = torch_model()
        ck = torch.load(path)
        sd = ck["model"] if "model" in ck else ck
        if any(v.dtype == torch.float64 for v in sd.values()):
            m.double()
        m.load_state_dict(sd)
        return {k: v.double().numpy() for k, v in th.state_dict_hf(m).items()}
    from safetensors.numpy import load_file
    return {k: v.astype(np.float64) for k, v in load_file(os.path.join(path, "model.safetensors")).items()}


def diff(init, pairs):
    base, cache = load(init), {}
    get = lambda p: cache.setdefault(p, load(p)) if p not in cache else cache[p]
    for a, b in pairs:
        A, B = get(a), get(b)
        r = {k: np.linalg.norm(A[k] - B[k]) / max(np.linalg.norm(A[k] - base[k]), 1e-30)
             for k in A if ".k_proj.bias" not in k}
        top = max(r, key=r.get)
        print(f"{a} vs {b}: median {np.median(list(r.values())):.2e}, largest {r[top]:.2e} ({top})")


def qk(paths):
    for p in paths:
        t, v, layer = load(p), [], 0
        while f"model.decoder.layers.{layer}.encoder_attn.q_proj.weight" in t:
            pre = f"model.decoder.layers.{layer}.encoder_attn"
            v.append(np.linalg.norm(t[pre + ".q_proj.weight"].T @ t[pre + ".k_proj.weight"]))
            layer += 1
        print(f"{p}: " + " / ".join(f"{x:.2f}" for x in v) + f" (largest: layer {int(np.argmax(v))})")


def perturb(src, out, seed, scale):
    from safetensors import safe_open
    from ot_ckpt import _rewrite
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(src):
        if not f.endswith(".safetensors"):
            shutil.copy(os.path.join(src, f), out)
    with safe_open(os.path.join(src, "model.safetensors"), "np") as f:
        t = {k: f.get_tensor(k) for k in f.keys()}
    r = np.random.default_rng(seed)
    new = {k: t[k] + scale * t[k].std() * r.standard_normal(t[k].shape) for k in sorted(t) if t[k].ndim == 2}
    _rewrite(os.path.join(src, "model.safetensors"), os.path.join(out, "model.safetensors"), new)
    print(f"wrote {out}: {len(new)} matrices of {src} perturbed by {scale} of their std (seed {seed})")


def torch_model():
    """translate_torch.py's Seq2Seq at transformer-small with its Adam (the recipe's settings)."""
    import torch
    import translate_torch as tt
    argv, sys.argv = sys.argv, ["translate_torch", "--tokenizer", os.environ.get("TOKENIZER", "out/translate"),
                                "--preset", "transformer-small", "--logits-bias"]
    a = tt.args()
    sys.argv = argv
    V = tt.Vocab(a.tokenizer).size
    m = tt.Seq2Seq(a, V, (V + a.vocab_pad - 1) // a.vocab_pad * a.vocab_pad)
    return m, torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)


def swap(a, b, regex, out):
    import re
    import torch
    from ot_ckpt import save_ot_state
    from translate_hf import _param_names, load_ot_state
    (ma, oa), (mb, ob) = torch_model(), torch_model()
    sa, sb = load_ot_state(ma, oa, a), load_ot_state(mb, ob, b)
    if sa != sb:
        raise SystemExit(f"swap: {a} is at step {sa}, {b} at {sb}")
    taken = []
    with torch.no_grad():
        for (n, pa, _), (_, pb, _) in zip(_param_names(ma), _param_names(mb)):
            if re.search(regex, n):
                pa.copy_(pb)
                for k in ("exp_avg", "exp_avg_sq"):
                    oa.state[pa][k].copy_(ob.state[pb][k])
                taken.append(n)
    if not taken:
        raise SystemExit(f"swap: no tensor name matches {regex!r}")
    save_ot_state(ma, oa, sa, a, out)
    print(f"{out}: {len(taken)} tensors from {b}: {', '.join(taken[:6])}{' ...' if len(taken) > 6 else ''}")


def main():
    cmd, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if cmd == "diff" and len(args) >= 3 and len(args) % 2 == 1:
        diff(args[0], list(zip(args[1::2], args[2::2])))
    elif cmd == "qk" and args:
        qk(args)
    elif cmd == "perturb" and len(args) == 4:
        perturb(args[0], args[1], int(args[2]), float(args[3]))
    elif cmd == "swap" and len(args) == 4:
        swap(*args)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
