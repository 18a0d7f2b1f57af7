#!/usr/bin/env bash
# `ot average` (CTest cli_average): `tests/cli_average.sh OT_BINARY`.
# A tiny run saving every step; the average of its last 1 has the same tensor
# bytes as its newest checkpoint, the average of the last 3 is evaluated,
# generated from and refused as a resume; bad requests fail with messages.
set -u
OT=$(readlink -f "$1")
tmp=$(mktemp -d /tmp/ot_average_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
head -c 60000 data/shakespeare.txt > "$tmp/corpus.txt"
cd "$tmp"
"$OT" prepare --corpus corpus.txt --out data --vocab-size 300 --quiet >/dev/null || fail "ot prepare"
"$OT" train --model tiny --data data --vocab-size 300 --max-seq 32 --seq-len 32 --batch-size 4 \
  --steps 4 --save-every 1 --keep 0 --eval-every 0 --threads 1 --out run --quiet > train.log 2>&1 ||
  { cat train.log; fail "training"; }
[ -d run/step_000004 ] && [ -d run/step_000001 ] || fail "checkpoints missing: $(ls run)"

"$OT" average --run run --last 1 --out avg1 > a1.log 2>&1 || { cat a1.log; fail "ot average --last 1"; }
grep -q "mean of step_000004" a1.log || fail "the report does not name the checkpoint: $(cat a1.log)"
# the tensor bytes: everything after the header of both files
n1=$(od -An -tu8 -N8 avg1/model.safetensors | tr -d ' ')
n2=$(od -An -tu8 -N8 run/step_000004/model.safetensors | tr -d ' ')
cmp <(tail -c +$((n1 + 9)) avg1/model.safetensors) <(tail -c +$((n2 + 9)) run/step_000004/model.safetensors) ||
  fail "the average of the last 1 does not hold the newest checkpoint's tensor bytes"
cmp avg1/config.json run/step_000004/config.json && cmp avg1/vocab.json run/step_000004/vocab.json ||
  fail "config.json / vocab.json not copied"

"$OT" average --run run --last 3 --out avg3 > a3.log 2>&1 || { cat a3.log; fail "ot average --last 3"; }
grep -q "mean of step_000002 step_000003 step_000004" a3.log || fail "report: $(cat a3.log)"
[ ! -e avg3/optimizer.safetensors ] || fail "an optimizer state in the average"
"$OT" eval avg3 > eval.log 2>&1 || { cat eval.log; fail "ot eval of the average"; }
grep -q "held-out loss" eval.log || fail "no loss from ot eval: $(cat eval.log)"
"$OT" generate --checkpoint avg3 --prompt "The" --max-tokens 4 > gen.out 2> gen.err ||
  { cat gen.err; fail "ot generate from the average"; }
"$OT" train --resume avg3 --steps 6 --quiet > resume.log 2>&1 && fail "a resume from the average ran"
grep -q "no optimizer.safetensors" resume.log || fail "resume refusal: $(cat resume.log)"
echo "average of 3: $(head -1 a3.log); eval: $(tail -1 eval.log)"

"$OT" average --checkpoint run/step_000001 --checkpoint run/step_000003 --out avg13 > a13.log 2>&1 ||
  { cat a13.log; fail "ot average --checkpoint x2"; }
grep -q "mean of step_000001 step_000003" a13.log || fail "report: $(cat a13.log)"

refused() {   # refused "message" args...: exit status non-zero, message on stderr
  local want=$1; shift
  "$OT" average "$@" > out.log 2> err.log && fail "accepted: ot average $*"
  grep -qF -- "$want" err.log || fail "ot average $*: expected '$want', got: $(cat err.log)"
}
refused "holds 4 complete checkpoints" --run run --last 5 --out x
refused "run directory nope" --run nope --last 2 --out x
refused "already exists" --run run --last 2 --out avg3
refused "--out is required" --run run --last 2
refused "--last '0' is not an integer in [1, 64]" --run run --last 0 --out x
refused "not both" --run run --last 2 --checkpoint run/step_000001 --out x
"$OT" train --model tiny --data data --vocab-size 300 --max-seq 32 --seq-len 32 --batch-size 4 --d-ff 40 \
  --steps 1 --eval-every 0 --threads 1 --out run2 --quiet > train2.log 2>&1 || { cat train2.log; fail "run2"; }
refused "--d-ff" --checkpoint run/step_000004 --checkpoint run2/step_000001 --out x
[ ! -e x ] && [ -z "$(ls -A . | grep '^\.x')" ] || fail "a refused average left files: $(ls -A)"
echo "ot average: all checks passed"
