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
n=200
if [ "${1:-}" = "--quick" ]; then
  n=20
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
# held-out BLEU (beam 4) and sample translations of the last checkpoint
tok=out/translate-data
head -n "$n" data/translate/test.en > "$out/test.src"
head -n "$n" data/translate/test.fr > "$out/test.ref"
./build/ot translate --model "$out" --tokenizer "$tok" --beam 4 --batch 16 \
  --input "$out/test.src" --output "$out/test.hyp"
echo "held-out BLEU, the first $n test sentences, beam 4:"
./build/ot bleu --hyp "$out/test.hyp" --ref "$out/test.ref"
echo "samples (source / ours / reference):"
for i in 1 2 3 4 5; do
  printf '  en  %s\n  ot  %s\n  fr  %s\n\n' "$(sed -n "${i}p" "$out/test.src")" \
    "$(sed -n "${i}p" "$out/test.hyp")" "$(sed -n "${i}p" "$out/test.ref")"
done
echo "loss curve: $out/loss.svg   log: $out/log.jsonl   checkpoint: $out/latest"
