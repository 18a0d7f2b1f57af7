#!/usr/bin/env bash
# Encoder-decoder rows of the parallel equivalence matrix (CTest mpi_encdec):
# `tests/mpi/encdec.sh OT_BINARY` (from the repository root).
# transformer-tiny (post-norm, tied three ways, sinusoidal positions) trained on
# a slice of the bundled En-Fr bitext for 6 steps under data parallel (buckets
# with overlap, ZeRO-1, ZeRO-2 with and without overlap, recompute), tensor
# parallel (heads and MLP of encoder self-, decoder self- and cross-attention;
# recompute full / selective), pipeline parallel (stages cut at the encoder /
# decoder seam, inside the decoder, inside the encoder, and a stage holding both
# stacks with --enc-layers 1 --layers 3; with ZeRO-1 / ZeRO-2 / recompute / tp),
# gradient all-reduces fused by groups of blocks (--comm-fusion-layers 1, 3),
# dp2 x tp2 (ZeRO-1 + recompute, ZeRO-2), dp2 x tp2 x pp2 and vocabulary-parallel
# (--vocab-parallel: tp2 with padding rows, dp2 x tp2 ZeRO-2, tp2 x pp2 with recompute), ZeRO-3
# (dp2, dp2 x tp2, dp2 x tp2 vocabulary-parallel, dp2 x pp2 with recompute, and with learned
# positions, which lie between the encoder's and the decoder's blocks, without prefetch; dp2 x
# pp2 with a stage holding both stacks, the replicas checked), each on the same
# global batches as one process: every step's loss equal to 1e-6 (relative), and the
# BLEU line at each evaluation (world rank 0 decodes; under tensor or pipeline parallel
# with the gathered whole weights; under ZeRO-3 also the data-parallel shards) identical.
# Then dp2 x tp2 ZeRO-2, dp2 x tp2 x pp2, dp2 x pp2 ZeRO-3 and
# the two vocabulary-parallel checkpoints resumed by one process continue with the
# one-process losses, and the refusals. Dropout is 0 in those rows; with dropout,
# attention dropout and activation dropout 0.1 (a row's masks from its index in the
# global batch, the heads' and MLP columns' from their global indices) dp2, tp2,
# dp2 x tp2 and pp2 equal a one-process dropout reference the same way.
set -u
OT=$(readlink -f "$1")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_mpi_encdec.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0 failed=0
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
. "$(dirname "$0")/lib.sh"
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)

d=data/translate
paste -d '\t' $d/train.en $d/train.fr | awk -F'\t' 'split($1, a, " ") <= 3 && split($2, b, " ") <= 3 &&
  length($1) <= 24 && length($2) <= 24 && $1 != "" && $2 != ""' | head -n 300 > "$tmp/pairs"
head -n 240 "$tmp/pairs" | cut -f1 > "$tmp/tr.en"; head -n 240 "$tmp/pairs" | cut -f2 > "$tmp/tr.fr"
tail -n 60 "$tmp/pairs" | cut -f1 > "$tmp/va.en"; tail -n 60 "$tmp/pairs" | cut -f2 > "$tmp/va.fr"
"$OT" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/tr.fr" --vocab-size 400 --out "$tmp/tok" \
  --quiet >/dev/null 2>&1 || { echo "FAIL: ot prepare"; exit 1; }
common=(--task translate --model transformer-tiny --data "$tmp/tok" --src-data "$tmp/tr.en"
        --tgt-data "$tmp/tr.fr" --valid-src "$tmp/va.en" --valid-tgt "$tmp/va.fr" --tokens-per-batch 256
        --threads 1 --lr 3e-3 --warmup 2 --dropout 0 --eval-every 3 --eval-bleu-sentences 30
        --print-every 1 --steps 6)

bleus() { grep '^bleu' "$1" | sed 's/ | [0-9.]* s$//'; }

# the one-process reference: global batch = 2 x 256 tokens (grad-accum 2)
"$OT" train "${common[@]}" --grad-accum 2 --out "$tmp/ref" >"$tmp/ref.log" 2>&1 ||
  { tail -5 "$tmp/ref.log"; echo "FAIL: reference run"; exit 1; }
[ "$(losses "$tmp/ref" | wc -l)" = 6 ] || { echo "FAIL: the reference logged $(losses "$tmp/ref" | wc -l) losses"; exit 1; }
grep -q '^bleu  step      6 | 30 sentences | BLEU = ' "$tmp/ref.log" || { echo "FAIL: no BLEU line"; exit 1; }

# row NAME NP ARGS...: the layout's 6 losses equal the reference's ($ref: its run
# directory under $tmp), and its BLEU lines
ref=ref
row() {
  local name=$1 np=$2
  shift 2
  local out="$tmp/$name" want="$tmp/$ref"
  layout_losses "$name" "$np" "$ref" 6 "$@" || return
  if [ "$(bleus "$want.log")" != "$(bleus "$out.log")" ]; then
    diff <(bleus "$want.log") <(bleus "$out.log"); fail "$name: BLEU lines differ"; return
  fi
  passed=$((passed + 1))
  echo "ok: $name (largest relative difference $(max_rel_diff "$want" "$out"))"
}

