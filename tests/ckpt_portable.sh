#!/usr/bin/env bash
# Self-contained checkpoints (CTest ckpt_portable): `tests/ckpt_portable.sh OT_BINARY`.
# A tiny run trained with relative paths in one directory; its checkpoint is
# copied elsewhere and used from a third working directory:
# 1. ot train --resume COPY --out OTHER: the log and plot follow --out;
#    without --out the run continues in the directory holding the copy;
# 2. ot eval COPY; 3. ot generate --checkpoint COPY (the copy's own tokenizer);
# 4. ot serve --checkpoint COPY --port 0: /health and one completion.
set -u
OT=$(readlink -f "$1")
tmp=$(mktemp -d /tmp/ot_portable_XXXXXX)
srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
head -c 60000 data/shakespeare.txt > "$tmp/corpus.txt"
mkdir -p "$tmp/orig" "$tmp/copy" "$tmp/cwd"
cd "$tmp/orig"
"$OT" prepare --corpus ../corpus.txt --out out/data --vocab-size 300 --quiet >/dev/null || fail "ot prepare"
"$OT" train --model tiny --data out/data --vocab-size 300 --max-seq 32 --seq-len 32 --batch-size 4 \
  --steps 3 --eval-every 0 --threads 1 --quiet > train.log 2>&1 || { cat train.log; fail "training"; }
[ -f out/train/step_000003/vocab.json ] && [ -f out/train/step_000003/merges.txt ] ||
  fail "the checkpoint holds no tokenizer files"
cp -r out/train/step_000003 "$tmp/copy/ck"
rm -rf out/train     # the original run directory is gone; the data stays
cd "$tmp/cwd"

"$OT" train --resume "$tmp/copy/ck" --out "$tmp/other" --steps 5 --quiet > resume.log 2>&1 ||
  { cat resume.log; fail "resume of the copy with --out elsewhere"; }
[ -f "$tmp/other/log.jsonl" ] && [ -f "$tmp/other/loss.svg" ] && [ -d "$tmp/other/step_000005" ] ||
  fail "the log, plot and checkpoint did not follow --out: $(ls "$tmp/other")"
echo "resume with --out: $(grep -c '"loss"' "$tmp/other/log.jsonl") steps logged in $tmp/other"
"$OT" train --resume "$tmp/copy/ck" --steps 4 --quiet > resume2.log 2>&1 ||
  { cat resume2.log; fail "resume of the copy without --out"; }
[ -d "$tmp/copy/step_000004" ] && [ -f "$tmp/copy/log.jsonl" ] || fail "without --out the run did not continue next to the copy"
[ -z "$(ls -A "$tmp/cwd" | grep -v '\.log$')" ] || fail "files written into the working directory: $(ls "$tmp/cwd")"

"$OT" eval "$tmp/copy/ck" > eval.log 2>&1 || { cat eval.log; fail "ot eval of the copy"; }
grep -q "held-out loss" eval.log || fail "no loss from ot eval: $(cat eval.log)"
echo "eval: $(cat eval.log)"

"$OT" generate --checkpoint "$tmp/copy/ck" --prompt "The" --max-tokens 5 > gen.out 2> gen.err ||
  { cat gen.err; fail "ot generate from the copy"; }
grep -q "tokenizer $tmp/copy/ck" gen.err || fail "generate did not use the copy's own tokenizer: $(cat gen.err)"
echo "generate: $(head -c 80 gen.out | tr '\n' ' ')"

"$OT" serve --checkpoint "$tmp/copy/ck" --port 0 --quiet > serve.out 2> serve.err &
srv=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' serve.out)
  [ -n "$port" ] && break
  kill -0 $srv 2>/dev/null || break
  sleep 0.05
done
[ -n "$port" ] || { cat serve.err; fail "ot serve from the copy did not start"; }
# curl when installed, else bash's /dev/tcp
get() {   # get PATH [BODY]: prints the response body
  if command -v curl >/dev/null; then
    if [ $# -gt 1 ]; then curl -s -m 20 "http://127.0.0.1:$port$1" -d "$2"; else curl -s -m 20 "http://127.0.0.1:$port$1"; fi
  else
    exec 3<>/dev/tcp/127.0.0.1/$port
    if [ $# -gt 1 ]; then
      printf 'POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' "$1" ${#2} "$2" >&3
    else
      printf 'GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' "$1" >&3
    fi
    sed '1,/^\r$/d' <&3
    exec 3<&-
  fi
}
health=$(get /health)
echo "$health" | grep -q '"status":"ok"' || fail "/health: $health"
done_=$(get /v1/completions '{"prompt": "The", "max_tokens": 4}')
echo "$done_" | grep -q '"completion_tokens":4' || fail "/v1/completions: $done_"
kill -TERM $srv
wait $srv || fail "ot serve did not stop cleanly"
srv=
echo "serve: /health ok, completion of 4 tokens"
echo "1 passed, 0 failed"
