#!/usr/bin/env bash
# `ot export` end to end: a tiny translator trained a few steps on a slice of the
# bundled En-Fr bitext (its outputs run to the length limit, where a forced eos
# would show), its run directory and an `ot average` of it exported as MarianMTModel
# directories; `ot translate` gives the same lines on each checkpoint and on its
# export (greedy, beam 4, batch 1 and 16, a short length limit, int8, token ids);
# the files and the decoding settings written; the refusals: a missing directory,
# an existing output (and what --force replaces), the checkpoint itself as the output,
# a decoder-only model, a pre-norm (mBART) model, missing flags.
# Usage: tests/cli_export.sh PATH/TO/ot   (run from the repository root)
set -u
ot=${1:?usage: $0 PATH/TO/ot}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_cli_export.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
. "$(dirname "$(readlink -f "$0")")/lib.sh"   # check, has, fails

d=data/translate
paste -d '\t' $d/train.en $d/train.fr | awk -F'\t' 'split($1, a, " ") <= 3 && split($2, b, " ") <= 3 &&
  length($1) <= 24 && length($2) <= 24 && $1 != "" && $2 != ""' | head -n 250 > "$tmp/pairs"
head -n 200 "$tmp/pairs" | cut -f1 > "$tmp/tr.en"; head -n 200 "$tmp/pairs" | cut -f2 > "$tmp/tr.fr"
tail -n 50 "$tmp/pairs" | cut -f1 > "$tmp/va.en"; tail -n 50 "$tmp/pairs" | cut -f2 > "$tmp/va.fr"
"$ot" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/tr.fr" --vocab-size 400 --out "$tmp/tok" --quiet \
  >/dev/null 2>&1
out=$("$ot" train --task translate --model transformer-tiny --data "$tmp/tok" --src-data "$tmp/tr.en" \
  --tgt-data "$tmp/tr.fr" --valid-src "$tmp/va.en" --valid-tgt "$tmp/va.fr" --max-tokens 256 \
  --steps 6 --save-every 3 --keep 0 --eval-every 0 --eval-bleu-sentences 0 --out "$tmp/run" 2>&1); rc=$?
check "train exits 0 (rc $rc): $(tail -2 <<<"$out")" test "$rc" = 0

out=$("$ot" export --model "$tmp/run" --out "$tmp/hf" 2>&1); rc=$?
check "export of the run directory (rc $rc): $out" test "$rc" = 0
check "export names the checkpoint it took" grep -q "run/step_000006 -> .*/hf (MarianMTModel: 2 + 2 layers" <<<"$out"
for f in config.json generation_config.json model.safetensors vocab.json merges.txt tokenizer_config.json; do
  check "export has $f" test -s "$tmp/hf/$f"
done
check "no temporary directory left" test -z "$(ls -A "$tmp" | grep '\.export\.')"
check "vocab.json is the checkpoint's" cmp -s "$tmp/hf/vocab.json" "$tmp/run/step_000006/vocab.json"
check "config.json: forced_eos_token_id null" grep -q '"forced_eos_token_id": null' "$tmp/hf/config.json"
eot=$(grep -o '"<|endoftext|>": *[0-9]*' "$tmp/tok/vocab.json" | tr -dc '0-9')
check "config.json: eos = decoder start = pad = <|endoftext|> ($eot)" \
  grep -q "\"pad_token_id\": $eot,.*\"eos_token_id\": $eot,.*\"decoder_start_token_id\": $eot" \
  <(tr -d '\n' < "$tmp/hf/config.json")
check "generation_config.json: forced_eos null, max_length 16" \
  grep -q '"forced_eos_token_id": null,.*"max_length": 16' <(tr -d '\n' < "$tmp/hf/generation_config.json")

