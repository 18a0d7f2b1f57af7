#!/usr/bin/env bash
# The watchdog names the rank that stopped answering (CTest mpi_watchdog):
# `tests/mpi/watchdog.sh MPI_WATCHDOG_BINARY` runs tests/mpi/mpi_watchdog.c's
# scenarios on 4 ranks (a 2 x 2 grid) and reads the watchdog's messages.
# 1. stop: rank 3 stops (SIGSTOP); rank 2 waits for it, ranks 0 and 1 wait for
#    ranks 2 and 3. Every message names rank 3 (its coordinates, host and pid)
#    and no other rank as stopped; ranks that wait are named alive; the job ends
#    within a few seconds of the timeout; once mpirun returns the stopped rank is
#    gone and no process of the job is alive.
# 2. deadlock: rank 3 is alive outside MPI while the others wait: no rank is
#    accused, rank 3 is named as not in a communication.
# 3. slow: rank 3 joins 2.5 s late with a 1 s timeout: every rank answers the
#    heartbeat meanwhile, so the job completes (exit 0), with no message.
# 4. left: rank 3 has left MPI while the others wait: named as having left.
# 5. layout: the start-up check says "but 1 was started" / "but 2 were started".
set -u
BIN=$(readlink -f "$1")
tmp=$(mktemp -d /tmp/ot_watchdog_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
host=$(hostname)
# a live (not zombie) process whose command line holds the scenario
alive() { ps -eo stat=,args= | awk -v s="mpi_watchdog $1" '$1 !~ /^Z/ && index($0, s) && !/awk/'; }

# runs scenario $1 on 4 ranks into $tmp/$1.log; sets rc and ms
run() {
  local t0=$(date +%s%N)
  "${MPI[@]}" -np 4 "$BIN" "$1" >"$tmp/$1.log" 2>&1
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "$1: exit $rc after $ms ms"
}

run stop
log=$tmp/stop.log
[ $rc -ne 0 ] || { cat "$log"; fail "stop: the job exited 0 with a stopped rank"; }
[ $ms -lt 12000 ] || { cat "$log"; fail "stop: the job took $ms ms to end (timeout 2 s)"; }
n=$(grep -c "did not complete within 2 s" "$log")
[ "$n" -ge 1 ] || { cat "$log"; fail "stop: no watchdog message"; }
stale=$(grep "stopped answering (no heartbeat" "$log")
[ "$(echo "$stale" | grep -c .)" -eq "$n" ] || { cat "$log"; fail "stop: a watchdog message names no stopped rank"; }
echo "$stale" | grep -v -q "rank 3 (dp 1, tp 1, pp 0, host $host, pid [0-9]*, silent for [0-9.]* s);\$" &&
  { cat "$log"; fail "stop: a message accuses another rank than rank 3, or lacks its coordinates / host / pid"; }
grep "alive, waiting themselves" "$log" | grep -q "rank 3 " && { cat "$log"; fail "stop: rank 3 named alive"; }
# rank 2 waits for rank 3: named alive and waiting by rank 0 or 1, or (when its own
# message ends the job before theirs) the rank that reports the wait itself
grep -q "alive, waiting themselves:.*rank 2 (dp 1, tp 0, pp 0, [0-9.]* s in: test tensor-parallel all-reduce)" "$log" ||
  grep -q "^ot: rank 2 (dp 1, tp 0, pp 0): test tensor-parallel all-reduce did not complete within 2 s" "$log" ||
  { cat "$log"; fail "stop: rank 2 (waiting for rank 3) is neither named as alive and waiting nor reports the wait"; }
pid=$(echo "$stale" | sed -n '1s/.*pid \([0-9]*\),.*/\1/p')
ps -o pid=,stat=,ppid= -p "$pid" >"$tmp/ps" && { cat "$log" "$tmp/ps"; fail "stop: the stopped rank (pid $pid) outlived mpirun"; }
[ -z "$(alive stop)" ] || { alive stop; fail "stop: processes of the job are alive after mpirun returned"; }
echo "stop: $n messages, each naming rank 3 only: $(echo "$stale" | head -1 | sed 's/^ *//')"
echo "stop: the stopped rank (pid $pid) is gone, no process of the job is alive"

run deadlock
log=$tmp/deadlock.log
[ $rc -ne 0 ] || { cat "$log"; fail "deadlock: the job exited 0"; }
grep -q "no rank stopped answering the heartbeat" "$log" || { cat "$log"; fail "deadlock: no 'no rank stopped' message"; }
grep -q "stopped answering (no heartbeat" "$log" && { cat "$log"; fail "deadlock: a live rank was accused"; }
grep -q "alive, not in a communication (computing, or stuck outside MPI): rank 3 (dp 1, tp 1, pp 0)" "$log" ||
  { cat "$log"; fail "deadlock: rank 3 (outside MPI) is not named"; }
[ -z "$(alive deadlock)" ] || { alive deadlock; fail "deadlock: processes of the job are alive after mpirun returned"; }
echo "deadlock: every message says no rank stopped and names rank 3 as outside communication"

run slow
log=$tmp/slow.log
[ $rc -eq 0 ] && [ "$(grep -c "slow: the all-reduce completed" "$log")" -eq 4 ] && ! grep -q "did not complete" "$log" ||
  { cat "$log"; fail "slow: a rank 2.5 s late that answers the heartbeat ended the job"; }
echo "slow: the late rank's all-reduce completed on every rank"

run left
log=$tmp/left.log
[ $rc -ne 0 ] || { cat "$log"; fail "left: the job exited 0"; }
grep -q "left the job before this operation (it ended or failed): rank 3 (dp 1, tp 1, pp 0, host $host, pid [0-9]*)" "$log" ||
  { cat "$log"; fail "left: rank 3 is not named as having left"; }
grep -q "stopped answering (no heartbeat" "$log" && { cat "$log"; fail "left: a rank was accused of not answering"; }
[ -z "$(alive left)" ] || { alive left; fail "left: processes of the job are alive after mpirun returned"; }
echo "left: rank 3 is named as having left"

for np in 1 2; do
  "${MPI[@]}" -np $np "$BIN" layout >"$tmp/layout.log" 2>&1 || { cat "$tmp/layout.log"; fail "layout on $np ranks"; }
done
echo "layout: \"but 1 was started\", \"but 2 were started\""
echo "1 passed, 0 failed"
