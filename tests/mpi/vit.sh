#!/usr/bin/env bash
# Vision transformer rows of the parallel equivalence matrix (CTest mpi_vit):
# `tests/mpi/vit.sh OT_BINARY` (from the repository root).
# vit-digits trained on the bundled 8x8 digits (random resized crops and flips on,
# dropout and drop-path 0 except in the dropout rows) for 6 steps of
# 16 images under data parallel (ZeRO-1, ZeRO-2 with and without overlap), tensor
# parallel (heads and MLP; recompute), pipeline parallel (the patch embedding and CLS
# token on the first stage, the final norm and classifier on the last; 1F1B and
# GPipe), dp2 x tp2 with ZeRO-1 / ZeRO-2 / ZeRO-3, dp2 x tp2 x pp2, and mean
# pooling under dp2 x tp2 and pp2, each on the
# same global batches as one process (grad-accum 2): every step's loss equal to 1e-6
# (relative), each evaluation's held-out loss too and its top-1 identical. Then
# checkpoints of step 3 written by parallel runs, resumed by one process, continue
# with the one-process losses; with dropout, attention and activation dropout and
# drop-path on (masks by global image, head and column), dp2, tp2, dp2 x tp2 and pp2
# against a one-process dropout reference; and the refusals.
set -u
OT=$(readlink -f "$1")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_mpi_vit.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0 failed=0
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
. "$(dirname "$0")/lib.sh"
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
common=(--task classify --model vit-digits --batch-size 8 --steps 6 --threads 1 --lr 3e-3 --warmup 2
        --eval-every 3 --eval-batches 4 --print-every 1 --save-every 3)

# evals RUN_DIR: "LOSS TOP1" per evaluation
evals() { sed -n 's/.*"val_loss": \([^,]*\), "val_top1": \([^,]*\),.*/\1 \2/p' "$1/log.jsonl"; }

"$OT" train "${common[@]}" --grad-accum 2 --out "$tmp/ref" >"$tmp/ref.log" 2>&1 ||
  { tail -5 "$tmp/ref.log"; echo "FAIL: reference run"; exit 1; }
[ "$(losses "$tmp/ref" | wc -l)" = 6 ] || { echo "FAIL: the reference logged $(losses "$tmp/ref" | wc -l) losses"; exit 1; }
[ "$(evals "$tmp/ref" | wc -l)" = 3 ] || { echo "FAIL: the reference logged $(evals "$tmp/ref" | wc -l) evaluations"; exit 1; }

# row NAME NP ARGS...: the layout's 6 losses and 3 evaluations equal the reference's
row() {
  local name=$1 np=$2
  shift 2
  local out="$tmp/$name" want="$tmp/${ref:-ref}" bad
  layout_losses "$name" "$np" "${ref:-ref}" 6 "$@" || return
  bad=$(paste <(evals "$want") <(evals "$out") | awk '{ d = $1 - $3; if (d < 0) d = -d;
    if (NF != 4 || d > 1e-6 * $1 || $2 != $4) print NR ": " $0 }')
  if [ -n "$bad" ]; then fail "$name: evaluations differ (loss top-1, want vs got): $bad"; return; fi
  passed=$((passed + 1))
  echo "ok: $name (largest relative loss difference $(max_rel_diff "$want" "$out"))"
}

# resumed NAME STEP_DIR: one process resumes a parallel checkpoint of step 3 and logs
# the reference's steps 4-6
resumed() {
  local name=$1 dir=$2
  if [ ! -d "$dir" ]; then fail "$name: no checkpoint $dir"; return; fi
  if "$OT" train "${common[@]}" --grad-accum 2 --resume "$dir" --out "$tmp/resumed_$name" \
       >"$tmp/resumed_$name.log" 2>&1; then
    local bad
    bad=$(paste <(losses "$tmp/ref" | tail -3) <(losses "$tmp/resumed_$name") | awk '{ d = $1 - $2;
      if (d < 0) d = -d; if (NF != 2 || d > 1e-6 * $1) print NR ": " $0 }')
    if [ -z "$bad" ] && [ "$(losses "$tmp/resumed_$name" | wc -l)" = 3 ]; then
      passed=$((passed + 1)); echo "ok: $name checkpoint resumed by one process"
    else
      fail "$name: resumed losses differ (want got): $bad"
    fi
  else
    tail -5 "$tmp/resumed_$name.log"; fail "$name: one-process resume"
  fi
}

