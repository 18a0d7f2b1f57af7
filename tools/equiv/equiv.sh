#!/usr/bin/env bash
# Bit-for-bit equivalence of two revisions of ops-transformer.
#
#   tools/equiv/equiv.sh OLD_REV [NEW]
#
# OLD_REV is any git revision; NEW is a revision, or a directory holding a git
# working tree (its tracked and untracked, not ignored files); default: this
# working tree. Each side is copied to a temporary directory and built with its
# own CMakeLists.txt (Release, -j2, only the targets `ot` (the library) and
# `ot_cli` (the `ot` command)); tools/equiv/probe.c from THIS checkout is compiled
# against each side's include/ and libot.a, so both run the same probe. Then,
# on each side:
#   probe single        f32 / bf16 training losses, grad norms and final weights of
#                       the GPT-2 and Llama families in every recompute mode with
#                       grad-accum, the data loader and resume; KV-cache greedy
#                       decoding (tokens + logits' bits); the sampler on crafted
#                       logits (ties, 1-ulp leads, NaN); the batched engine with
#                       f32 / bf16 / int8 (per group, per row) weights  (OMP_NUM_THREADS=2)
#   probe mpi           the parallel matrix of tests/mpi/mpi_parallel.c (dp2, tp2, pp2,
#                       dp2xtp2, dp2xpp2, tp2xpp2, dp2xtp2xpp2; ZeRO-1/2, recompute,
#                       vocab-parallel, more micro-batches, GPipe, no overlap, bf16,
#                       Llama-style), each against the same layout  (mpirun, 1 thread per rank)
#   ot train            log.jsonl (minus timings) and the checkpoint's tensors
#   ot generate         greedy / sampled stdout, --dtype f32 and bf16, --batch with
#                       --weights f32 / bf16 / int8 (per group, per row), --kv-bf16,
#                       --quantized; all from checkpoints the OLD build trained
# Every record is "<case> ...": the outputs are compared case by case, printing
# "same" or "DIFFERENT" with the first differing line. Exit status: 0 when every
# case is the same, 1 when any differs, 2 when a build, the probe or a command failed.
# Needs: git, cmake, a C compiler, oneDNN, OpenMP, Open MPI (mpicc, mpirun), awk.
# Takes about 300 s of CPU time, most of it the two builds (5 minutes on 2 quiet
# cores, more on a busy machine). EQUIV_KEEP=1 keeps the temporary directory (its
# path is printed); JOBS sets the build parallelism (default 2).
# The harness relies only on CMakeLists.txt building the targets `ot` and `ot_cli`
# and on the public headers in include/ot/, not on where sources live in src/.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
case "$1" in -h|--help) usage ;; esac

here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
old_rev=$1
new_arg=${2:-$repo}
jobs=${JOBS:-2}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_equiv.XXXXXX")
if [ "${EQUIV_KEEP:-0}" = 1 ]; then trap 'echo "kept $tmp"' EXIT; else trap 'rm -rf "$tmp"' EXIT; fi
mpirun_args=(--oversubscribe -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && mpirun_args+=(--allow-run-as-root)

log() { printf '[%4d s] %s\n' "$SECONDS" "$*"; }
die() { printf 'equiv: %s\n' "$*" >&2; exit 2; }

# ------------------------------------------------------------- sources ---
# A git revision -> dst (git archive).
export_rev() {
  mkdir -p "$2"
  git -C "$repo" archive --format=tar "$1" | tar -x -C "$2"
}
# A working tree -> dst: tracked files that exist and untracked files that are not ignored.
export_tree() {
  mkdir -p "$2"
  (cd "$1" && git ls-files -z -co --exclude-standard |
     while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
     tar --null -T - -cf -) | tar -x -C "$2"
}
describe() {   # what a side is, for the report
  if [ -d "$1" ]; then
    local head dirty
    head=$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo '?')
    dirty=$(git -C "$1" status --porcelain 2>/dev/null | wc -l)
    echo "working tree $1 (HEAD $head, $dirty changed/untracked paths)"
  else
    echo "revision $1 ($(git -C "$repo" rev-parse --short "$1^{commit}"))"
  fi
}

