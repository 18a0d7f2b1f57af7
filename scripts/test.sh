#!/usr/bin/env bash
# Builds with -Werror and runs every test; then again under ASan+UBSan.
# Usage: scripts/test.sh [--no-sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
t0=$(date +%s)
scripts/build.sh build
(cd build && ctest --output-on-failure --timeout 600)
if [ "${1:-}" != "--no-sanitize" ]; then
  scripts/build.sh build-asan -DOT_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
  # oneDNN's JIT and OpenMP keep allocations alive until exit: not leaks of ours.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure --timeout 900)
fi
echo "tests: done in $(( $(date +%s) - t0 )) s"
