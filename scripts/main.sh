#!/usr/bin/env bash
# The main job: build, then train the default small model (GPT-2 family, 5.3M
# parameters) on the bundled Shakespeare corpus with live progress (a few
# minutes on 2 cores; out/data is prepared first when missing), report its
# held-out loss and print a generated sample. Extra arguments go to `ot train`
# (e.g. --dtype bf16, --profile out/trace.json); --quick first = a 40-step smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
args=("$@")
if [ "${1:-}" = "--quick" ]; then
  args=(--steps 40 --eval-every 20 --eval-batches 4 "${@:2}")
fi
scripts/setup.sh
scripts/build.sh build
./build/ot info
./build/ot train --out out/train "${args[@]}"
./build/ot eval out/train
if ./build/ot help 2>/dev/null | grep -q "^  generate"; then
  echo
  ./build/ot generate --checkpoint out/train --prompt "ROMEO:" --max-tokens 120 --seed 1
  echo
fi
echo "loss curve: out/train/loss.svg   log: out/train/log.jsonl   checkpoint: out/train/latest"
