#!/usr/bin/env bash
# `ot quantize --calibrate` and `ot train --qat` end to end on a tiny model: a QAT run
# (group 32) whose checkpoint `ot quantize` exports with its own group by default (and
# warns for another one), a QAT fine-tune of an f32 run (--resume --qat --out elsewhere;
# --steps below the checkpoint's refused; --init-from: a new run from its weights), calibrated int8 per row and per group (the search's report),
# clipping only; the refusals: --calibrate with bf16, shards that do not exist, a
# calibration sequence beyond the model, --qat with bf16, --qat-group 48.
# Usage: tests/cli_quantize.sh PATH/TO/ot   (run from the repository root)
set -u
ot=${1:?usage: $0 PATH/TO/ot}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_cli_quantize.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
. "$(dirname "$(readlink -f "$0")")/lib.sh"   # check, has, fails

head -c 60000 data/shakespeare.txt > "$tmp/corpus.txt"
"$ot" prepare --corpus "$tmp/corpus.txt" --out "$tmp/data" --vocab-size 300 --quiet >/dev/null 2>&1
common=(--data "$tmp/data" --model tiny --d-model 64 --max-seq 32 --seq-len 32 --batch-size 4 --eval-every 0
        --eval-batches 2 --save-every 0 --quiet)
out=$("$ot" train "${common[@]}" --steps 8 --qat --qat-group 32 --out "$tmp/qat" 2>&1); rc=$?
check "train --qat exits 0 (rc $rc): $(tail -2 <<<"$out")" test "$rc" = 0
check "the checkpoint records the QAT keys" grep -aq "qat-group" "$tmp"/qat/step_*/model.safetensors
out=$("$ot" quantize --model "$tmp/qat" --out "$tmp/qat.st" --dtype int8 2>&1); rc=$?
check "quantize a QAT checkpoint (rc $rc): $out" test "$rc" = 0
check "its group by default: $out" grep -q "int8 (group 32)" <<<"$out"
out=$("$ot" quantize --model "$tmp/qat" --out "$tmp/qat0.st" --dtype int8 --group 0 2>&1); rc=$?
check "another group warns (rc $rc): $out" grep -q "trained with --qat-group 32" <<<"$out"

out=$("$ot" train "${common[@]}" --steps 8 --out "$tmp/f32" 2>&1); rc=$?
check "train exits 0 (rc $rc): $(tail -2 <<<"$out")" test "$rc" = 0
# QAT as a fine-tune of the f32 run: --resume with --qat into a new directory
out=$("$ot" train --resume "$tmp/f32" --qat --qat-group 32 --steps 12 --out "$tmp/qat_ft" 2>&1); rc=$?
check "resume the f32 run with --qat (rc $rc): $(tail -2 <<<"$out")" test "$rc" = 0
check "it continues the f32 run's steps" grep -q "resumed from .*f32/step_000008 at step 8" <<<"$out"
check "with the QAT keys" grep -q "qat=true qat-group=32" <<<"$out"
check "into its own directory" test -d "$tmp/qat_ft/step_000012" -a ! -e "$tmp/f32/step_000012"
check "the f32 run still ends at step 8" grep -qx step_000008 "$tmp/f32/latest"
out=$("$ot" quantize --model "$tmp/qat_ft" --out "$tmp/qat_ft.st" --dtype int8 2>&1); rc=$?
check "quantize the fine-tune with its group (rc $rc): $out" grep -q "int8 (group 32)" <<<"$out"
fails 1 "at step 8 and --steps is 4: --steps counts from the run's start (--steps 12 trains 4 more)" \
  train --resume "$tmp/f32" --qat --steps 4 --out "$tmp/bad"
out=$("$ot" train --resume "$tmp/f32" --qat --steps 8 --out "$tmp/qat_none" 2>&1); rc=$?
check "--steps at the checkpoint's: nothing to train (rc $rc): $out" \
  grep -q "nothing to train, no checkpoint written" <<<"$out"
fails 2 "--qat trains in f32" train --resume "$tmp/f32" --qat --dtype bf16 --steps 12 --out "$tmp/bad"
# or as a new run from the f32 weights: the checkpoint's model, step 0, a fresh optimizer
out=$("$ot" train --init-from "$tmp/f32" --qat --qat-group 32 --steps 4 --lr 1e-4 --lr-decay constant \
  --data "$tmp/data" --seq-len 32 --batch-size 4 --eval-every 0 --eval-batches 2 --out "$tmp/qat_new" 2>&1); rc=$?
check "--init-from the f32 run with --qat (rc $rc): $(tail -2 <<<"$out")" test "$rc" = 0
check "it says so" grep -q "weights from .*f32/step_000008; a new run: step 0" <<<"$out"
check "the checkpoint's model (d-model 64, not the preset's)" grep -q "model tiny .*d_model 64" <<<"$out"
check "its own steps" test -d "$tmp/qat_new/step_000004"
out=$("$ot" quantize --model "$tmp/qat_new" --out "$tmp/qat_new.st" --dtype int8 2>&1); rc=$?
check "quantize the new run with its group (rc $rc): $out" grep -q "int8 (group 32)" <<<"$out"
fails 2 "--init-from starts a new run from a checkpoint's weights" train --init-from "$tmp/f32" --resume "$tmp/f32" \
  --steps 12 --out "$tmp/bad"
fails 1 "--init-from $tmp/nowhere" train --init-from "$tmp/nowhere" --steps 2 --out "$tmp/bad"

for g in 0 32; do
  out=$("$ot" quantize --model "$tmp/f32" --out "$tmp/cal$g.st" --dtype int8 --group $g --calibrate "$tmp/data" \
    --calib-batches 2 --calib-seq 16 2>&1); rc=$?
  check "calibrated group $g (rc $rc): $out" test "$rc" = 0
  check "calibrated group $g reports the search: $out" grep -q "calibrated on 2 x 4 x 16 tokens" <<<"$out"
  check "calibrated group $g wrote the file" test -s "$tmp/cal$g.st"
done
out=$("$ot" quantize --model "$tmp/f32" --out "$tmp/clip.st" --dtype int8 --group 0 \
  --calibrate "$tmp/data/train_*.bin" --calib-batches 1 --calib-clip-only 2>&1); rc=$?
check "clipping only, a glob of shards (rc $rc): $out" grep -q ", 0 with per-channel scales" <<<"$out"

fails 2 "--calibrate searches int8 scales" quantize --model "$tmp/f32" --out "$tmp/x.st" --dtype bf16 \
  --calibrate "$tmp/data"
fails 1 "--calibrate $tmp/nowhere" quantize --model "$tmp/f32" --out "$tmp/x.st" --dtype int8 --calibrate "$tmp/nowhere"
fails 2 "exceeds the model's max_seq 32" quantize --model "$tmp/f32" --out "$tmp/x.st" --dtype int8 \
  --calibrate "$tmp/data" --calib-seq 64
fails 2 "--qat trains in f32" train "${common[@]}" --steps 1 --qat --dtype bf16 --out "$tmp/bad"
fails 2 "--qat-group 48" train "${common[@]}" --steps 1 --qat --qat-group 48 --out "$tmp/bad"

echo "cli quantize: $passed passed, $failed failed"
[ "$failed" = 0 ]
