#!/usr/bin/env bash
# `ot train --task classify` then `ot classify` on the bundled digits: a short run
# writes a checkpoint; classify prints one line per held-out image with top-k
# classes whose probabilities are descending and sum to at most 1, the accuracy
# line, the same top-1 in bf16 and with int8 weights for nearly every image; an HF
# directory loads (f32, int8); a mean-pooled checkpoint classifies; bad input (images
# of another channel count, a missing file) and ot export of a ViT are refused.
# Usage: tests/cli_classify.sh PATH/TO/ot   (from the repository root)
set -u
ot=${1:?usage: $0 PATH/TO/ot}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_cli_classify.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$ot" train --task classify --steps 40 --batch-size 32 --eval-every 0 --threads 1 --quiet \
  --out "$tmp/run" > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; bad "ot train --task classify"; }
"$ot" classify --model "$tmp/run" --images data/digits/heldout.otimg --top-k 3 --accuracy --batch 50 \
  > "$tmp/f32.txt" 2> "$tmp/f32.err" || { cat "$tmp/f32.err"; bad "ot classify f32"; }
[ "$(grep -c $'^[0-9]*\t' "$tmp/f32.txt")" = 297 ] || bad "297 image lines expected"
grep -q '^top-1 .*% (.* of 297 images)' "$tmp/f32.txt" || bad "no accuracy line"
grep -q 'images/s' "$tmp/f32.err" || bad "no timing line"
awk -F'\t' '/^[0-9]/ { split($2, a, " "); s = 0; prev = 2;
  for (i = 1; i <= 3; i++) { split(a[i], q, ":"); if (q[2] > prev + 1e-6) exit 1; prev = q[2]; s += q[2] }
  if (s > 1.0001) exit 1 }' "$tmp/f32.txt" || bad "probabilities not descending / over 1"
"$ot" classify --model "$tmp/run" --images data/digits/heldout.otimg --top-k 1 --weights bf16 \
  > "$tmp/bf16.txt" 2>/dev/null || bad "ot classify bf16"
same=$(paste <(cut -f2 "$tmp/f32.txt" | cut -d: -f1 | head -297) <(cut -f2 "$tmp/bf16.txt" | cut -d: -f1) |
       awk '$1 == $2' | wc -l)
[ "$same" -ge 280 ] || bad "bf16 top-1 agrees with f32 on only $same of 297 images"
"$ot" classify --model tests/golden/hf_vit_b --images data/digits/heldout.otimg --top-k 2 --quiet \
  > /dev/null 2>&1 || bad "an HF ViT directory (1 channel) classifies the digits"
"$ot" classify --model "$tmp/run" --images data/digits/heldout.otimg --top-k 1 --weights int8 \
  > "$tmp/int8.txt" 2>/dev/null || bad "ot classify int8"
same=$(paste <(cut -f2 "$tmp/f32.txt" | cut -d: -f1 | head -297) <(cut -f2 "$tmp/int8.txt" | cut -d: -f1) |
       awk '$1 == $2' | wc -l)
[ "$same" -ge 290 ] || bad "int8 top-1 agrees with f32 on only $same of 297 images"
"$ot" classify --model tests/golden/hf_vit_b --images data/digits/heldout.otimg --weights int8 --quiet \
  > /dev/null 2>&1 || bad "an HF ViT directory classifies with int8 weights"
"$ot" classify --model tests/golden/hf_vit_a --images data/digits/heldout.otimg > /dev/null 2> "$tmp/e2"
[ $? = 1 ] && grep -q "the model takes 3" "$tmp/e2" || bad "1-channel images for an RGB model refused: $(cat "$tmp/e2")"
# a mean-pooled model classifies from its checkpoint; ot export refuses it (HF cannot express
# it) and says that a CLS model's checkpoint already is an HF directory
"$ot" train --task classify --steps 2 --batch-size 16 --pool mean --eval-every 0 --threads 1 --quiet \
  --out "$tmp/mean" > /dev/null 2>&1 || bad "ot train --pool mean"
"$ot" classify --model "$tmp/mean" --images data/digits/heldout.otimg --weights int8 --quiet > /dev/null 2>&1 ||
  bad "ot classify of a mean-pooled checkpoint"
"$ot" export --model "$tmp/mean" --out "$tmp/mean-hf" > /dev/null 2> "$tmp/e4"
[ $? = 1 ] && grep -q "cannot be exported" "$tmp/e4" || bad "export of a mean-pooled ViT refused: $(cat "$tmp/e4")"
"$ot" export --model "$tmp/run" --out "$tmp/run-hf" > /dev/null 2> "$tmp/e5"
[ $? = 1 ] && grep -q "already is a Hugging Face ViTForImageClassification" "$tmp/e5" ||
  bad "export of a ViT names its checkpoint: $(cat "$tmp/e5")"
"$ot" classify --model "$tmp/run" --images "$tmp/missing.otimg" > /dev/null 2> "$tmp/e3"
[ $? = 1 ] && grep -q "missing.otimg" "$tmp/e3" || bad "a missing file named"
[ "$fail" = 0 ] && echo "cli classify: ok"
exit "$fail"
