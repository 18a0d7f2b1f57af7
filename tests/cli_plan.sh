#!/usr/bin/env bash
# `ot plan` (CTest cli_plan): `tests/cli_plan.sh OT_BINARY`. Measures this machine into a
# file, ranks the layouts of a small model on 2 devices and on 2 hosts x 2, predicts one
# layout (and the seed's 1000B and the 34B layouts on the presets), writes CSV; the planned
# memory of a one-process run equals what `ot train` reports as its plan; bad requests end
# with a message and a non-zero status (a model that fits nowhere: 1; bad usage: 2).
set -u
OT=$(readlink -f "$1")
tmp=$(mktemp -d /tmp/ot_plan_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
has() { grep -qF -- "$1" "$2" || fail "no '$1' in $2: $(head -c 2000 "$2")"; }
M=(--model small --seq-len 64 --global-batch 8)

OMP_NUM_THREADS=1 "$OT" plan --measure --out "$tmp/m.conf" > measure.log 2>&1 || { cat measure.log; fail "--measure"; }
rm -f measure.log
for k in cores gemm_flops core_gemm_flops mem_bw peak_flops intra_bw inter_bw; do
  grep -qE "^$k = [0-9.e+]+$" "$tmp/m.conf" || fail "machine file lacks $k: $(cat "$tmp/m.conf")"
done

"$OT" plan --machine "$tmp/m.conf" "${M[@]}" --devices 2 --csv "$tmp/all.csv" > "$tmp/p2.log" 2>&1 ||
  { cat "$tmp/p2.log"; fail "plan on 2 devices"; }
has "layouts of 2 devices on 1 host" "$tmp/p2.log"
has "chosen: " "$tmp/p2.log"
grep -q "^1,2,1," "$tmp/all.csv" || fail "CSV lacks the tp2 rows"   # (the CSV: every layout)
grep -q "^2,1,1," "$tmp/all.csv" && grep -q "^1,1,2," "$tmp/all.csv" || fail "CSV lacks dp2 or pp2 rows"
rows=$(($(wc -l < "$tmp/all.csv") - 1))
[ "$rows" -ge 20 ] || fail "only $rows layouts in the CSV"

"$OT" plan --machine "$tmp/m.conf" "${M[@]}" --hosts 2 --devices 4 --top 5 > "$tmp/p4.log" 2>&1 ||
  { cat "$tmp/p4.log"; fail "plan on 2 hosts x 2"; }
has "layouts of 4 devices on 2 hosts" "$tmp/p4.log"

# one layout in detail; its memory: the plan `ot train` prints for the same run (one process)
"$OT" plan --machine "$tmp/m.conf" --model small --seq-len 64 --batch-size 4 --only > "$tmp/one.log" 2>&1 ||
  { cat "$tmp/one.log"; fail "--only"; }
has "layout dp1 tp1 pp1 M1 B4 z0 none" "$tmp/one.log"
has "step " "$tmp/one.log"

# the seed's layouts on the presets
"$OT" plan --machine ascend-910 --hosts 128 --model gpt-1t --batch-size 1 --seq-len 2048 --dtype f16 --only \
  --data_parallel 8 --model_parallel 16 --pipeline_stage 8 --micro_batch_num 32 --optimizer_shard true \
  > "$tmp/1t.log" 2>&1
[ $? -le 1 ] || { cat "$tmp/1t.log"; fail "the 1000B layout"; }
has "layout dp8 tp16 pp8 M32 B1 z1 none on 128 hosts x 8 ranks" "$tmp/1t.log"
has "1008.04B parameters" "$tmp/1t.log"
# the 34B before / after: 8 stages x 8 micro-batches, then 4 x 16 (with dp2): less bubble
for l in "1 8 8 4" "2 4 16 1"; do
  read -r dp pp mb b <<<"$l"
  "$OT" plan --machine a100-80gb --hosts 8 --model llama-34b --seq-len 4096 --dtype bf16 --recompute selective --only \
    --tensor-parallel 8 --data-parallel $dp --pipeline-stages $pp --grad-accum $mb --batch-size $b > "$tmp/34-$pp.log" 2>&1 ||
    { cat "$tmp/34-$pp.log"; fail "34B pp$pp"; }
done
b8=$(sed -n 's/.*pipeline bubble \([0-9.]*\).*/\1/p' "$tmp/34-8.log")
b4=$(sed -n 's/.*pipeline bubble \([0-9.]*\).*/\1/p' "$tmp/34-4.log")
awk -v a="$b8" -v b="$b4" 'BEGIN { exit !(a > 2 * b) }' || fail "34B: bubble pp8 M8 $b8 s vs pp4 M16 $b4 s"

refused() {   # refused STATUS "message" args...
  local want_rc=$1 want=$2; shift 2
  "$OT" plan "$@" > "$tmp/out.log" 2> "$tmp/err.log"
  local rc=$?
  [ "$rc" = "$want_rc" ] || fail "ot plan $*: exit $rc, expected $want_rc ($(cat "$tmp/err.log"))"
  grep -qF -- "$want" "$tmp/err.log" || fail "ot plan $*: expected '$want', got: $(cat "$tmp/err.log")"
}
refused 1 "no layout of 2 devices fits" --machine a100-80gb --model gpt-1t --devices 2 --seq-len 2048 --batch-size 1
refused 2 "cannot be spread evenly over 2 hosts" --machine "$tmp/m.conf" "${M[@]}" --hosts 2 --devices 3
refused 2 "no layout of 7 devices" --machine "$tmp/m.conf" --model small --seq-len 64 --batch-size 1 --devices 7
refused 2 "is not a preset" --machine nosuch "${M[@]}"
printf 'name = x\nflops = 3\n' > "$tmp/bad.conf"
refused 2 "'flops' is not a machine key" --machine "$tmp/bad.conf" "${M[@]}"
refused 2 "--heads 4 is not divisible by --tensor-parallel 3" --machine "$tmp/m.conf" "${M[@]}" --only \
  --tensor-parallel 3 --devices 3
refused 2 "unknown" --machine "$tmp/m.conf" --no-such-key 3
# every layout refused by the engine (a task the memory plans do not cover): that reason, not "more memory"
refused 2 "can be planned: ot_train_plan_memory: memory plans cover the lm task" --machine "$tmp/m.conf" \
  --task translate --model transformer-base --seq-len 64 --global-batch 8 --devices 2
echo "ot plan: all checks passed"
