#!/usr/bin/env bash
# `ot bleu` against sacreBLEU 2.6.0's output recorded in tests/golden/bleu/cases.txt
# (tools/gen_bleu_golden.py): the score line and the signature, byte for byte, for
# every recorded variant that the flags can express; the hypothesis from stdin;
# refusals (exit non-zero, a message): bad flag values, missing files, line count
# mismatch, invalid UTF-8, no --ref. Usage: tests/cli_bleu.sh PATH/TO/ot (from the repo root)
set -u
ot=${1:?usage: $0 PATH/TO/ot}
G=tests/golden/bleu
passed=0 failed=0
check() { if [ "$1" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# every case of cases.txt: "case NAME nrefs K tok T lc L smooth S value V", then line/signature
while read -r _ name _ nrefs _ tok _ lc _ smooth _ value; do
  line="" sig=""
  while IFS= read -r l && [ "$l" != end ]; do
    case "$l" in "line "*) line=${l#line } ;; "signature "*) sig=${l#signature } ;; esac
  done
  args=(--hyp "$G/$name/hyp.txt" --tokenize "$tok" --smooth "$smooth")
  for ((k = 0; k < nrefs; k++)); do args+=(--ref "$G/$name/ref$k.txt"); done
  [ "$lc" = 1 ] && args+=(--lowercase)
  [ "$value" != -1 ] && args+=(--smooth-value "$value")
  out=$("$ot" bleu "${args[@]}" 2>&1); rc=$?
  want=$(printf '%s\n%s' "$line" "$sig")
  [ "$rc" = 0 ] && [ "$out" = "$want" ]
  check $? "ot bleu ${args[*]}: rc $rc
  got:  $out
  want: $want"
done < "$G/cases.txt"

# the hypothesis from standard input gives the same output
a=$("$ot" bleu --hyp "$G/single/hyp.txt" --ref "$G/single/ref0.txt")
b=$("$ot" bleu --hyp - --ref "$G/single/ref0.txt" < "$G/single/hyp.txt")
[ -n "$a" ] && [ "$a" = "$b" ]; check $? "--hyp - differs: '$b' vs '$a'"

refused() {  # refused WANT ARGS...: non-zero exit, WANT in stderr, nothing on stdout
  local want=$1 out err rc
  shift
  out=$("$ot" bleu "$@" 2>"$tmp/err"); rc=$?
  err=$(cat "$tmp/err")
  [ "$rc" != 0 ] && [ -z "$out" ] && grep -qF -- "$want" <<<"$err"
  check $? "ot bleu $*: rc $rc, stdout '$out', stderr: $err"
}
printf 'one\ntwo\n' > "$tmp/h2"
printf 'one\ntwo\nthree\n' > "$tmp/r3"
printf 'one\nt\xffo\n' > "$tmp/bad"
refused "has 3 lines but the hypothesis" --hyp "$tmp/h2" --ref "$tmp/r3"
refused "$tmp/missing.txt" --hyp "$tmp/h2" --ref "$tmp/missing.txt"
refused "$tmp/nohyp.txt" --hyp "$tmp/nohyp.txt" --ref "$tmp/h2"
refused "bad:2: invalid UTF-8" --hyp "$tmp/h2" --ref "$tmp/bad"
refused "--smooth" --hyp "$tmp/h2" --ref "$tmp/h2" --smooth laplace
refused "--tokenize" --hyp "$tmp/h2" --ref "$tmp/h2" --tokenize intl13
refused "at least one --ref" --hyp "$tmp/h2"
refused "--hyp" --ref "$tmp/h2"
refused "--refs" --hyp "$tmp/h2" --refs "$tmp/h2"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