is_rev() { git -C "$repo" rev-parse --verify -q "$1^{commit}" >/dev/null; }
is_rev "$old_rev" || die "OLD_REV '$old_rev' is not a revision of $repo"
if [ -d "$new_arg" ]; then
  git -C "$new_arg" rev-parse --show-toplevel >/dev/null 2>&1 || die "NEW '$new_arg' is not a git working tree"
else
  is_rev "$new_arg" || die "NEW '$new_arg' is neither a revision of $repo nor a directory"
fi
cp "$here/probe.c" "$tmp/probe.c"   # one snapshot for both sides
log "old: $(describe "$old_rev")"
log "new: $(describe "$new_arg")"
export_rev "$old_rev" "$tmp/old/src"
if [ -d "$new_arg" ]; then
  export_tree "$new_arg" "$tmp/new/src"
else
  export_rev "$new_arg" "$tmp/new/src"
fi

# --------------------------------------------------------------- build ---
if command -v mpicc >/dev/null; then cc_mpi=(mpicc); else cc_mpi=(cc $(pkg-config --cflags ompi-c)); fi
mpi_libs=()
command -v mpicc >/dev/null || mpi_libs=($(pkg-config --libs ompi-c))

build_side() {   # side: library + CLI with the side's CMake, then the probe against them
  local d=$tmp/$1 t0=$SECONDS
  if ! { cmake -S "$d/src" -B "$d/build" -DCMAKE_BUILD_TYPE=Release &&
         cmake --build "$d/build" -j"$jobs" --target ot ot_cli; } >"$d/build.log" 2>&1; then
    tail -n 30 "$d/build.log" >&2
    die "$1: build failed (log: $d/build.log)"
  fi
  local lib cli
  lib=$(find "$d/build" -name libot.a -type f | head -n 1)
  cli=$(find "$d/build" -name ot -type f -perm -u+x | head -n 1)
  [ -n "$lib" ] && [ -n "$cli" ] || die "$1: no libot.a or ot executable under $d/build"
  ln -s "$cli" "$d/ot"
  "${cc_mpi[@]}" -O2 -std=gnu11 -Wall -Wextra -fopenmp -I"$d/src/include" "$tmp/probe.c" "$lib" \
    -ldnnl "${mpi_libs[@]}" -lm -lpthread -o "$d/probe" 2>"$d/probe.log" ||
    { cat "$d/probe.log" >&2; die "$1: the probe does not compile against it"; }
  log "$1: built in $((SECONDS - t0)) s"
}
build_side old
build_side new

# ---------------------------------------------------------------- runs ---
# Runs a command and appends its stdout to $out, each line prefixed by the case
# name (-raw: as it is, i.e. the probe's own records; -status: not at all, for
# output with timings, kept in $out.<case>.log) and this side's directory
# written SIDE, then the record "<case> exit N". stderr goes to ${out%.txt}.err.
run_case() {   # [-raw|-status] out case cmd...
  local raw=0 status=0 rc=0
  [ "$1" = -raw ] && { raw=1; shift; }
  [ "$1" = -status ] && { status=1; shift; }
  local out=$1 c=$2
  shift 2
  timeout 600 "$@" >"$out.tmp" 2>>"${out%.txt}.err" || rc=$?
  [ $status = 0 ] || { mv "$out.tmp" "$out.$c.log"; : >"$out.tmp"; }
  awk -v p="$c " -v raw=$raw -v o="$tmp/old/" -v n="$tmp/new/" '{
      while ((i = index($0, o)) > 0) $0 = substr($0, 1, i - 1) "SIDE/" substr($0, i + length(o))
      while ((i = index($0, n)) > 0) $0 = substr($0, 1, i - 1) "SIDE/" substr($0, i + length(n))
      print (raw ? "" : p) $0 }' "$out.tmp" >>"$out"
  echo "$c exit $rc" >>"$out"
  rm -f "$out.tmp"
}

