#!/usr/bin/env bash
# `ot prepare --task translate` on a slice of the bundled En-Fr corpus: the joint
# tokenizer files, one summary line per split with the counts of the files, the
# --dump-ids files (ids that decode back to the lines), and the refusals: unequal
# line counts, invalid UTF-8, missing file, over-long lines (skipped or refused),
# flags that need --task translate or each other.
# Usage: tests/cli_prepare_translate.sh PATH/TO/ot   (run from the repository root)
set -u
ot=${1:?usage: $0 PATH/TO/ot}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_cli_tr.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
. "$(dirname "$(readlink -f "$0")")/lib.sh"   # check, has, fails

d=data/translate
head -n 400 $d/train.en > "$tmp/tr.en"; head -n 400 $d/train.fr > "$tmp/tr.fr"
head -n 50 $d/valid.en > "$tmp/va.en"; head -n 50 $d/valid.fr > "$tmp/va.fr"
printf '\n' >> "$tmp/tr.en"; printf 'vide\n' >> "$tmp/tr.fr"    # one pair with an empty side
out=$("$ot" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/tr.fr" --valid-src "$tmp/va.en" \
      --valid-tgt "$tmp/va.fr" --vocab-size 600 --out "$tmp/o" --dump-ids "$tmp/o/ids" --quiet 2>&1); rc=$?
check "happy path exits 0 (rc $rc): $out" test "$rc" = 0
for f in vocab.json merges.txt info.json ids.train.tsv ids.valid.tsv; do check "$f written" test -s "$tmp/o/$f"; done
check "summary: train 400 pairs of 401 lines, 1 empty" grep -q "^train *400 pairs of 401 lines (skipped 1 empty, 0 over 256" <<<"$out"
check "summary: valid 50 pairs" grep -q "^valid *50 pairs of 50 lines (skipped 0 empty" <<<"$out"
check "summary: 600 tokens" grep -q "600 tokens" <<<"$out"
check "dump: 400 + 50 lines" test "$(wc -l < "$tmp/o/ids.train.tsv")" = 400 -a "$(wc -l < "$tmp/o/ids.valid.tsv")" = 50
check "dump: ids < 600, one tab per line" awk -F'\t' 'NF != 2 { exit 1 } { n = split($1 " " $2, a, " ");
  for (i = 1; i <= n; i++) if (a[i] !~ /^[0-9]+$/ || a[i] >= 600) exit 1 }' "$tmp/o/ids.train.tsv"
tok=$(awk -F'\t' '{ print $1 }' "$tmp/o/ids.train.tsv" | awk '{ s += NF } END { print s }')
check "summary: src tokens = ids in the dump ($tok)" grep -q "tokens src $tok," <<<"$out"
for n in 1 17 400; do
  for side in 1 2; do
    ids=$(sed -n "${n}p" "$tmp/o/ids.train.tsv" | cut -f$side)
    want=$(sed -n "${n}p" "$tmp/tr.$([ $side = 1 ] && echo en || echo fr)")
    got=$("$ot" tokenize --tokenizer "$tmp/o" --decode --text "$ids" 2>/dev/null)
    check "line $n side $side decodes back" test "$got" = "$want"
  done
done
check "info.json names the task" grep -q '"task": "translate"' "$tmp/o/info.json"

# over-long lines: skipped and counted, or refused with --refuse-long
out=$("$ot" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/tr.fr" --vocab-size 600 --out "$tmp/o2" \
      --max-len 8 --quiet 2>&1); rc=$?
long=$(awk -F'\t' '{ a = split($1, x, " "); b = split($2, y, " "); if (a > 8 || b > 8) n++ } END { print n + 0 }' "$tmp/o/ids.train.tsv")
check "max-len 8 skips $long pairs: $out" grep -q "^train *$((400 - long)) pairs of 401 lines (skipped 1 empty, $long over 8 tokens)" <<<"$out"
fails 1 "> max_len 8" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/tr.fr" --vocab-size 600 --out "$tmp/o3" --max-len 8 --refuse-long --quiet

# bad files
head -n 10 "$tmp/tr.fr" > "$tmp/short.fr"
fails 1 "has 401 lines but" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/short.fr" --out "$tmp/o4" --quiet
fails 1 "short.fr has 10" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/short.fr" --out "$tmp/o4" --quiet
printf 'one\ntwo\n' > "$tmp/b.en"; printf 'un\nd\351ux\n' > "$tmp/b.fr"
fails 1 "b.fr:2: invalid UTF-8 at byte offset 1" prepare --task translate --src "$tmp/b.en" --tgt "$tmp/b.fr" --out "$tmp/o5" --quiet
fails 1 "nope.fr: cannot open" prepare --task translate --src "$tmp/b.en" --tgt "$tmp/nope.fr" --out "$tmp/o5" --quiet
fails 1 "valid split" prepare --task translate --src "$tmp/tr.en" --tgt "$tmp/tr.fr" --valid-src "$tmp/b.en" \
  --valid-tgt "$tmp/short.fr" --vocab-size 300 --out "$tmp/o6" --quiet
: > "$tmp/e.en"; : > "$tmp/e.fr"
fails 1 "no non-empty line" prepare --task translate --src "$tmp/e.en" --tgt "$tmp/e.fr" --out "$tmp/o7" --quiet

# flags
fails 2 "--src/--tgt/--valid-*/--test-*/--dump-ids need --task translate" prepare --corpus "$tmp/tr.en" --src "$tmp/tr.en" --out "$tmp/o8"
fails 2 "--task 'mt' is not one of lm|translate" prepare --task mt --src a --tgt b --out "$tmp/o8"
fails 2 "needs --src, --tgt and --out" prepare --task translate --src "$tmp/tr.en" --out "$tmp/o8"
fails 2 "give both --valid-src and --valid-tgt" prepare --task translate --src a --tgt b --valid-src c --out "$tmp/o8"
fails 2 "not --corpus" prepare --task translate --corpus a --src a --tgt b --out "$tmp/o8"
fails 2 "--max-len '0' is not an integer" prepare --task translate --src a --tgt b --out "$tmp/o8" --max-len 0

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
