#!/usr/bin/env python3
"""ViT-B/16 speed, ot against PyTorch eager, in one run: training images/s (batch 8, 224 px) and
inference images/s (batch 1 and 32), f32 and bf16. Not run by CI (benchmarks assert nothing).

For each of --rounds rounds, every configuration runs on both sides one after the other, ot
then torch, each in a fresh process:
  ot:    BENCH_VIT --mode M --dtype D --batch B --steps N --warmup W --threads T --model P --json
         (build/bench_vit: ot_trainer_step of task classify / ot_classify_images)
  torch: PYTHON bench/torch_vit_speed.py (same flags): transformers' ViTForImageClassification,
         sdpa attention; bf16 training = autocast with f32 masters; bf16 inference = the model
         converted with .to(torch.bfloat16) (compared), and autocast (printed beside it)
Each process prints its median step time over N timed steps after W warm-up steps; the table
gives, per configuration, the median over the rounds of those images/s and the ratio ot / torch.
The two scripts' docstrings say what each timed step contains (ot's training step also runs its
loader's random crop and normalization; torch's gets ready tensors).

Usage (from the repository root, with a Python that has torch and transformers):
  PYTHON bench/vit_speed.py [--bench-vit build/bench_vit] [--rounds 3] [--steps 3] [--warmup 1]
      [--threads 2] [--model vit-base/16] [--mode train|infer|all] [--dtype f32|bf16|both]
      [--train-batch 8] [--infer-batches 1,32] [--bf16-gemm auto|native|convert] [--quick]
--quick: a smoke test (vit-digits unless --model, train batch 2, infer batches 1 and 2, 1 round,
1 step; most of its time is the torch processes' start).
Take timings on an idle machine: the load average before and after is printed.
"""
import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write("vit_speed: %s failed (exit %d):\n%s%s\n" % (
            " ".join(shlex.quote(c) for c in cmd), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
        sys.exit(1)
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith('{"impl"')]


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench-vit", default="build/bench_vit")
    ap.add_argument("--python", default=sys.executable, help="the interpreter for torch_vit_speed.py")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=None, help="ot ViT preset (default vit-base/16; --quick: vit-digits)")
    ap.add_argument("--mode", choices=["train", "infer", "all"], default="all")
    ap.add_argument("--dtype", choices=["f32", "bf16", "both"], default="both")
    ap.add_argument("--train-batch", type=int, default=8)
    ap.add_argument("--infer-batches", default="1,32")
    ap.add_argument("--bf16-gemm", choices=["auto", "native", "convert"], default="auto")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.model, a.train_batch, a.infer_batches, a.rounds, a.steps = a.model or "vit-digits", 2, "1,2", 1, 1
    a.model = a.model or "vit-base/16"
    if not os.access(a.bench_vit, os.X_OK):
        ap.error("--bench-vit %s is not an executable (build it: scripts/build.sh build)" % a.bench_vit)
    infer_batches = [int(b) for b in a.infer_batches.split(",") if b]
    dts = ["f32", "bf16"] if a.dtype == "both" else [a.dtype]
    confs = []
    if a.mode in ("train", "all"):
        confs += [("train", d, a.train_batch) for d in dts]
    if a.mode in ("infer", "all"):
        confs += [("infer", d, b) for d in dts for b in infer_batches]

    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    common = ["--steps", str(a.steps), "--warmup", str(a.warmup), "--threads", str(a.threads), "--model", a.model,
              "--json"]
    cmdline = " ".join(shlex.quote(c) for c in [os.path.basename(a.python), "bench/vit_speed.py"] + sys.argv[1:])
    load0 = os.getloadavg()
    print("vit_speed: %s, %d rounds x %d configurations, %d warm-up + %d timed steps per process, %d threads" % (
        a.model, a.rounds, len(confs), a.warmup, a.steps, a.threads))
    print("command: %s" % cmdline)
    print("cpu: %s, %d cores; %s" % (cpu_name(), os.cpu_count(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())))
    print("load average before: %.2f %.2f %.2f" % load0, flush=True)
    if load0[0] > 0.5:
        print("warning: the machine is busy (load %.2f): both sides' OpenMP threads wait on each other's cores "
              "and the figures are not comparable; take timings on an idle machine" % load0[0], flush=True)
    res = {}   # (mode, dtype, batch, impl/variant) -> [img/s per round]
    t0 = time.perf_counter()
    for r in range(a.rounds):
        for mode, dt, b in confs:
            flags = ["--mode", mode, "--dtype", dt, "--batch", str(b)] + common
            ot = run([a.bench_vit] + flags + ["--no-mfu", "--bf16-gemm", a.bf16_gemm], env)
            th = run([a.python, os.path.join(HERE, "torch_vit_speed.py")] + flags, env)
            line = "round %d %-5s %-4s batch %-3d" % (r + 1, mode, dt, b)
            for x in ot + th:
                key = (mode, dt, b, x["impl"] if x["impl"] == "ot" else "torch " + x.get("variant", "-"))
                res.setdefault(key, []).append(x["img_s"])
                line += " | %s%s %.2f img/s" % (x["impl"], "" if x.get("variant", "-") == "-" else " " + x["variant"],
                                               x["img_s"])
            print(line, flush=True)
    load1 = os.getloadavg()

    def med(k):
        v = res.get(k)
        return statistics.median(v) if v else None

    print("\n%s: images/s, median over %d rounds (each round: the median of %d timed steps); ratio = ot / torch" % (
        a.model, a.rounds, a.steps))
    print("| configuration | ot img/s | torch img/s | ratio | torch bf16 autocast img/s | ratio vs autocast |")
    print("|---|---|---|---|---|---|")
    for mode, dt, b in confs:
        o = med((mode, dt, b, "ot"))
        main_v = "torch autocast" if mode == "train" and dt == "bf16" else "torch bf16model" if dt == "bf16" else "torch -"
        t = med((mode, dt, b, main_v))
        alt = med((mode, dt, b, "torch autocast")) if mode == "infer" and dt == "bf16" else None
        name = "%s %s batch %d" % ("training" if mode == "train" else "inference", dt, b)
        print("| %s | %.2f | %.2f | %.2fx | %s | %s |" % (name, o, t, o / t, "%.2f" % alt if alt else "-",
                                                         "%.2fx" % (o / alt) if alt else "-"))
    print("torch bf16: training under autocast (f32 master weights, as ot); inference with the model converted by\n"
          ".to(torch.bfloat16) (bf16 weights and activations, as `ot classify --weights bf16`), autocast beside it")
    print("\nload average before: %.2f %.2f %.2f, after: %.2f %.2f %.2f; run time %.0f s" % (load0 + load1 + (
        time.perf_counter() - t0,)))
    print("command: %s" % cmdline)


if __name__ == "__main__":
    main()
