#!/usr/bin/env bash
# `ot translate` on the tiny Hugging Face Marian model (tests/golden/hf_marian) with
# --ids: greedy and the four beam settings give exactly HF generate()'s tokens
# (translate_cli.txt, from beam.json by tools/gen_translate_cli_golden.py), in
# batch mode (sorted by length inside the chunk, written in input order), in
# stream mode (--batch 1) and with --output; int8 / bf16 run; the refusals:
# missing model dir, bad flag values, a bad id, an over-long line (skipped with
# a warning or refused), invalid UTF-8, a tokenizer whose ids the model lacks.
# Usage: tests/cli_translate.sh PATH/TO/ot   (run from the repository root)
set -u
ot=${1:?usage: $0 PATH/TO/ot}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_cli_translate.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
. "$(dirname "$(readlink -f "$0")")/lib.sh"   # check, has (its own fails below)
fails() {  # fails RC WANT ARGS...: `ot ARGS` exits RC with WANT on stderr
  local rc=$1 want=$2 out got
  shift 2
  out=$("$ot" "$@" 2>&1 >/dev/null </dev/null); got=$?
  if [ "$got" = "$rc" ] && grep -qF -- "$want" <<<"$out"; then passed=$((passed + 1))
  else failed=$((failed + 1)); echo "FAIL: ot $*: rc $got (want $rc), stderr: $(head -2 <<<"$out") (want '$want')"; fi
}

m=tests/golden/hf_marian
g=$m/translate_cli.txt
sed -n 's/^src //p' $g > "$tmp/src.txt"
check "golden has 3 sources" test "$(wc -l < "$tmp/src.txt")" = 3
# the sources repeated 6 times: a chunk of 16 sorted by length, then a chunk of 2
for i in 1 2 3 4 5 6; do cat "$tmp/src.txt"; done > "$tmp/src18.txt"
runs=0
while read -r kind name flags; do
  [ "$kind" = run ] || continue
  runs=$((runs + 1))
  awk -v r="$name" '$1 == "run" { on = ($2 == r); next } on && $1 == "want" { $1 = ""; sub(/^ /, ""); print }' $g > "$tmp/want.txt"
  # shellcheck disable=SC2086
  "$ot" translate --model $m --ids $flags --input "$tmp/src.txt" --quiet > "$tmp/out.txt" 2>&1; rc=$?
  check "$name: exit 0 (rc $rc): $(head -2 "$tmp/out.txt")" test "$rc" = 0
  check "$name: batch output = HF generate" diff "$tmp/out.txt" "$tmp/want.txt"
  # shellcheck disable=SC2086
  "$ot" translate --model $m --ids $flags --batch 1 --quiet < "$tmp/src.txt" > "$tmp/stream.txt" 2>&1
  check "$name: stream output (--batch 1) = HF generate" diff "$tmp/stream.txt" "$tmp/want.txt"
  for i in 1 2 3 4 5 6; do cat "$tmp/want.txt"; done > "$tmp/want18.txt"
  # shellcheck disable=SC2086
  "$ot" translate --model $m --ids $flags --batch 16 --input "$tmp/src18.txt" --output "$tmp/out18.txt" --quiet
  check "$name: 18 lines in chunks of 16 + 2, input order kept" diff "$tmp/out18.txt" "$tmp/want18.txt"
done < $g
check "five runs in the golden file" test "$runs" = 5

# quantized / bf16: run and write one line per input line
for dt in bf16 int8; do
  "$ot" translate --model $m --ids --dtype $dt --input "$tmp/src18.txt" --output "$tmp/q.txt" --quiet
  check "--dtype $dt: 18 lines" test "$(wc -l < "$tmp/q.txt")" = 18
done
# a file of `ot quantize` translates as the model quantized when loaded (int8 per channel)
"$ot" quantize --model $m --out "$tmp/q8.safetensors" --dtype int8 --group 0 > /dev/null
"$ot" translate --model $m --ids --dtype int8 --no-generation-config --input "$tmp/src18.txt" \
  --output "$tmp/qa.txt" --quiet
