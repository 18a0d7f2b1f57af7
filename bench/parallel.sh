#!/usr/bin/env bash
# Parallel training benchmark (not run by CI): one rank x one thread against
# dp2, tp2 and pp2 (8 micro-batches), one OpenMP thread per rank, the same
# global batch (16 rows x 256 tokens of the "small" model) for every layout.
#   bench/parallel.sh [BUILD_DIR] [extra bench_parallel flags]
set -eu
B=${1:-build}; shift || true
M=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1)
run() { local np=$1; shift; "${M[@]}" -np "$np" "$B/bench_parallel" "$@" "${EXTRA[@]}"; }
EXTRA=("$@")
tps_of() { sed -n 's/.*tokens\/s *\([0-9.]*\).*/\1/p'; }
base=$(run 1 --micro 8 | tee /dev/stderr | tps_of)
# the machine's ceiling for two processes: two independent one-rank runs at the same time
# (on a VM whose two vCPUs do not give two cores' throughput this is well below 2x)
a=$(mktemp); b=$(mktemp)
# (--bind-to none: two separate mpiruns would otherwise both bind their rank to core 0)
M1=("${M[@]}" --bind-to none)
"${M1[@]}" -np 1 "$B/bench_parallel" --micro 8 "${EXTRA[@]}" >"$a" &
"${M1[@]}" -np 1 "$B/bench_parallel" --micro 8 "${EXTRA[@]}" >"$b"; wait
both=$(awk -v x="$(tps_of <"$a")" -v y="$(tps_of <"$b")" 'BEGIN { print x + y }')
rm -f "$a" "$b"
echo "two independent one-rank runs at once: $both tokens/s together => $(awk -v a="$both" -v b="$base" 'BEGIN { printf "%.2fx one rank (the ceiling for 2 ranks here)", a / b }')"

for lay in "--dp 2" "--tp 2" "--pp 2" "--dp 2 --no-overlap" "--dp 2 --zero 1" "--dp 2 --zero 2"; do
  out=$(run 2 $lay --micro 8)
  tps=$(echo "$out" | sed -n 's/.*tokens\/s *\([0-9.]*\).*/\1/p')
  echo "$out  => $(awk -v a="$tps" -v b="$base" 'BEGIN { printf "%.2fx one rank", a / b }')"
done

# per-rank gradient and optimizer memory of GPT-2 124M under ZeRO 0 / 1 / 2 (no steps)
for z in 0 1 2; do for dp in 2 4 8; do
  "${M[@]}" -np $dp "$B/bench_parallel" --model gpt2 --dp $dp --micro 1 --rows $dp --zero $z --memory
done; done