# the checkpoint and its export translate alike
same() {  # same DESCRIPTION CHECKPOINT EXPORT ARGS...: identical `ot translate` outputs
  local what=$1 a=$2 b=$3
  shift 3
  "$ot" translate --model "$a" --quiet "$@" < "$tmp/in" > "$tmp/a.out" 2> "$tmp/a.err"
  "$ot" translate --model "$b" --quiet "$@" < "$tmp/in" > "$tmp/b.out" 2> "$tmp/b.err"
  check "$what: $(head -2 "$tmp/a.err" "$tmp/b.err")" test -s "$tmp/a.out" -a ! -s "$tmp/a.err" -a ! -s "$tmp/b.err"
  if cmp -s "$tmp/a.out" "$tmp/b.out"; then passed=$((passed + 1))
  else failed=$((failed + 1)); echo "FAIL: $what: outputs differ"; diff "$tmp/a.out" "$tmp/b.out" | head -4; fi
}
cp "$tmp/va.en" "$tmp/in"
same "greedy" "$tmp/run" "$tmp/hf" --beam 1
same "beam 4" "$tmp/run" "$tmp/hf" --beam 4
same "beam 4, batch 1" "$tmp/run" "$tmp/hf" --beam 4 --batch 1
same "beam 3, length penalty 0.6, limit 5" "$tmp/run" "$tmp/hf" --beam 3 --length-penalty 0.6 --max-len-a 0 --max-len-b 5
same "beam 4, int8" "$tmp/run" "$tmp/hf" --beam 4 --dtype int8
printf '5 6 7 %s\n12 %s\n%s\n' "$eot" "$eot" "$eot" > "$tmp/in"
same "token ids, greedy, limit 6" "$tmp/run" "$tmp/hf" --ids --beam 1 --max-len-a 0 --max-len-b 6
# at the limit a sentence ends without eos: 5 tokens (a forced eos would leave 4)
check "some output reaches the length limit (5 tokens): $(tr '\n' '|' < "$tmp/a.out")" \
  awk 'NF == 5 { f = 1 } END { exit !f }' "$tmp/a.out"
cp "$tmp/va.en" "$tmp/in"

# an average of the run, exported
"$ot" average --run "$tmp/run" --last 2 --out "$tmp/avg" >/dev/null 2>&1
out=$("$ot" export --model "$tmp/avg" --out "$tmp/avg-hf" 2>&1); rc=$?
check "export of an average (rc $rc): $out" test "$rc" = 0
same "average, beam 4" "$tmp/avg" "$tmp/avg-hf" --beam 4
check "the average differs from the last checkpoint" bash -c "! cmp -s '$tmp/hf/model.safetensors' '$tmp/avg-hf/model.safetensors'"

# refusals
fails 1 "--model $tmp/none: no such directory" export --model "$tmp/none" --out "$tmp/x"
fails 1 "already exists: remove it, name a new directory, or add --force" export --model "$tmp/run" --out "$tmp/hf"
out=$("$ot" export --model "$tmp/run/step_000003" --out "$tmp/hf" --force 2>&1); rc=$?
check "--force replaces an export (rc $rc): $out" test "$rc" = 0
check "--force wrote the step-3 weights" bash -c "! cmp -s '$tmp/hf/model.safetensors' '$tmp/avg-hf/model.safetensors'"
touch "$tmp/hf/notes.txt"
fails 1 "holds 'notes.txt', which an export does not write" export --model "$tmp/run" --out "$tmp/hf" --force
check "the refused --force left the directory" test -s "$tmp/hf/model.safetensors" -a -e "$tmp/hf/notes.txt"
fails 1 "is the checkpoint's directory or above it" export --model "$tmp/run/step_000006" --out "$tmp/run" --force
check "the run directory is intact" test -s "$tmp/run/step_000006/model.safetensors"
fails 1 "decoder-only model; \`ot export\` writes encoder-decoders (MarianMTModel). This checkpoint already loads in transformers" \
  export --model tests/golden/hf_gpt2 --out "$tmp/x"
fails 1 "'hf-mbart' is pre-norm (mBART-style)" export --model tests/golden/hf_mbart --out "$tmp/x"
check "a refused export leaves nothing" test ! -e "$tmp/x" -a -z "$(ls -A "$tmp" | grep '\.export\.')"
fails 2 "--out DIR is required" export --model "$tmp/run"
fails 2 "--model DIR is required" export --out "$tmp/x"
check "ot help lists export" bash -c "'$ot' help | grep -q '^  ot export --model CHECKPOINT --out DIR'"

echo "cli_export: $passed passed, $failed failed"
[ "$failed" = 0 ]
