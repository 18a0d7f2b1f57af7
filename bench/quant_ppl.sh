#!/usr/bin/env bash
# Held-out perplexity of a small GPT-2 under int8 quantization, side by side: a model trained
# with `ot train` on data/shakespeare.txt (3.75M parameters, 300 steps: minutes), scored in
# f32, int8 post-training quantization (ot quantize), calibrated int8 (ot quantize
# --calibrate: the AWQ-style search) and quantization-aware training as a fine-tune of it
# (ot train --init-from the f32 model --qat, FT_STEPS more steps, then ot quantize with its
# group), per row and per group of 32. The control: the same fine-tune without --qat (f32),
# scored in f32 and with plain PTQ, separates "more training" from "quantization-aware";
# the same f32 fine-tune with another data order (--seed 2) measures its noise. Then all of
# it again for the model with outlier activation channels injected without changing its
# function (bench/inject_outliers.py: the situation of trained LLMs that calibration
# addresses). Every fine-tune: a fresh AdamW at FT_LR (default 1e-4, the final learning rate
# of the trained model's schedule: lr 1e-3 decayed to min-lr lr / 10), constant after a
# 10-step warmup. Everything is scored by bench_quant_ppl (teacher-forced through the int8
# engine, every held-out window of 128 tokens). Steps that exist under OUT are reused.
# Usage: bench/quant_ppl.sh [BUILD_DIR] [OUT_DIR]   env: PYTHON (with numpy + safetensors,
#        for the outlier model; default python3), STEPS (default 300), FT_STEPS (default 100),
#        FT_LR (default 1e-4), OMP_NUM_THREADS
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build} out=${2:-out/quant_ppl} steps=${STEPS:-300} py=${PYTHON:-python3}
ft=${FT_STEPS:-100} ftlr=${FT_LR:-1e-4}
ot=$b/ot
mkdir -p "$out"
[ -f "$out/data/info.json" ] ||
  "$ot" prepare --corpus data/shakespeare.txt --out "$out/data" --vocab-size 2048 --quiet >/dev/null
common=(--data "$out/data" --batch-size 16 --seq-len 128 --eval-every 0 --save-every 0 --quiet)
train() {  # train DIR FLAGS...
  local dir=$1
  shift
  [ -e "$dir/latest" ] || "$ot" train "${common[@]}" --steps "$steps" --out "$dir" "$@" >/dev/null
}
finetune() {  # finetune FROM DIR FLAGS...: FT_STEPS steps from FROM's weights, a fresh optimizer
  local from=$1 dir=$2
  shift 2
  [ -e "$dir/latest" ] || "$ot" train "${common[@]}" --init-from "$from" --steps "$ft" --lr "$ftlr" \
    --lr-decay constant --warmup 10 --out "$dir" "$@" >/dev/null
}
quant() {  # quant MODEL FILE FLAGS...
  local model=$1 file=$2
  shift 2
  [ -s "$file" ] || "$ot" quantize --model "$model" --out "$file" --dtype int8 "$@" >"$file.log"
}
train "$out/f32"
[ -s "$out/f32_outliers/model.safetensors" ] ||
  "$py" bench/inject_outliers.py "$out/f32" "$out/f32_outliers" >/dev/null
for m in f32 f32_outliers; do
  finetune "$out/$m" "$out/${m}_ft"
  for g in 0 32; do
    finetune "$out/$m" "$out/${m}_ft_qat_g$g" --qat --qat-group $g
    quant "$out/$m" "$out/${m}_ptq_g$g.st" --group $g
    quant "$out/$m" "$out/${m}_cal_g$g.st" --group $g --calibrate "$out/data" --calib-batches 16
    quant "$out/${m}_ft" "$out/${m}_ft_ptq_g$g.st" --group $g
    quant "$out/${m}_ft_qat_g$g" "$out/${m}_ft_qat_g$g.st" --group $g
  done
done
finetune "$out/f32" "$out/f32_ft_seed2" --seed 2
ppl() { "$b/bench_quant_ppl" --data "$out/data" --seq 128 "$@"; }
table() {  # table MODEL: its rows (vs first = the gap to MODEL in f32)
  local m=$1 o=$out/$1
  ppl f32="$o" ptq_row="${o}_ptq_g0.st" calibrated_row="${o}_cal_g0.st" \
    ptq_g32="${o}_ptq_g32.st" calibrated_g32="${o}_cal_g32.st" \
    ft_f32="${o}_ft" ft_f32_ptq_row="${o}_ft_ptq_g0.st" ft_f32_ptq_g32="${o}_ft_ptq_g32.st" \
    ft_qat_row="${o}_ft_qat_g0.st" ft_qat_g32="${o}_ft_qat_g32.st" \
    ft_qat_row_f32_weights="${o}_ft_qat_g0" ft_qat_g32_f32_weights="${o}_ft_qat_g32" \
    ${2:+"$2"} | tee "$out/$m.ppl.txt"
}
# gap ROW REF TABLE: ROW's perplexity against REF's in TABLE (a file table wrote), in %
gap() { awk -v r="$1" -v f="$2" '$1 == r { a = $4 } $1 == f { b = $4 } END { printf "%+.3f%%", 100 * (a / b - 1) }' "$3"; }
summary() {  # summary MODEL: the criteria of the int8 perplexity table
  local t=$out/$1.ppl.txt
  echo "-- $1: int8 gap to f32 (per row | per group of 32)"
  echo "   PTQ of the model                 $(gap ptq_row f32 "$t") | $(gap ptq_g32 f32 "$t")"
  echo "   calibrated                       $(gap calibrated_row f32 "$t") | $(gap calibrated_g32 f32 "$t")"
  echo "   f32 fine-tune ($ft steps), PTQ    $(gap ft_f32_ptq_row ft_f32 "$t") | $(gap ft_f32_ptq_g32 ft_f32 "$t")"
  echo "   QAT fine-tune, to the f32 one    $(gap ft_qat_row ft_f32 "$t") | $(gap ft_qat_g32 ft_f32 "$t")"
  echo "   QAT fine-tune, to its f32 weights $(gap ft_qat_row ft_qat_row_f32_weights "$t") | $(gap ft_qat_g32 ft_qat_g32_f32_weights "$t")"
  echo "   QAT int8 against the f32 fine-tune's PTQ  $(gap ft_qat_row ft_f32_ptq_row "$t") | $(gap ft_qat_g32 ft_f32_ptq_g32 "$t")"
}
echo "== the trained model ($steps steps; fine-tunes: $ft more steps from its weights at lr $ftlr);" \
  "vs first = the gap to its f32"
table f32 ft_f32_seed2="$out/f32_ft_seed2"
echo
echo "== the same model with outlier channels (f32 unchanged by construction; fine-tunes from it)"
table f32_outliers f32_original="$out/f32"
echo
summary f32
echo "   noise: the f32 fine-tune with another data order (--seed 2) against it: $(gap ft_f32_seed2 ft_f32 "$out/f32.ppl.txt")"
summary f32_outliers
