#!/usr/bin/env bash
# Translation example: build, then train transformer-small (encoder-decoder,
# post-norm, sinusoidal positions, tied embeddings) on the bundled En-Fr bitext
# (data/translate) with live progress for a few minutes on 2 cores: token-budget
# batches, label-smoothed loss (0.1), inverse_sqrt schedule, Adam (0.9, 0.98).
# The joint BPE is made in out/translate-data when missing. Then the held-out
# loss (label-smoothed and plain NLL, perplexity) of the last checkpoint, BLEU
# of held-out sentences and sample translations.
# Extra arguments go to `ot train` (e.g. --steps 600, --dtype bf16,
# --tokens-per-batch 2048); --quick first = a short smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--steps 300 --eval-every 100 --print-every 5)
if [ "${1:-}" = "--quick" ]; then
  args=(--steps 12 --eval-every 6 --tokens-per-batch 1024 --eval-batches 4 --eval-bleu-sentences 20
        --out out/translate-quick)
  shift
fi
out=out/translate
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = --out ] && out=${args[i + 1]}; done
for ((i = 1; i <= $#; i++)); do [ "${!i}" = --out ] && { j=$((i + 1)); out=${!j}; }; done
[ -x build/ot ] || { scripts/setup.sh; scripts/build.sh build; }
scripts/build.sh build >/dev/null
./build/ot train --task translate --model transformer-small "${args[@]}" "$@"
./build/ot eval "$out"
# TODO(integrator): BLEU and sample translations need the decoder (`ot translate`,
# ot_translator_*), which is not in this build yet. Once it is: `ot train` prints BLEU at each
# evaluation when src/cli/train.c installs the translate hook (ot_train_hooks, include/ot/train.h),
# and this script translates the first 200 lines of data/translate/valid.en with the checkpoint in
# $out, scores them with `ot bleu --ref` (first 200 lines of valid.fr) and prints 5 samples.
if ! ./build/ot help 2>/dev/null | grep -q "^  ot translate"; then
  echo "note: no \`ot translate\` in this build: BLEU and sample translations need the decoder"
fi
echo "loss curve: $out/loss.svg   log: $out/log.jsonl   checkpoint: $out/latest"
