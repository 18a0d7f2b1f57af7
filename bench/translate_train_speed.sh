#!/usr/bin/env bash
# Training speed side by side (not run by CI): transformer-base (or PRESET) at about TOKENS tokens
# per batch on the prepared bitext, ot against bench/translate_torch.py (torch.nn), alternating
# ROUNDS times in one run. Each side's figure per round is the median tok/s (real source + target
# tokens, eos included, per second of forward + backward + Adam) over the steps after the first
# three; the table gives every round and the median of the rounds.
#   bench/translate_train_speed.sh PYTHON [ROUNDS=3] [PRESET=transformer-base] [TOKENS=4096] [THREADS=2]
# needs: build/ot, and `ot prepare --task translate ... --out out/translate --dump-ids out/translate/ids`
# (the same tokenizer and ids on both sides). Same recipe on both sides: dropout 0.1 on residuals
# and the embedding, none on attention probabilities or after the activation, label smoothing 0.1.
# Same batches on both sides: seed 1, and the torch script draws ot's batch plan (--ot-order), so
# both time the very same steps. Extra ot environment (e.g. OT_GEMM=onednn) passes through.
set -eu
PY=${1:?usage: bench/translate_train_speed.sh PYTHON [ROUNDS] [PRESET] [TOKENS] [THREADS]}
R=${2:-3}; PRESET=${3:-transformer-base}; TOK=${4:-4096}; TH=${5:-2}
OT=${OT:-build/ot}; DATA=${DATA:-out/translate}; STEPS=${STEPS:-8}
[ -f "$DATA/ids.train.tsv" ] || { echo "no $DATA/ids.train.tsv: run ot prepare ... --dump-ids $DATA/ids first" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
probe() {   # two spinning processes: each should take about as long as one alone when both cores are free
  local one two
  one=$( { /usr/bin/time -f %e sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done' ; } 2>&1 )
  two=$( { /usr/bin/time -f %e sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done & i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; wait' ; } 2>&1 )
  echo "core probe: one spinner ${one}s, two at once ${two}s; load $(cut -d' ' -f1-3 /proc/loadavg)"
}
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ot_round() {
  rm -rf "$tmp/ot"
  "$OT" train --task translate --data "$DATA" --model "$PRESET" --tokens-per-batch "$TOK" --steps "$STEPS" \
    --seed 1 --threads "$TH" --dropout 0.1 --attention-dropout 0 --activation-dropout 0 --label-smoothing 0.1 \
    --eval-every 0 --eval-bleu-sentences 0 --eval-batches 1 --save-every 0 --print-every 1 --quiet \
    --out "$tmp/ot" >"$tmp/ot.log" 2>&1 || { tail -n 5 "$tmp/ot.log" >&2; exit 1; }
  sed -n 's/.*"step": \([0-9]*\),.*"tok_per_s": \([0-9.e+]*\).*/\1 \2/p' "$tmp/ot/log.jsonl" |
    awk '$1 > 3 { print $2 }' | median
}
torch_round() {
  env -u OPENBLAS_CORETYPE "$PY" bench/translate_torch.py --bench --preset "$PRESET" --tokenizer "$DATA" \
    --train "$DATA/ids.train.tsv" --tokens "$TOK" --bench-steps $((STEPS - 3)) --threads "$TH" --seed 1 --ot-order \
    --dropout 0.1 --attn-dropout 0 --act-dropout 0 --label-smoothing 0.1 >"$tmp/torch.log" 2>&1 ||
    { tail -n 5 "$tmp/torch.log" >&2; exit 1; }
  sed -n 's/^RESULT.*tokens_per_s \([0-9.]*\).*/\1/p' "$tmp/torch.log"
}
probe
echo "| round | ot tok/s | torch tok/s | ot / torch |"
echo "|---|---|---|---|"
: >"$tmp/o"; : >"$tmp/t"
for r in $(seq 1 "$R"); do
  o=$(ot_round); t=$(torch_round)
  echo "$o" >>"$tmp/o"; echo "$t" >>"$tmp/t"
  echo "| $r | $o | $t | $(awk -v a="$o" -v b="$t" 'BEGIN { printf "%.2fx", a / b }') |"
done
mo=$(median <"$tmp/o"); mt=$(median <"$tmp/t")
echo "| median | $mo | $mt | $(awk -v a="$mo" -v b="$mt" 'BEGIN { printf "%.2fx", a / b }') |"
probe
echo "($PRESET, $TOK tokens per batch, $TH threads each, $STEPS steps a round, $(nproc) CPUs)"
