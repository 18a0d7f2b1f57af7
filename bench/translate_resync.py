"""Step-by-step comparison of an `ot train --task translate` run with torch (bench/README.md,
"What is known"): for each step k of [K0, K1), torch takes ot's checkpoint RUN/step_k (weights and
Adam moments, translate_hf.load_ot_state), makes one update on ot's own batch k (--ot-order's
plan, epoch 0) at ot's learning rate, and compares it with ot's RUN/step_{k+1}, tensor by tensor:

  update error = |(w_ot' - w) - (w_torch' - w)| / |w_torch' - w|, and the same for exp_avg;

then, per tensor, the error vectors summed over the steps against their root sum of squares
(about 1 for errors that come and go like rounding, up to sqrt(steps) for a fixed bias).

The run must be the dropout-0 recipe with a checkpoint at every step (`--save-every 1 --keep 0`,
transformer-small preset; flags below are that recipe). --dtype f64 compares with exact
arithmetic, f32 with torch's own rounding.

  python bench/translate_resync.py --run out/s1 --from 1 --to 100 [--dtype f64] \\
      [--tokenizer out/translate --train out/translate/ids.train.tsv]
"""
import argparse
import contextlib
import io
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", required=True, help="ot run directory with step_000001 ... checkpoints")
    p.add_argument("--from", dest="k0", type=int, default=1)
    p.add_argument("--to", dest="k1", type=int, required=True, help="last step compared (ot's step_K1 must exist)")
    p.add_argument("--dtype", choices=("f32", "f64"), default="f64")
    p.add_argument("--tokenizer", default="out/translate")
    p.add_argument("--train", default="out/translate/ids.train.tsv")
    p.add_argument("--verbose", action="store_true", help="a line per step")
    o = p.parse_args()
    if o.k0 < 1 or o.k1 <= o.k0:
        p.error("need 1 <= --from < --to (step 0 has no Adam state to take)")
    sys.argv = ["translate_torch", "--tokenizer", o.tokenizer, "--preset", "transformer-small", "--logits-bias",
                "--tokens", "2048", "--bucket", "8", "--lr", "1e-3", "--warmup", "100", "--seed", "1",
                "--dropout", "0", "--attn-dropout", "0", "--act-dropout", "0", "--label-smoothing", "0.1",
                "--clip", "0", "--adam-betas", "0.9", "0.98", "--adam-eps", "1e-9", "--ot-order",
                "--threads", "1", "--dtype", o.dtype]
    import translate_torch as tt
    import translate_hf as th
    from safetensors import safe_open
    torch.set_num_threads(1)
    a = tt.args()
    voc = tt.Vocab(a.tokenizer)
    V, pad = voc.size, voc.special
    Vp = (V + a.vocab_pad - 1) // a.vocab_pad * a.vocab_pad
    pairs = tt.make_pairs(tt.read_dump(o.train, V), pad, a.src_eos, a.max_len, "train")
    plan = tt.batches(pairs, a.tokens, a.bucket, a.seed, 0, True, True)
    if o.k1 > len(plan):
        p.error(f"--to {o.k1}: past the first epoch ({len(plan)} batches)")
    model = tt.Seq2Seq(a, V, Vp)
    names = th._param_names(model)
    ck = lambda k: os.path.join(o.run, "step_%06d" % k)

    m = tt.Seq2Seq(a, V, Vp)   # holds ot's checkpoints as they are read

    def ot_state(k):   # ot's weights (fused names) and first moments at step k, flat f64
        with contextlib.redirect_stdout(io.StringIO()):
            th.load_hf(m, ck(k))
        out = {}
        for (n, q, rows) in th._param_names(m):
            out["w." + n] = (q if rows is None else q[:rows]).detach().double().reshape(-1).numpy()
        with safe_open(os.path.join(ck(k), "optimizer.safetensors"), "np") as f:
            for n, _, _ in names:
                out["m." + n] = f.get_tensor("exp_avg." + n).astype(np.float64).reshape(-1)
        return out

    acc, ss, upd_med, mom_med, worst = {}, {}, [], [], {}
    cur = ot_state(o.k0)
    for k in range(o.k0, o.k1):
        opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=tuple(a.adam_betas), eps=a.adam_eps)
        model.float()
        with contextlib.redirect_stdout(io.StringIO()):
            th.load_ot_state(model, opt, ck(k))
        if o.dtype == "f64":
            tt.to_f64(model, opt)
        for g in opt.param_groups:
            g["lr"] = tt.lr_at(a, k)
        loss = tt.make_step(model, opt, a)(tt.to_tensors(pairs, plan[k], pad))
        nxt = ot_state(k + 1)
        ue, me = [], []
        for n, q, rows in names:
            w = (q if rows is None else q[:rows]).detach().double().reshape(-1).numpy()
            dt = w - cur["w." + n]
            e = (nxt["w." + n] - cur["w." + n]) - dt
            if not np.linalg.norm(dt):
                continue
            r = np.linalg.norm(e) / np.linalg.norm(dt)
            ue.append(r)
            worst[n] = max(worst.get(n, 0.0), r)
            tm = opt.state[q]["exp_avg"].double().reshape(-1).numpy()[: w.size]
            me.append(np.linalg.norm(nxt["m." + n] - tm) / max(np.linalg.norm(tm), 1e-300))
            acc[n] = acc.get(n, 0) + e
            ss[n] = ss.get(n, 0.0) + float(e @ e)
        upd_med.append(np.median(ue))
        mom_med.append(np.median(me))
        if o.verbose:
            print(f"step {k + 1:4d}  loss {loss:.6f}  update error median {upd_med[-1]:.1e} max {max(ue):.1e}"
                  f"  exp_avg error median {mom_med[-1]:.1e} max {max(me):.1e}", flush=True)
        cur = nxt
    n = o.k1 - o.k0
    print(f"steps {o.k0 + 1}..{o.k1} against torch {o.dtype}: update error (median over tensors) median "
          f"{np.median(upd_med):.1e}, worst step {max(upd_med):.1e}; exp_avg error median "
          f"{np.median(mom_med):.1e}, worst step {max(mom_med):.1e}")
    for x in sorted(worst, key=worst.get)[-3:]:
        print(f"  largest single-tensor update error {worst[x]:.1e}  {x}")
    ratio = {x: np.linalg.norm(acc[x]) / max(np.sqrt(ss[x]), 1e-300) for x in acc}
    print(f"summed errors |sum e| / sqrt(sum |e|^2) over {n} steps: median {np.median(list(ratio.values())):.2f}"
          f" (a fixed bias: {np.sqrt(n):.1f})")
    for x in sorted(ratio, key=ratio.get)[-3:]:
        print(f"  {ratio[x]:.2f}  {x}")


if __name__ == "__main__":
    main()