# resumed NAME STEP_DIR: one process resumes a parallel checkpoint of step 3 and logs
# the reference's steps 4-6
resumed() {
  local name=$1 dir=$2
  if [ ! -d "$dir" ]; then fail "$name: no checkpoint $dir"; return; fi
  if "$OT" train "${common[@]}" --grad-accum 2 --resume "$dir" --out "$tmp/resumed_$name" \
       >"$tmp/resumed_$name.log" 2>&1; then
    local want got
    want=$(losses "$tmp/ref" | tail -3 | tr '\n' ' ') got=$(losses "$tmp/resumed_$name" | tail -3 | tr '\n' ' ')
    if [ "$want" = "$got" ]; then passed=$((passed + 1)); echo "ok: $name checkpoint resumed by one process"
    else fail "$name: resumed losses $got, want $want"; fi
  else
    tail -5 "$tmp/resumed_$name.log"; fail "$name: one-process resume"
  fi
}

row dp2 2 --data-parallel 2
row dp2_zero1 2 --data-parallel 2 --zero 1
row dp2_zero2 2 --data-parallel 2 --zero 2
row dp2_zero2_serial 2 --data-parallel 2 --zero 2 --no-overlap
row dp2_recompute 2 --data-parallel 2 --recompute full
row tp2 2 --tensor-parallel 2 --grad-accum 2
row tp2_recompute_full 2 --tensor-parallel 2 --grad-accum 2 --recompute full
row tp2_recompute_selective 2 --tensor-parallel 2 --grad-accum 2 --recompute selective
row dp2_tp2_zero1_recompute 4 --data-parallel 2 --tensor-parallel 2 --zero 1 --recompute full
row dp2_tp2_zero2 4 --data-parallel 2 --tensor-parallel 2 --zero 2 --save-every 3

row pp2 2 --pipeline-stages 2 --grad-accum 2
row pp3 3 --pipeline-stages 3 --grad-accum 2
row pp4 4 --pipeline-stages 4 --grad-accum 2
row dp2_pp2_zero1 4 --data-parallel 2 --pipeline-stages 2 --zero 1
row dp2_pp2_zero2 4 --data-parallel 2 --pipeline-stages 2 --zero 2
row tp2_pp2_recompute_selective 4 --tensor-parallel 2 --pipeline-stages 2 --grad-accum 2 \
  --recompute selective
row dp2_fusion1 2 --data-parallel 2 --comm-fusion-layers 1
row dp2_pp2_fusion3 4 --data-parallel 2 --pipeline-stages 2 --comm-fusion-layers 3 --no-overlap
# the fusion groups in the layout report: 4 blocks in groups of 1, stage 0's 2 blocks in one
grep -q "4 fused all-reduces (fusion groups of 1 of the 4 blocks)" "$tmp/dp2_fusion1.log" &&
  grep -q "1 fused all-reduces (fusion groups of 3 of the 2 blocks)" "$tmp/dp2_pp2_fusion3.log" &&
  passed=$((passed + 1)) ||
  fail "fusion groups report: $(grep -h 'gradient reduction per step' "$tmp"/dp2_*fusion*.log)"
row dp2_tp2_pp2_zero1_recompute 8 --data-parallel 2 --tensor-parallel 2 --pipeline-stages 2 \
  --zero 1 --recompute full --save-every 3
# vocabulary-parallel: the shared embedding's rows (and final_logits_bias) split over the
# tensor ranks, both stacks' lookups summed over the tensor group, the label-smoothed
# cross-entropy over the split logits; the first row pads the vocabulary 400 to 448 rows
# (tensor rank 1 holds rows [224, 448): 176 tokens and 48 padding rows)
"$OT" train "${common[@]}" --grad-accum 2 --vocab-pad 64 --out "$tmp/ref64" >"$tmp/ref64.log" 2>&1 ||
  { tail -5 "$tmp/ref64.log"; fail "reference run (--vocab-pad 64)"; }
ref=ref64 row tp2_vp_padded 2 --tensor-parallel 2 --grad-accum 2 --vocab-parallel --vocab-pad 64
grep -qF "vocabulary 400, padded to 448 rows; 224 rows per tensor rank (48 padding rows in all)" \
  "$tmp/tp2_vp_padded.log" && passed=$((passed + 1)) ||
  fail "vocab-parallel report: $(grep -h 'rows per tensor rank' "$tmp/tp2_vp_padded.log")"
row dp2_tp2_vp_zero2 4 --data-parallel 2 --tensor-parallel 2 --vocab-parallel --zero 2 --save-every 3
row tp2_pp2_vp_recompute 4 --tensor-parallel 2 --pipeline-stages 2 --grad-accum 2 --vocab-parallel \
  --recompute full --save-every 3

