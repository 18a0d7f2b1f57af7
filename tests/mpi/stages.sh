#!/usr/bin/env bash
# Balanced pipeline stages (CTest mpi_stages): `tests/mpi/stages.sh OT_BINARY` (from the
# repository root). A 4-block model whose head costs about two blocks, on 2 stages with
# --balanced-stages: the layout report puts 3 blocks on stage 0 and 1 on the last (the equal
# split 2 + 2), the losses equal one process's on the same global batches, and the memory the
# run allocated is its plan on every rank (the "memory by rank" lines).
set -u
OT=$(readlink -f "$1")
here=$(dirname "$(readlink -f "$0")")
. "$here/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_stages.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0 failed=0
"$OT" prepare --corpus data/shakespeare.txt --out "$tmp/data" --vocab-size 1200 --quiet >/dev/null 2>&1 ||
  { echo "FAIL: ot prepare"; exit 1; }
common=(--model tiny --layers 4 --data "$tmp/data" --vocab-size 1200 --max-seq 32 --seq-len 32 --batch-size 2
        --grad-accum 4 --steps 3 --eval-every 0 --print-every 1)
OMP_NUM_THREADS=1 "$OT" train "${common[@]}" --out "$tmp/ref" >"$tmp/ref.log" 2>&1 ||
  { tail -5 "$tmp/ref.log"; echo "FAIL: one process"; exit 1; }
for split in equal balanced; do
  flag=(); [ $split = balanced ] && flag=(--balanced-stages)
  OMP_NUM_THREADS=1 mpirun ${OT_MPIRUN_ARGS:---oversubscribe --allow-run-as-root} -np 2 "$OT" train "${common[@]}" \
    --pipeline-stages 2 "${flag[@]}" --out "$tmp/$split" >"$tmp/$split.log" 2>&1
  check "$split: exit 0 ($(tail -2 "$tmp/$split.log" | tr '\n' ' '))" [ $? = 0 ]
  bad=$(loss_diff "$tmp/ref" "$tmp/$split")
  check "$split: losses equal one process's (differ: $bad)" [ -z "$bad" ]
done
check "equal: blocks [0,2) and [2,4)" grep -qE "^ +1 +1 +0 +0 +\[2,4\)" "$tmp/equal.log"
check "balanced: blocks [0,3) and [3,4) (the head on the last stage)" grep -qE "^ +1 +1 +0 +0 +\[3,4\)" "$tmp/balanced.log"
# every rank allocated its plan (tracked peak = plan + the ops' scratch + loaders: within 10%)
awk '/^  rank +[0-9]+  plan/ { if ($6 > 1.10 * $4 || $6 < $4) bad = 1; n++ } END { exit !(n == 2 && !bad) }' \
  "$tmp/balanced.log"
check "balanced: each rank's tracked peak within 10% above its plan ($(grep '^  rank .*plan' "$tmp/balanced.log" | tr -s ' ' | tr '\n' ';'))" [ $? = 0 ]
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