"$ot" translate --model "$tmp/q8.safetensors" --ids --no-generation-config --input "$tmp/src18.txt" \
  --output "$tmp/qb.txt" --quiet
check "quantized file: 18 lines" test "$(wc -l < "$tmp/qb.txt")" = 18
check "quantized file: the same translations as --dtype int8" diff "$tmp/qa.txt" "$tmp/qb.txt"
fails 2 "holds quantized weights already: leave out --group" translate --model "$tmp/q8.safetensors" --ids --dtype int8 --group 32
fails 2 "holds quantized weights already: leave out --dtype bf16" translate --model "$tmp/q8.safetensors" --ids --dtype bf16
# the summary line
out=$("$ot" translate --model $m --ids --input "$tmp/src.txt" 2>&1 >/dev/null)
check "summary names lines and sentences/s: $out" grep -q "3 lines (0 skipped).*sentences/s" <<<"$out"

# an over-long line (the model's max_seq is 32): skipped with a warning, or refused
long=$(for i in $(seq 40); do printf '5 '; done; echo 0)
printf '%s\n%s\n%s\n' "4 0" "$long" "7 0" > "$tmp/long.txt"
"$ot" translate --model $m --ids --beam 1 --input "$tmp/long.txt" --output "$tmp/l.txt" --quiet 2> "$tmp/err.txt"
check "over-long line skipped: 3 output lines" test "$(wc -l < "$tmp/l.txt")" = 3
check "over-long line: empty output line" test -z "$(sed -n 2p "$tmp/l.txt")"
check "over-long line: warning" grep -q "input line 2 has 41 source tokens, more than the model's 32: skipped" "$tmp/err.txt"
fails 1 "input line 2 has 41 source tokens" translate --model $m --ids --long refuse --input "$tmp/long.txt"

# refusals
fails 1 "no such directory" translate --model "$tmp/nope" --ids --input "$tmp/src.txt"
fails 2 "--model DIR is required" translate --ids
fails 2 "--beam '0' is not an integer in [1, 256]" translate --model $m --beam 0
fails 2 "--dtype 'f16' is not one of f32|bf16|int8" translate --model $m --dtype f16
fails 2 "--group applies to --dtype int8 only" translate --model $m --group 32
fails 2 "--max-length 40 exceeds the model's max_seq 32" translate --model $m --ids --max-length 40
printf '4 99 0\n' > "$tmp/bad.txt"
fails 1 "input line 1: '99' is not a token id in [0, 61)" translate --model $m --ids --input "$tmp/bad.txt"
printf '4 x 0\n' > "$tmp/bad.txt"
fails 1 "'x' is not a token id" translate --model $m --ids --input "$tmp/bad.txt"
fails 1 "cannot open --input" translate --model $m --ids --input "$tmp/missing.txt"
# text mode: the Marian directory has no tokenizer; a tokenizer of other ids is refused
fails 1 "give --tokenizer DIR" translate --model $m --input "$tmp/src.txt"
d=data/translate
head -n 200 $d/train.en > "$tmp/tr.en"; head -n 200 $d/train.fr > "$tmp/tr.fr"
if "$ot" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/tr.fr" --vocab-size 300 \
     --out "$tmp/tok" --quiet > /dev/null 2>&1; then
  printf 'the house\n' > "$tmp/text.txt"
  fails 1 "outside the model's vocabulary of 61" translate --model $m --tokenizer "$tmp/tok" --input "$tmp/text.txt"
  printf 'caf\xe9\n' > "$tmp/latin1.txt"
  fails 1 "input line 1: invalid UTF-8" translate --model $m --tokenizer "$tmp/tok" --input "$tmp/latin1.txt"
else
  failed=$((failed + 1)); echo "FAIL: ot prepare --task translate for a tokenizer"
fi

echo "cli_translate: $passed passed, $failed failed"
[ "$failed" = 0 ]