row dp2 2 --data-parallel 2
row dp2_zero1 2 --data-parallel 2 --zero 1
row dp2_zero2 2 --data-parallel 2 --zero 2
row dp2_zero2_serial 2 --data-parallel 2 --zero 2 --no-overlap
row tp2 2 --tensor-parallel 2 --grad-accum 2
row tp2_recompute 2 --tensor-parallel 2 --grad-accum 2 --recompute full
row pp2 2 --pipeline-stages 2 --grad-accum 2
row pp2_gpipe 2 --pipeline-stages 2 --grad-accum 2 --gpipe
row dp2_tp2_zero1 4 --data-parallel 2 --tensor-parallel 2 --zero 1
row dp2_tp2_zero2 4 --data-parallel 2 --tensor-parallel 2 --zero 2
row dp2_tp2_zero3 4 --data-parallel 2 --tensor-parallel 2 --zero 3
row tp2_pp2 4 --tensor-parallel 2 --pipeline-stages 2 --grad-accum 2
# (micro-batches of 4 images: the same global batch of 16 in 2 x 2 micro-batches)
row dp2_tp2_pp2_zero1 8 --data-parallel 2 --tensor-parallel 2 --pipeline-stages 2 --zero 1 \
  --batch-size 4 --grad-accum 2 --eval-batches 8

# mean pooling (--pool mean): the pooled rows' norm and the classifier on the last stage
"$OT" train "${common[@]}" --grad-accum 2 --pool mean --out "$tmp/refmean" >"$tmp/refmean.log" 2>&1 ||
  { tail -5 "$tmp/refmean.log"; fail "reference run (--pool mean)"; }
ref=refmean row dp2_tp2_mean 4 --data-parallel 2 --tensor-parallel 2 --zero 2 --pool mean
ref=refmean row pp2_mean 2 --pipeline-stages 2 --grad-accum 2 --pool mean

# dropout and drop-path: every layout draws the one-process masks
drop=(--dropout 0.1 --attention-dropout 0.1 --activation-dropout 0.1 --drop-path 0.2)
"$OT" train "${common[@]}" --grad-accum 2 "${drop[@]}" --out "$tmp/refd" >"$tmp/refd.log" 2>&1 ||
  { tail -5 "$tmp/refd.log"; fail "reference run (dropout)"; }
ref=refd row dp2_dropout 2 --data-parallel 2 "${drop[@]}"
ref=refd row tp2_dropout 2 --tensor-parallel 2 --grad-accum 2 "${drop[@]}"
ref=refd row dp2_tp2_dropout 4 --data-parallel 2 --tensor-parallel 2 --zero 2 "${drop[@]}"
ref=refd row pp2_dropout 2 --pipeline-stages 2 --grad-accum 2 "${drop[@]}"
[ "$(losses "$tmp/ref" | tr '\n' ' ')" != "$(losses "$tmp/refd" | tr '\n' ' ')" ] && passed=$((passed + 1)) ||
  fail "dropout reference equals the dropout-0 reference"

resumed dp2_zero2 "$tmp/dp2_zero2/step_000003"
resumed dp2_tp2_zero3 "$tmp/dp2_tp2_zero3/step_000003"
resumed tp2_pp2 "$tmp/tp2_pp2/step_000003"
resumed dp2_tp2_pp2 "$tmp/dp2_tp2_pp2_zero1/step_000003"

# refusals
msg=$("${MPI[@]}" -np 2 "$OT" train "${common[@]}" --tensor-parallel 2 --grad-accum 2 --vocab-parallel \
  --out "$tmp/x" 2>&1 >/dev/null)
if grep -qF -- "a vision transformer's classifier stays whole on every tensor rank" <<<"$msg"; then passed=$((passed + 1))
else fail "--vocab-parallel: $msg"; fi
msg=$("${MPI[@]}" -np 3 "$OT" train "${common[@]}" --tensor-parallel 3 --grad-accum 2 --out "$tmp/x" 2>&1 >/dev/null)
if grep -qF -- "--heads 4 is not divisible by --tensor-parallel 3" <<<"$msg"; then passed=$((passed + 1))
else fail "--tensor-parallel 3 (4 heads): $msg"; fi

echo "mpi_vit: $passed passed, $failed failed"
[ "$failed" = 0 ]
