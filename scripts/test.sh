#!/usr/bin/env bash
# Builds with -Werror and runs every test; then again under ASan+UBSan; then
# every fuzz target for 30 s (scripts/fuzz.sh). The PyTorch package's pytest suite runs after
# the plain tests (scripts/test_python.sh: a venv under build/ with torch from PyPI).
# Usage: scripts/test.sh [--no-sanitize] [--no-fuzz] [--no-python]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
t0=$(date +%s)
sanitize=1 fuzz=1 python=1
for a in "$@"; do
  case $a in
    --no-sanitize) sanitize=0 ;;
    --no-fuzz) fuzz=0 ;;
    --no-python) python=0 ;;
    *) echo "usage: scripts/test.sh [--no-sanitize] [--no-fuzz] [--no-python]" >&2; exit 2 ;;
  esac
done
scripts/build.sh build
(cd build && ctest --output-on-failure --timeout 600)
if [ "$python" = 1 ]; then
  scripts/test_python.sh build
fi
if [ "$sanitize" = 1 ]; then
  scripts/build.sh build-asan -DOT_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
  # oneDNN's JIT and OpenMP keep allocations alive until exit: not leaks of ours.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure --timeout 900)
  # The server tests again with LeakSanitizer: every thread and request gives its memory back;
  # tests/lsan.supp allows only oneDNN's and OpenMP's own allocations.
  for t in test_serve test_serve_batched test_serve_conn test_serve_leak; do
    if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
         LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp":print_suppressions=0 OMP_NUM_THREADS=2 \
         timeout 900 "build-asan/$t" > "build-asan/lsan_$t.log" 2>&1; then
      cat "build-asan/lsan_$t.log"
      echo "LeakSanitizer: $t failed (its output above)"
      exit 1
    fi
    echo "LeakSanitizer: $t: no leaks"
  done
fi
if [ "$fuzz" = 1 ]; then
  scripts/fuzz.sh 30
fi
echo "tests: done in $(( $(date +%s) - t0 )) s"