# One checkpoint per family, trained by the OLD build on the bundled corpus.
data=$tmp/data
corpus=$tmp/old/src/data/shakespeare.txt
[ -f "$corpus" ] || corpus=$repo/data/shakespeare.txt
gpt2_flags=(--model tiny --seq-len 16 --max-seq 64 --steps 60 --eval-every 20 --eval-batches 2
            --print-every 20 --lr 1e-2)
llama_flags=("${gpt2_flags[@]}" --names llama --norm rmsnorm --activation swiglu --positions rope
             --kv-heads 2 --d-ff 64 --no-tied --no-bias --dtype bf16 --recompute selective --grad-accum 2)

cli_train() {   # side family out: ot train + its log (no timings) + the checkpoint's tensors
  local d=$tmp/$1 fam=$2 dir=$3 out=$tmp/$1/cli.txt
  local -n fl=${2}_flags
  run_case -status "$out" "cli.train.$fam" env OMP_NUM_THREADS=2 "$d/ot" train "${fl[@]}" --data "$data" --out "$dir"
  sed -E 's/"(tok_per_s|mfu|time_s|mem_mib)": [^,}]*(, )?//g; s/^/cli.train.'"$fam"' log /' \
    "$dir/log.jsonl" >>"$out" 2>/dev/null || echo "cli.train.$fam ERROR no log.jsonl" >>"$out"
  local ck
  ck=$dir/$(cat "$dir/latest" 2>/dev/null)
  "$d/probe" st "cli.train.$fam" "$ck/model.safetensors" "$ck/optimizer.safetensors" >>"$out" 2>>"$d/cli.err" ||
    echo "cli.train.$fam ERROR checkpoint tensors" >>"$out"
}

cli_side() {   # side: ot train on its own, ot generate / quantize from the OLD checkpoints
  local s=$1 d=$tmp/$1 out=$tmp/$1/cli.txt
  : >"$out"
  for fam in gpt2 llama; do cli_train "$s" "$fam" "$d/train-$fam"; done
  for fam in gpt2 llama; do
    local ck=$tmp/old/train-$fam c="cli.gen.$fam"
    local g=(env OMP_NUM_THREADS=2 "$d/ot" generate --checkpoint "$ck" --max-tokens 40)
    local ids=(--ids --prompt "1 2 3 4 5")
    run_case "$out" "$c.greedy.f32" "${g[@]}" "${ids[@]}" --temperature 0 --dtype f32
    run_case "$out" "$c.greedy.bf16" "${g[@]}" "${ids[@]}" --temperature 0 --dtype bf16
    run_case "$out" "$c.sampled.f32" "${g[@]}" "${ids[@]}" --temperature 0.8 --top-k 20 --seed 7
    run_case "$out" "$c.text.f32" "${g[@]}" --prompt "ROMEO:" --temperature 0
    local b=("${g[@]}" --ids --prompt "1 2 3" --prompt "7 8 9 10 11" --prompt "42" --prompt "5 6"
             --batch 3 --temperature 0)
    run_case "$out" "$c.batch.f32" "${b[@]}" --weights f32
    run_case "$out" "$c.batch.bf16" "${b[@]}" --weights bf16
    run_case "$out" "$c.batch.int8g32" "${b[@]}" --weights int8 --group 32
    run_case "$out" "$c.batch.int8row" "${b[@]}" --weights int8 --group 0
    run_case "$out" "$c.batch.f32_kvbf16" "${b[@]}" --weights f32 --kv-bf16
    run_case "$out" "$c.batch.sampled" "${g[@]}" --ids --prompt "3 1 4" --batch 3 --temperature 0.8 --seed 9
    local q=$d/$fam-int8.safetensors
    run_case -status "$out" "$c.quantize" env OMP_NUM_THREADS=2 "$d/ot" quantize --model "$ck" --out "$q" \
      --dtype int8 --group 32
    "$d/probe" st "$c.quantize" "$q" >>"$out" 2>>"$d/cli.err" || echo "$c.quantize ERROR tensors" >>"$out"
    run_case "$out" "$c.quantized" env OMP_NUM_THREADS=2 "$d/ot" generate --quantized "$q" --max-tokens 40 \
      "${ids[@]}" --prompt "9 8" --temperature 0
  done
}

