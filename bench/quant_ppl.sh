#!/usr/bin/env bash
# Held-out perplexity of a small GPT-2 under int8 quantization, side by side: a model trained
# with `ot train` on data/shakespeare.txt (3.75M parameters, 300 steps: minutes), scored in
# f32, int8 post-training quantization (ot quantize), calibrated int8 (ot quantize
# --calibrate: the AWQ-style search) and quantization-aware training (ot train --qat, the
# same flags, then ot quantize with its group), per row and per group of 32. Then the same
# model with outlier activation channels injected without changing its function
# (bench/inject_outliers.py: the situation of trained LLMs that calibration addresses).
# Everything is scored by bench_quant_ppl (teacher-forced through the int8 engine, every
# held-out window of 128 tokens). Steps that exist under OUT are reused.
# Usage: bench/quant_ppl.sh [BUILD_DIR] [OUT_DIR]   env: PYTHON (with numpy + safetensors,
#        for the outlier table; default python3), STEPS (default 300), OMP_NUM_THREADS
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build} out=${2:-out/quant_ppl} steps=${STEPS:-300} py=${PYTHON:-python3}
ot=$b/ot
mkdir -p "$out"
[ -f "$out/data/info.json" ] ||
  "$ot" prepare --corpus data/shakespeare.txt --out "$out/data" --vocab-size 2048 --quiet >/dev/null
train() {  # train DIR FLAGS...
  local dir=$1
  shift
  [ -e "$dir/latest" ] || "$ot" train --data "$out/data" --steps "$steps" --batch-size 16 --seq-len 128 \
    --eval-every 0 --save-every 0 --quiet --out "$dir" "$@" >/dev/null
}
quant() {  # quant MODEL FILE FLAGS...
  local model=$1 file=$2
  shift 2
  [ -s "$file" ] || "$ot" quantize --model "$model" --out "$file" --dtype int8 "$@" >"$file.log"
}
train "$out/f32"
train "$out/qat_g0" --qat --qat-group 0
train "$out/qat_g32" --qat --qat-group 32
"$py" bench/inject_outliers.py "$out/f32" "$out/f32_outliers" >/dev/null
for g in 0 32; do
  for m in f32 f32_outliers; do
    quant "$out/$m" "$out/${m}_ptq_g$g.st" --group $g
    quant "$out/$m" "$out/${m}_cal_g$g.st" --group $g --calibrate "$out/data" --calib-batches 16
  done
  quant "$out/qat_g$g" "$out/qat_g$g.st" --group $g
done
ppl() { "$b/bench_quant_ppl" --data "$out/data" --seq 128 "$@"; }
echo "== the trained model (f32 and QAT: $steps steps each); vs first = the gap to f32"
ppl f32="$out/f32" \
  ptq_row="$out/f32_ptq_g0.st" calibrated_row="$out/f32_cal_g0.st" qat_row="$out/qat_g0.st" \
  ptq_g32="$out/f32_ptq_g32.st" calibrated_g32="$out/f32_cal_g32.st" qat_g32="$out/qat_g32.st" \
  qat_row_f32_weights="$out/qat_g0" qat_g32_f32_weights="$out/qat_g32"
echo
echo "== the same model with outlier channels (f32 unchanged by construction)"
ppl f32="$out/f32" f32_outliers="$out/f32_outliers" \
  ptq_row="$out/f32_outliers_ptq_g0.st" calibrated_row="$out/f32_outliers_cal_g0.st" \
  ptq_g32="$out/f32_outliers_ptq_g32.st" calibrated_g32="$out/f32_outliers_cal_g32.st"
