# shellcheck shell=bash
# Shell helpers of the parallel tests (tests/mpi/*.sh, tests/netns/*.sh): `. tests/mpi/lib.sh`.
# (check, has and the counters: tests/lib.sh)

. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # check, has

# losses RUN_DIR: the training losses a run logged, one a line
losses() { grep -o '"loss": [-0-9.e+na]*' "$1/log.jsonl" | cut -d' ' -f2; }
# step_losses RUN_DIR: "STEP LOSS" lines, for exact comparisons (resumed runs)
step_losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([^,]*\),.*/\1 \2/p' "$1/log.jsonl"; }
# loss_diff WANT_DIR GOT_DIR [REL]: "STEP: WANT vs GOT" for each step whose losses differ by more
# than REL (default 1e-6) relative, or that one of the two lacks; nothing when they agree
loss_diff() {
  paste <(losses "$1") <(losses "$2") | awk -v tol="${3:-1e-6}" '{ d = $1 - $2; if (d < 0) d = -d;
    if (NF != 2 || d > tol * ($1 < 0 ? -$1 : $1)) print NR ": " $1 " vs " $2 }'
}
# max_rel_diff WANT_DIR GOT_DIR: the largest relative difference of their losses (%.1e)
max_rel_diff() {
  paste <(losses "$1") <(losses "$2") | awk '{ d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > m) m = d }
    END { printf "%.1e", m }'
}

# ckpt_step RUN_DIR: the step of the run's latest checkpoint (nothing before the first)
ckpt_step() { sed -n 's/.*step_0*\([0-9][0-9]*\).*/\1/p' "$1/latest" 2>/dev/null; }
# wait_ckpt RUN_DIR PID MIN: waits (up to 60 s) until PID has written a checkpoint of step >= MIN;
# fails when PID ended first or the time ran out
wait_ckpt() {
  for _ in $(seq 6000); do
    [ "$(ckpt_step "$1")" -ge "$3" ] 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.01
  done
  return 1
}

# The equivalence rows of the parallel training tests (encdec.sh, vit.sh). The caller sets OT,
# tmp, MPI (the mpirun command), common (the training arguments) and fail().
# layout_losses NAME NP WANT N ARGS...: trains the layout (mpirun -np NP, common + ARGS) into
# $tmp/NAME; returns 0 when its N losses equal those of $tmp/WANT, else fails the row (why) and
# returns 1
layout_losses() {
  local name=$1 np=$2 want="$tmp/$3" n=$4
  shift 4
  local out="$tmp/$name"
  if ! "${MPI[@]}" -np "$np" "$OT" train "${common[@]}" "$@" --out "$out" >"$out.log" 2>&1; then
    tail -5 "$out.log"; fail "$name: the run failed"; return 1
  fi
  local bad
  bad=$(loss_diff "$want" "$out")
  [ "$(losses "$out" | wc -l)" = "$n" ] || bad="$bad (logged $(losses "$out" | wc -l) losses)"
  if [ -n "$bad" ]; then fail "$name: losses differ from one process at steps $bad"; return 1; fi
}
