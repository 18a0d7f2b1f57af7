#!/usr/bin/env bash
# The one flag parser of every `ot` command: an unknown flag is refused (rc 2)
# with a did-you-mean naming the right flag, a missing or out-of-range value is
# refused naming the flag, --help (rc 0, stdout) lists every flag of the table.
# Nothing here loads a model: every command line is refused before that.
# Usage: tests/cli_flags.sh PATH/TO/ot
set -u
ot=${1:?usage: $0 PATH/TO/ot}
passed=0 failed=0
bad() { echo "FAIL: $*"; ok=0; }
tally() { if [ "$ok" = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi; }
refused() {  # refused WANT ARGS... : rc 2 and stderr holding WANT
  local want=$1 out rc
  shift
  ok=1
  out=$("$ot" "$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" = 2 ] || bad "ot $*: rc $rc, expected 2"
  grep -qF -- "$want" <<<"$out" || bad "ot $*: no '$want' in: $(head -3 <<<"$out")"
  tally
}
helps() {  # helps CMD... -- FLAG... : --help exits 0 and lists each flag; -h is the same
  local cmd=() out rc
  while [ "$1" != -- ]; do cmd+=("$1"); shift; done
  shift
  ok=1
  out=$("$ot" "${cmd[@]}" --help 2>/dev/null); rc=$?
  [ "$rc" = 0 ] || bad "ot ${cmd[*]} --help: rc $rc"
  for f in "$@"; do grep -qE -- "^  $f( |$)" <<<"$out" || bad "ot ${cmd[*]} --help does not list $f"; done
  [ "$("$ot" "${cmd[@]}" -h 2>/dev/null)" = "$out" ] || bad "ot ${cmd[*]} -h differs from --help"
  tally
}

# generate
m=(--model /nonexistent)
refused "unknown option '--max-token' (did you mean '--max-tokens'?)" generate "${m[@]}" --max-token 5
refused "unknown option '--temprature' (did you mean '--temperature'?)" generate "${m[@]}" --temprature=0
refused "--max-tokens needs a value (an integer in [1, 16777216])" generate "${m[@]}" --max-tokens
refused "--max-tokens '0' is not an integer in [1, 16777216]" generate "${m[@]}" --max-tokens 0
refused "--top-p '1.5' is not a number in [0, 1]" generate "${m[@]}" --top-p=1.5
refused "--top-p must be > 0" generate "${m[@]}" --top-p 0
refused "--seed '-1' is not an unsigned integer" generate "${m[@]}" --seed -1
refused "--weights 'int4' is not one of f32|bf16|int8" generate "${m[@]}" --weights int4
refused "--dtype 'f16' is not one of f32|bf16" generate "${m[@]}" --dtype f16
refused "--quiet takes no value" generate "${m[@]}" --quiet=yes
refused "unexpected argument 'stray'" generate "${m[@]}" stray
refused "give one of --model DIR" generate --prompt hi
helps generate -- --model --checkpoint --quantized --prompt --max-tokens --temperature --top-k --top-p \
  --seed --tokenizer --ids --ignore-eos --dtype --threads --quiet --prompts-file --batch --weights --group \
  --kv-bf16 --kv-mb

# serve
m=(--checkpoint /nonexistent)
refused "unknown option '--prot' (did you mean '--port'?)" serve "${m[@]}" --prot 8080
refused "unknown option '--max-batches' (did you mean '--max-batch'?)" serve "${m[@]}" --max-batches 2
refused "--port needs a value (an integer in [0, 65535])" serve "${m[@]}" --port
refused "--port '70000' is not an integer in [0, 65535]" serve "${m[@]}" --port 70000
refused "--max-header '10' is not an integer in [256, 16777216]" serve "${m[@]}" --max-header 10
refused "--kv-mb '0' is not a number in [0.001, 1e+07]" serve "${m[@]}" --kv-mb 0
refused "give one of --model DIR (Hugging Face) or --checkpoint DIR" serve --port 0
helps serve -- --model --checkpoint --tokenizer --host --port --model-id --max-clients --max-connections \
  --max-batch --weights --group --kv-bf16 --kv-mb --per-request --context --max-tokens --max-body \
  --max-header --head-timeout --timeout --keepalive --dtype --threads --quiet

# prepare
refused "unknown option '--vocab_size' (did you mean '--vocab-size'?)" prepare --vocab_size 300
refused "--vocab-size '3' is not an integer in [257, 16777216]" prepare --vocab-size 3
refused "--val-fraction '0.9' is not a number in [0, 0.5]" prepare --val-fraction 0.9
refused "--corpus needs a value (FILE)" prepare --corpus
refused "--corpus and --out are required" prepare --vocab-size 300
helps prepare -- --corpus --out --vocab-size --tokenizer --val-fraction --shard-tokens --quiet

# tokenize
refused "unknown option '--txt' (did you mean '--text'?)" tokenize --txt hello
refused "unknown option '--decod' (did you mean '--decode'?)" tokenize --decod
refused "--tokenizer needs a value (DIR)" tokenize --tokenizer
helps tokenize -- --tokenizer --text --file --tokens --decode --no-special

# quantize
refused "unknown option '--grop' (did you mean '--group'?)" quantize --grop 32
refused "--group '256' is not an integer in [0, 128]" quantize --group 256
refused "--dtype 'fp8' is not one of int8|bf16" quantize --dtype fp8
refused "--out needs a value (FILE)" quantize --out
refused "--model, --out and --dtype are required" quantize --dtype int8
helps quantize -- --model --out --dtype --group --threads

# train / eval: their own flags in the table, every other --KEY through the training key table
refused "unknown option '--confg' (did you mean '--config'?)" train --confg run.cfg
refused "unknown key 'lrr' (did you mean 'lr'?" train --lrr 1
refused "--config needs a value (FILE)" train --config
refused "--lr needs a value" train --lr
refused "steps '-5' is outside [" train --steps -5
refused "unexpected argument 'stray'" train stray
helps train -- --config --resume --steps --lr --batch-size
refused "unknown option '--splt' (did you mean '--split'?)" eval /nonexistent --splt val
refused "--split 'test' is not one of val|train" eval /nonexistent --split test
refused "--split needs a value (one of val|train)" eval /nonexistent --split
refused "--checkpoint needs a value (DIR)" eval --checkpoint
refused "which checkpoint?" eval --split val
helps eval -- --checkpoint --split

# bench ops
refused "unknown option '--rep' (did you mean '--reps'?)" bench ops --rep 3
refused "--reps '0' is not an integer in [1, 1000]" bench ops --reps 0
refused "--only needs a value (S)" bench ops --only
refused "expected 'ops'" bench opz
helps bench ops -- --quick --reps --only

# info: no flags
refused "unknown option '--hlep' (did you mean '--help'?)" info --hlep
refused "unexpected argument 'x'" info x
helps info --

# average
refused "unknown option '--lats' (did you mean '--last'?)" average --lats 2
refused "--last '65' is not an integer in [1, 64]" average --run x --last 65 --out y
refused "--out is required" average --run x --last 2
refused "--run DIR and --last K are required" average --out y
helps average -- --run --last --checkpoint --out

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
