#!/usr/bin/env bash
# Replica consistency, --check-replicas N (CTest mpi_replica): `tests/mpi/replica.sh OT_BINARY`
# (from the repository root). The tiny preset for a few steps, checked every step:
# 1. clean runs pass and say so: dp2; dp2 x tp2 with ZeRO-1 (split tensors differ
#    between tensor ranks by design and are not compared there);
# 2. a perturbation injected on one rank (the test aid OT_TEST_REPLICA_PERTURB=
#    RANK:STEP[:NAME], src/dist/replica.c) ends the run non-zero on every rank with
#    the first tensor that differs, the group and the world ranks: a data-parallel
#    replica (dp2), a replicated norm weight of a tensor rank (tp2);
# 3. --check-replicas -1 is refused;
# 4. ZeRO-3 from the command line (dp2): the layout line, the final gather line, the global
#    tensors compared (the blocks and the vocabulary tensors exist once, in their owners'
#    shards) and perturbed positions found; without prefetch every gather is waited for.
set -u
OT=$(readlink -f "$1")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_mpi_replica.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0 failed=0
. "$(dirname "$0")/lib.sh"
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
"$OT" prepare --corpus data/shakespeare.txt --out "$tmp/data" --vocab-size 300 --quiet >/dev/null 2>&1 ||
  { echo "FAIL: ot prepare"; exit 1; }
common=(--model tiny --data "$tmp/data" --vocab-size 300 --max-seq 64 --seq-len 64 --batch-size 4 --steps 3
        --eval-every 0 --quiet --check-replicas 1)
run() {  # run NAME NP [mpirun args] -- ot train args: the exit status in $tmp/NAME.rc, output in $tmp/NAME.log
  local name=$1 np=$2 margs=()
  shift 2
  while [ "$1" != -- ]; do margs+=("$1"); shift; done
  shift
  "${MPI[@]}" "${margs[@]}" -np "$np" "$OT" train "${common[@]}" "$@" --out "$tmp/$name" >"$tmp/$name.log" 2>&1
  echo $? >"$tmp/$name.rc"
}

run dp2 2 -- --data-parallel 2
check "dp2: clean run exits 0 ($(tail -2 "$tmp/dp2.log" | tr '\n' ' '))" [ "$(cat "$tmp/dp2.rc")" = 0 ]
check "dp2: 3 checks reported" has "replicas: identical at 3 checks (every 1 steps" "$tmp/dp2.log"

run dp2tp2 4 -- --data_parallel 2 --model_parallel 2 --optimizer_shard true
check "dp2 x tp2 ZeRO-1: clean run exits 0 ($(tail -2 "$tmp/dp2tp2.log" | tr '\n' ' '))" [ "$(cat "$tmp/dp2tp2.rc")" = 0 ]
check "dp2 x tp2: checks reported" has "replicas: identical at 3 checks" "$tmp/dp2tp2.log"

run dp2bad 2 -x OT_TEST_REPLICA_PERTURB=1:2 -- --data-parallel 2
check "dp2 perturbed: non-zero exit" [ "$(cat "$tmp/dp2bad.rc")" != 0 ]
check "dp2 perturbed: the test aid says what it did" \
  has "OT_TEST_REPLICA_PERTURB: 'wte.weight' changed on world rank 1 before the check at step 2" "$tmp/dp2bad.log"
check "dp2 perturbed: every rank names the tensor, the group and the ranks" \
  [ "$(grep -c "replica check at step 2: 'wte.weight' differs over the data-parallel replicas of tensor rank 0, stage 0 (world rank: checksum, norm): 0: [0-9a-f]*, [0-9.]*; 1 (differs): " "$tmp/dp2bad.log")" = 2 ]

run tp2bad 2 -x OT_TEST_REPLICA_PERTURB=1:1:h.0.ln_1.weight -- --tensor-parallel 2
check "tp2 perturbed: non-zero exit" [ "$(cat "$tmp/tp2bad.rc")" != 0 ]
check "tp2 perturbed: the replicated norm weight over the tensor ranks" \
  has "replica check at step 1: 'h.0.ln_1.weight' differs over the tensor-parallel ranks of data rank 0, stage 0 (a replicated parameter)" "$tmp/tp2bad.log"

run z3 2 -- --data-parallel 2 --optimizer-shard 3 --no-quiet
check "dp2 ZeRO-3: clean run exits 0 ($(tail -2 "$tmp/z3.log" | tr '\n' ' '))" [ "$(cat "$tmp/z3.rc")" = 0 ]
check "dp2 ZeRO-3: the layout names it" has "ZeRO-3, one all-reduce per unit of" "$tmp/z3.log"
check "dp2 ZeRO-3: the prefetch is on" has "(the next block prefetched while one runs)" "$tmp/z3.log"
check "dp2 ZeRO-3: the gathers reported" grep -qE "^ZeRO-3 weight gathers \(world rank 0\): [0-9.]+ s per step, [0-9.]+ s of it waited for: [0-9]+% hidden behind compute \(prefetch on\)" "$tmp/z3.log"
check "dp2 ZeRO-3: replicas checked" has "replicas: identical at 3 checks" "$tmp/z3.log"
run z3np 2 -- --data-parallel 2 --optimizer-shard 3 --no-zero-prefetch --no-quiet
check "dp2 ZeRO-3 without prefetch: every gather waited for" has "0% hidden behind compute (prefetch off)" "$tmp/z3np.log"
check "dp2 ZeRO-3: the same losses with and without prefetch" \
  [ "$(grep -o 'loss *[0-9.]*' "$tmp/z3.log" | head -3)" = "$(grep -o 'loss *[0-9.]*' "$tmp/z3np.log" | head -3)" ]
run z3bad 2 -x OT_TEST_REPLICA_PERTURB=1:2:wpe.weight -- --data-parallel 2 --optimizer-shard 3
check "dp2 ZeRO-3 perturbed: non-zero exit" [ "$(cat "$tmp/z3bad.rc")" != 0 ]
check "dp2 ZeRO-3 perturbed: the gathered positions differ over the replicas" \
  has "replica check at step 2: 'wpe.weight' differs over the data-parallel replicas" "$tmp/z3bad.log"

out=$("$OT" train --check-replicas -1 2>&1)
check "--check-replicas -1 refused: $out" grep -qF "check-replicas '-1' is outside [0, 1073741824]" <<<"$out"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
