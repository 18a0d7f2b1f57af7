#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.c; clang with ASan + UBSan,
# every library source instrumented) into build-fuzz/ and runs each for SECONDS
# (default 600), two at a time, on a temporary copy of its seed corpus
# tests/fuzz/corpus/<target>/ (the repository's corpus is never written).
# Prints per target: executions, exec/s, coverage (cov: edges, ft: features);
# any crash, leak, timeout or sanitizer report with the command that reproduces
# it (the input is kept under build-fuzz/crashes/). Exits 1 if there was any.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: safetensors, json, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs=${1:-600}
shift || true
jobs=${OT_FUZZ_JOBS:-2}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do
    t=$(basename "$f" .c); t=${t#fuzz_}
    [ "$t" = common ] || targets+=("$t")
  done
fi
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DOT_FUZZ=ON -DOT_WERROR=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/ot_fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p build-fuzz/crashes
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0
export OMP_NUM_THREADS=1

# One target: a fresh corpus copy, libFuzzer for $secs seconds; log and exit status under $work/$t.
run_one() {
  local t=$1 d=$work/$1
  mkdir -p "$d/corpus" "$d/art" "$d/tmp"
  cp -r "tests/fuzz/corpus/$t/." "$d/corpus/"
  ( cd "$d" && TMPDIR=$d/tmp timeout $((secs + 300)) "$root/build-fuzz/fuzz_$t" corpus \
      -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$d/art/" -timeout=30 \
      -rss_limit_mb=4096 > "$d/log" 2>&1; echo $? > "$d/rc" ) || true
}

running=0
for t in "${targets[@]}"; do
  [ -x "build-fuzz/fuzz_$t" ] || { echo "fuzz: no target fuzz_$t" >&2; exit 2; }
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

fail=0
printf '%-14s %12s %9s %8s %8s  %s\n' target executions exec/s cov ft result
for t in "${targets[@]}"; do
  d=$work/$t
  rc=$(cat "$d/rc" 2>/dev/null || echo 99)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$d/log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$d/log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$d/log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
  result=ok
  if [ "$rc" != 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: ' "$d/log"; then
    result="FAILED (exit $rc)"
    fail=1
  fi
  printf '%-14s %12s %9s %8s %8s  %s\n' "$t" "${runs:--}" "${eps:--}" "${cov:--}" "${ft:--}" "$result"
  if [ "$result" != ok ]; then
    echo "---- fuzz_$t: the end of its log"
    grep -vE '^#[0-9]+ ' "$d/log" | tail -40
    for a in "$d"/art/*; do
      [ -e "$a" ] || continue
      cp "$a" "build-fuzz/crashes/$t-$(basename "$a")"
      echo "reproduce: build-fuzz/fuzz_$t build-fuzz/crashes/$t-$(basename "$a")"
    done
    echo "----"
  fi
done
exit $fail