run_side() {
  local s=$1 d=$tmp/$1 t0=$SECONDS
  mkdir -p "$d/run"
  run_case -raw "$d/single.txt" probe.single env OMP_NUM_THREADS=2 "$d/probe" single --tmp "$d/run"
  local t1=$SECONDS
  for spec in "2:2x1x1 1x2x1 1x1x2" "4:2x2x1 2x1x2 1x2x2" "8:2x2x2"; do
    # shellcheck disable=SC2086
    run_case -raw "$d/mpi.txt" "probe.mpi.np${spec%%:*}" env OMP_NUM_THREADS=1 \
      mpirun "${mpirun_args[@]}" -np "${spec%%:*}" "$d/probe" mpi --tmp "$d/run" ${spec#*:}
  done
  local t2=$SECONDS
  cli_side "$s"
  log "$s: probe single $((t1 - t0)) s, probe mpi $((t2 - t1)) s, cli $((SECONDS - t2)) s"
}

t0=$SECONDS
"$tmp/old/ot" prepare --corpus "$corpus" --out "$data" --vocab-size 512 --quiet >"$tmp/prepare.log" 2>&1 ||
  { cat "$tmp/prepare.log" >&2; die "old: ot prepare failed"; }
run_side old
run_side new
log "runs done in $((SECONDS - t0)) s"

# ------------------------------------------------------------- compare ---
n_same=0 n_diff=0 failed=0
# The first line where files $1 and $2 differ.
first_diff() {
  awk -v A="$1" -v B="$2" 'BEGIN {
    for (i = 1; ; i++) {
      ra = (getline la < A) > 0; rb = (getline lb < B) > 0
      if (!ra && !rb) exit
      if (!ra) la = "(no line)"; if (!rb) lb = "(no line)"
      if (ra != rb || la != lb) { printf "      line %d\n      old: %s\n      new: %s\n", i, la, lb; exit }
    }
  }'
}
compare() {   # what: old/$what.txt vs new/$what.txt, case by case (cases in order of appearance)
  local a=$tmp/old/$1.txt b=$tmp/new/$1.txt c
  echo "== $1"
  while IFS= read -r c; do
    awk -v c="$c" '$1 == c' "$a" >"$tmp/a.case"
    awk -v c="$c" '$1 == c' "$b" >"$tmp/b.case"
    if cmp -s "$tmp/a.case" "$tmp/b.case"; then
      n_same=$((n_same + 1))
      printf '  same       %-40s %5d lines\n' "$c" "$(wc -l <"$tmp/a.case")"
    else
      n_diff=$((n_diff + 1))
      printf '  DIFFERENT  %-40s %5d vs %d lines\n' "$c" "$(wc -l <"$tmp/a.case")" "$(wc -l <"$tmp/b.case")"
      first_diff "$tmp/a.case" "$tmp/b.case"
    fi
  done < <(awk '!seen[$1]++ { print $1 }' "$a" "$b")
  # a failure on either side proves nothing, even when both failed alike
  local bad
  bad=$(grep -hE '^[^ ]+ (ERROR |exit [1-9])' "$a" "$b" | head -n 5 || true)
  if [ -n "$bad" ]; then failed=1; printf '  FAILED runs:\n%s\n' "$(sed 's/^/    /' <<<"$bad")"; fi
}
compare single
compare mpi
compare cli
echo "cases: $n_same same, $n_diff DIFFERENT$([ $failed = 1 ] && echo '; some runs FAILED (see above)')"
log "total $SECONDS s"
[ $failed = 0 ] || exit 2
[ $n_diff = 0 ] || exit 1