# ZeRO-3: every block gathered into one of two slots before its forward and backward (the
# next one prefetched across the encoder / decoder seam), the shared embedding's rows and
# the head read a chunk at a time, gradients reduce-scattered as ZeRO-2, evaluation in
# lockstep, world rank 0 decoding the BLEU sentences with the gathered shards
row dp2_zero3 2 --data-parallel 2 --zero 3
grep -q "ZeRO-3, one all-reduce per unit of 4 (a whole block; each rank keeps its shard)" "$tmp/dp2_zero3.log" &&
  grep -q "^ZeRO-3 weight gathers (world rank 0): .* (prefetch on)" "$tmp/dp2_zero3.log" &&
  passed=$((passed + 1)) || fail "ZeRO-3 reports: $(grep -h 'ZeRO-3' "$tmp/dp2_zero3.log")"
row dp2_tp2_zero3 4 --data-parallel 2 --tensor-parallel 2 --zero 3
row dp2_tp2_vp_zero3 4 --data-parallel 2 --tensor-parallel 2 --vocab-parallel --zero 3
row dp2_pp2_zero3_recompute 4 --data-parallel 2 --pipeline-stages 2 --zero 3 --recompute full \
  --save-every 3
"$OT" train "${common[@]}" --grad-accum 2 --positions learned --out "$tmp/refl" >"$tmp/refl.log" 2>&1 ||
  { tail -5 "$tmp/refl.log"; fail "reference run (learned positions)"; }
ref=refl row dp2_zero3_learned_noprefetch 2 --data-parallel 2 --zero 3 --positions learned \
  --no-zero-prefetch

# the dp2 x tp2 ZeRO-2, dp2 x tp2 x pp2 and dp2 x pp2 ZeRO-3 checkpoints of step 3, resumed by
# one process
resumed dp2_tp2_zero2 "$tmp/dp2_tp2_zero2/step_000003"
resumed dp2_tp2_pp2 "$tmp/dp2_tp2_pp2_zero1_recompute/step_000003"
resumed dp2_tp2_vp_zero2 "$tmp/dp2_tp2_vp_zero2/step_000003"
resumed tp2_pp2_vp "$tmp/tp2_pp2_vp_recompute/step_000003"
resumed dp2_pp2_zero3 "$tmp/dp2_pp2_zero3_recompute/step_000003"

# a stage holding the last encoder block and decoder blocks (1 encoder + 3 decoder blocks:
# stages [0, 2) and [2, 4)), against its own reference
"$OT" train "${common[@]}" --grad-accum 2 --enc-layers 1 --layers 3 --out "$tmp/ref13" \
  >"$tmp/ref13.log" 2>&1 || { tail -5 "$tmp/ref13.log"; fail "reference run (1 + 3 blocks)"; }
ref=ref13 row pp2_seam_stage 2 --pipeline-stages 2 --grad-accum 2 --enc-layers 1 --layers 3
# ZeRO-3 with such a stage (encoder block 0 and decoder block 0 take turns in its slots),
# the replicas checked after every step
ref=ref13 row dp2_pp2_zero3_seam_stage 4 --data-parallel 2 --pipeline-stages 2 --zero 3 \
  --enc-layers 1 --layers 3 --check-replicas 1
grep -q "^replicas: identical at 6 checks" "$tmp/dp2_pp2_zero3_seam_stage.log" && passed=$((passed + 1)) ||
  fail "ZeRO-3 replica checks: $(grep -h '^replica' "$tmp/dp2_pp2_zero3_seam_stage.log")"
# dropout: every layout draws the one-process masks
drop=(--dropout 0.1 --attention-dropout 0.1 --activation-dropout 0.1)
"$OT" train "${common[@]}" --grad-accum 2 "${drop[@]}" --out "$tmp/refd" >"$tmp/refd.log" 2>&1 ||
  { tail -5 "$tmp/refd.log"; fail "reference run (dropout)"; }
ref=refd row dp2_dropout 2 --data-parallel 2 "${drop[@]}"
ref=refd row tp2_dropout 2 --tensor-parallel 2 --grad-accum 2 "${drop[@]}"
ref=refd row dp2_tp2_dropout 4 --data-parallel 2 --tensor-parallel 2 --zero 1 "${drop[@]}"
ref=refd row pp2_dropout 2 --pipeline-stages 2 --grad-accum 2 "${drop[@]}"
ref=refd row dp2_zero3_dropout 2 --data-parallel 2 --zero 3 "${drop[@]}"
# (and the dropout reference differs from the dropout-0 one: the rows above are not vacuous)
[ "$(losses "$tmp/ref" | tr '\n' ' ')" != "$(losses "$tmp/refd" | tr '\n' ' ')" ] && passed=$((passed + 1)) ||
  fail "dropout reference equals the dropout-0 reference" 

# refusals
msg=$("$OT" train "${common[@]}" --pipeline-stages 5 --out "$tmp/x" 2>&1 >/dev/null)
if grep -qF -- "the encoder + decoder blocks 4 is below --pipeline-stages 5" <<<"$msg"; then passed=$((passed + 1))
else fail "--pipeline-stages 5: $msg"; fi

echo "mpi_encdec: $passed passed, $failed failed"
[ "$failed" = 0 ]
