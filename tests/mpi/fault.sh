#!/usr/bin/env bash
# Faults in a parallel run (CTest mpi_fault): `tests/mpi/fault.sh OT_BINARY`.
# 1. kill -9 of one rank mid-training: the job ends non-zero within the
#    communication timeout with a message naming the rank;
# 2. a rank that stops answering (SIGSTOP): the other's watchdog ends the job
#    within the timeout + a few seconds with a message naming the operation and
#    the stopped rank (world rank, coordinates, host, pid); once mpirun returns
#    the stopped rank is gone (not even a zombie) and no process of the job is
#    alive (after either fault);
# 3. resuming the killed run from its last checkpoint gives exactly the
#    uninterrupted run's losses (same layout and threads: bitwise).
set -u
OT=$(readlink -f "$1")
TIMEOUT=6
tmp=$(mktemp -d /tmp/ot_fault_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/lib.sh"
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np 2)
"$OT" prepare --corpus data/shakespeare.txt --out "$tmp/data" --vocab-size 300 --quiet >/dev/null ||
  fail "ot prepare"
# long enough steps (~10 ms) that the poll below sees a checkpoint while the job runs
common=(--model tiny --data "$tmp/data" --vocab-size 300 --max-seq 64 --seq-len 64 --batch-size 8 --grad-accum 2
        --data-parallel 2 --steps 300 --save-every 25 --eval-every 0 --comm-timeout $TIMEOUT --quiet)

# the uninterrupted run
"${MPI[@]}" "$OT" train "${common[@]}" --out "$tmp/full" >/dev/null 2>&1 || fail "uninterrupted run"

# start a run, wait for a checkpoint at step 50 or later, then break one rank with signal $2
broken_run() {
  local out=$1 sig=$2
  "${MPI[@]}" "$OT" train "${common[@]}" --out "$out" >"$out.log" 2>&1 &
  local job=$!
  wait_ckpt "$out" $job 50
  local at
  at=$(ckpt_step "$out")
  [ "$at" -ge 50 ] 2>/dev/null && [ "$at" -lt 300 ] && kill -0 $job 2>/dev/null ||
    { kill -9 $job 2>/dev/null; tail -20 "$out.log"; fail "$out: no checkpoint in [50, 300) while the job ran (latest: ${at:-none})"; }
  echo "checkpoint at step $at"
  victim=$(pgrep -P $job -f "ot train" | tail -1)
  [ -n "$victim" ] || fail "no rank process under mpirun $job"
  vrank=$(tr '\0' '\n' <"/proc/$victim/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  local t0=$(date +%s%N)
  kill -"$sig" "$victim"
  wait $job
  local rc=$?
  local took=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "signal $sig to rank $vrank (pid $victim): exit $rc after $took ms"
  [ $rc -ne 0 ] || fail "the job exited 0 after SIG$sig"
  [ $took -lt $(( (TIMEOUT + 4) * 1000 )) ] || fail "the job took $took ms to end (timeout $TIMEOUT s)"
  # mpirun may leave a rank it killed itself as a zombie for PID 1 to reap: dead, not alive
  local left
  left=$(pgrep -a -f "$out" | grep -v "^$$ ")
  [ -z "$left" ] || { echo "$left"; kill -9 $(echo "$left" | cut -d' ' -f1) 2>/dev/null; fail "processes of the job outlived mpirun"; }
}

broken_run "$tmp/kill" 9
grep -q -E "exited on signal 9|rank .* did not complete" "$tmp/kill.log" ||
  { cat "$tmp/kill.log"; fail "no message naming the killed rank"; }
echo "message: $(grep -m1 -E "exited on signal 9|did not complete" "$tmp/kill.log")"

broken_run "$tmp/stop" STOP
grep -q "did not complete within $TIMEOUT s" "$tmp/stop.log" ||
  { cat "$tmp/stop.log"; fail "no watchdog message for the stopped rank"; }
stopped="rank $vrank (dp $vrank, tp 0, pp 0, host $(hostname), pid $victim, silent for"
grep -q "stopped answering (no heartbeat: stopped, hung, swapped out, or its host unreachable): $stopped" "$tmp/stop.log" ||
  { cat "$tmp/stop.log"; fail "the message does not name the stopped $stopped ...)"; }
echo "message: $(grep -m1 "did not complete" "$tmp/stop.log")"
echo "         $(grep -m1 "stopped answering" "$tmp/stop.log" | sed 's/^ *//')"
if st=$(ps -o stat=,ppid= -p "$victim"); then
  kill -9 "$victim" 2>/dev/null
  fail "the stopped rank (pid $victim) outlived mpirun (state, parent: $st)"
fi
echo "the stopped rank is gone and no process of the job is alive"

# resume the killed run; its steps after the checkpoint equal the uninterrupted run's
"${MPI[@]}" "$OT" train "${common[@]}" --out "$tmp/kill" --resume "$tmp/kill" >/dev/null 2>&1 ||
  fail "resumed run"
resumed=$(step_losses "$tmp/kill")
full=$(step_losses "$tmp/full")
[ -n "$full" ] || fail "no losses in the uninterrupted log"
[ "$resumed" = "$full" ] || { diff <(echo "$full") <(echo "$resumed") | head; fail "resumed losses differ"; }
echo "resumed run: the losses of all 300 steps equal the uninterrupted run ($(cat "$tmp/kill/latest"))"
echo "1 passed, 0 failed"
