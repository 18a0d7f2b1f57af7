#!/usr/bin/env bash
# `ot train --task translate` end to end on a slice of the bundled En-Fr bitext
# (transformer-tiny, short pairs): progress and evaluation lines (label-smoothed
# loss, NLL, perplexity), the checkpoint (settings, the joint tokenizer), `ot eval`
# of it, a resume, --help listing the translate keys, and the refusals: a decoder-only
# model, --pipeline-stages 5 (more stages than blocks), --data-parallel 2 without mpirun, a missing file, unequal line
# counts, no tokenizer.
# Usage: tests/cli_train_translate.sh PATH/TO/ot   (run from the repository root)
set -u
ot=${1:?usage: $0 PATH/TO/ot}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_cli_tt.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
. "$(dirname "$(readlink -f "$0")")/lib.sh"   # check, has, fails

d=data/translate
# short pairs (transformer-tiny has 16 positions)
paste -d '\t' $d/train.en $d/train.fr | awk -F'\t' 'split($1, a, " ") <= 3 && split($2, b, " ") <= 3 &&
  length($1) <= 24 && length($2) <= 24 && $1 != "" && $2 != ""' | head -n 250 > "$tmp/pairs"
head -n 200 "$tmp/pairs" | cut -f1 > "$tmp/tr.en"; head -n 200 "$tmp/pairs" | cut -f2 > "$tmp/tr.fr"
tail -n 50 "$tmp/pairs" | cut -f1 > "$tmp/va.en"; tail -n 50 "$tmp/pairs" | cut -f2 > "$tmp/va.fr"
"$ot" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/tr.fr" --vocab-size 400 --out "$tmp/tok" --quiet \
  >/dev/null 2>&1
check "tokenizer made" test -s "$tmp/tok/vocab.json"
common=(--task translate --model transformer-tiny --data "$tmp/tok" --src-data "$tmp/tr.en" --tgt-data "$tmp/tr.fr"
        --valid-src "$tmp/va.en" --valid-tgt "$tmp/va.fr" --max-tokens 256 --threads 2)
out=$("$ot" train "${common[@]}" --steps 6 --eval-every 3 --out "$tmp/run" 2>&1); rc=$?
check "train exits 0 (rc $rc): $(tail -3 <<<"$out")" test "$rc" = 0
check "progress line with tok/s" grep -q "^step      6/6 | loss .* tok/s" <<<"$out"
check "the global batch line says tok/s counts source + target" grep -q "tok/s counts source + target tokens" <<<"$out"
check "eval line: label-smoothed loss, nll, ppl" grep -q "^eval  step      3 | val loss .* (label-smoothed 0.1) | nll .* | ppl " <<<"$out"
check "alias reported: max_tokens" grep -q "'max-tokens' is --tokens-per-batch here" <<<"$out"
check "settings printed: task=translate" grep -q "task=translate" <<<"$out"
for f in model.safetensors optimizer.safetensors vocab.json merges.txt; do
  check "checkpoint has $f" test -s "$tmp/run/step_000006/$f"
done
check "log has val_nll" grep -q '"val_nll"' "$tmp/run/log.jsonl"
out=$("$ot" eval "$tmp/run" 2>&1); rc=$?
check "ot eval of the checkpoint (rc $rc): $out" grep -q "held-out loss .* (label-smoothed 0.1), nll .* over .* target tokens" <<<"$out"
out=$("$ot" train --resume "$tmp/run" --steps 8 2>&1); rc=$?
check "resume to step 8 (rc $rc): $(tail -2 <<<"$out")" grep -q "^step      8/8" <<<"$out"
check "resume says where from" grep -q "resumed from .*step_000006 at step 6" <<<"$out"
out=$("$ot" train "${common[@]}" --steps 2 --eval-every 2 --eval-bleu-sentences 5 --eval-bleu-tokenize intl \
  --out "$tmp/run_intl" 2>&1); rc=$?
check "BLEU at evaluation with --eval-bleu-tokenize intl (rc $rc): $(grep '^bleu' <<<"$out")" \
  grep -q "^bleu  step      2 | 5 sentences | BLEU = .*|tok:intl|" <<<"$out"
help=$("$ot" train --help)
for k in --task --src-data --tgt-data --valid-src --valid-tgt --tokens-per-batch --label-smoothing --dropout \
         --attention-dropout --activation-dropout --eval-bleu-sentences --eval-bleu-tokenize; do
  check "--help lists $k" grep -q -- "^  $k " <<<"$help"
done
check "--help shows translate defaults" grep -q "\[translate: inverse_sqrt\]" <<<"$help"

fails 2 "needs an encoder-decoder model" train "${common[@]}" --model small --steps 1 --out "$tmp/x"
fails 2 "the encoder + decoder blocks 4 is below --pipeline-stages 5" train "${common[@]}" --pipeline-stages 5 --steps 1 --out "$tmp/x"
fails 1 "= 2 processes, but 1 was started (run \`mpirun -np 2" train "${common[@]}" \
  --data-parallel 2 --steps 1 --out "$tmp/x"
fails 1 "$tmp/missing.en" train "${common[@]}" --src-data "$tmp/missing.en" --steps 1 --out "$tmp/x"
fails 1 "line" train "${common[@]}" --tgt-data "$tmp/va.fr" --steps 1 --out "$tmp/x"
fails 1 "no joint tokenizer" train "${common[@]}" --data "$tmp/none" --steps 1 --out "$tmp/x"
fails 2 "--task translate" train --model transformer-tiny --steps 1 --out "$tmp/x"
fails 2 "is not a BLEU tokenizer (13a | intl | none)" train "${common[@]}" --eval-bleu-tokenize zh --steps 1 --out "$tmp/x"

echo "cli_train_translate: $passed passed, $failed failed"
[ "$failed" = 0 ]
