#!/usr/bin/env bash
# The main job (until the training engine lands): build, show the machine, run
# the operator benchmark (measures FMA peak and STREAM bandwidth, then every op).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build
./build/ot info
./build/ot bench ops "$@"
