#!/usr/bin/env bash
# Quantization-aware training in parallel (CTest mpi_qat): `tests/mpi/qat.sh OT_BINARY` (from
# the repository root). `ot train --qat` (per row, and groups of 32) under data parallel 2,
# data parallel 2 with ZeRO-1 and 2 pipeline stages: the losses equal one process's on the
# same global batches (each rank fake-quantizes the whole matrices it holds, so the forward is
# the one process's); the layouts that split a matrix (tensor parallel, ZeRO-3) are refused
# with a message naming the reason.
set -u
OT=$(readlink -f "$1")
here=$(dirname "$(readlink -f "$0")")
. "$here/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_qat.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0 failed=0
MPI=(mpirun ${OT_MPIRUN_ARGS:---oversubscribe --allow-run-as-root} -np 2)
"$OT" prepare --corpus data/shakespeare.txt --out "$tmp/data" --vocab-size 600 --quiet >/dev/null 2>&1 ||
  { echo "FAIL: ot prepare"; exit 1; }
common=(--model tiny --layers 2 --data "$tmp/data" --vocab-size 600 --max-seq 32 --seq-len 32 --batch-size 2
        --steps 3 --eval-every 0 --print-every 1 --qat)
for g in 0 32; do
  OMP_NUM_THREADS=1 "$OT" train "${common[@]}" --qat-group $g --grad-accum 4 --out "$tmp/ref$g" \
    >"$tmp/ref$g.log" 2>&1 || { tail -5 "$tmp/ref$g.log"; echo "FAIL: one process, group $g"; exit 1; }
  check "group $g: one process logged 3 losses ($(losses "$tmp/ref$g" | tr '\n' ' '))" [ "$(losses "$tmp/ref$g" | wc -l)" = 3 ]
  for lay in "dp2:--data-parallel 2 --grad-accum 2" "dp2-zero1:--data-parallel 2 --grad-accum 2 --optimizer-shard 1" \
             "pp2:--pipeline-stages 2 --grad-accum 4"; do
    name=${lay%%:*}
    read -r -a flags <<<"${lay#*:}"
    OMP_NUM_THREADS=1 "${MPI[@]}" "$OT" train "${common[@]}" --qat-group $g "${flags[@]}" --out "$tmp/$name$g" \
      >"$tmp/$name$g.log" 2>&1 </dev/null
    check "group $g $name: exit 0 ($(tail -2 "$tmp/$name$g.log" | tr '\n' ' '))" [ $? = 0 ]
    bad=$(loss_diff "$tmp/ref$g" "$tmp/$name$g" 1e-5)
    check "group $g $name: losses equal one process's (differ: $bad)" [ -z "$bad" ]
  done
done
for lay in "--tensor-parallel 2" "--data-parallel 2 --optimizer-shard 3"; do
  read -r -a flags <<<"$lay"
  OMP_NUM_THREADS=1 "${MPI[@]}" "$OT" train "${common[@]}" "${flags[@]}" --out "$tmp/no" >"$tmp/no.log" 2>&1 </dev/null
  rc=$?
  check "$lay --qat refused (rc $rc): $(grep -m1 'qat' "$tmp/no.log")" \
    [ $rc != 0 ] && has "--qat needs whole matrices on every rank" "$tmp/no.log"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
