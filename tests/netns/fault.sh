#!/usr/bin/env bash
# Faults across simulated hosts (not in CI; about a minute):
#   tests/netns/fault.sh OT_BINARY [--rate R] [--delay D]     (as root, from the repository root)
# Two hosts (tests/netns/hosts.sh, 1gbit / 1ms links by default, TCP giving up after 3
# retransmissions), one rank on each, started by the rank-table launcher (`ot launch`); the tiny
# preset, data parallel 2, 300 steps, a checkpoint every 25, --comm-timeout 6:
# 1. kill -9 of the rank on the other host (h2) once a checkpoint of step >= 50 exists: the job
#    ends non-zero within the timeout + 4 s, and mpirun names the rank, its pid and the host;
# 2. h2's link cut (`ip link set eth0 down` in h2): the job ends non-zero within the timeout
#    + 10 s (TCP's give-up after the watchdog), rank 0's watchdog names rank 1 with its
#    coordinates, host and pid as not answering; no process of the job is left on either host
#    (those on the cut-off host end by themselves);
# 3. each broken run resumed from its last checkpoint (link restored) logs exactly the losses of
#    the uninterrupted run.
# Every step prints its time. Exit 77 where network namespaces cannot be made.
set -u
trap "exit 1" INT TERM HUP   # so that the EXIT trap removes the hosts
OT=$(readlink -f "$1")
shift
rate=1gbit delay=1ms
while [ $# -gt 0 ]; do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    *) echo "usage: tests/netns/fault.sh OT_BINARY [--rate R] [--delay D]"; exit 2 ;;
  esac
done
here=$(dirname "$(readlink -f "$0")")
. "$here/../mpi/lib.sh"
H=$here/hosts.sh
export OT_NETDELAY=${OT_NETDELAY:-$(dirname "$OT")/netdelay}   # the delay where the kernel has no netem
P=${OT_NETNS_PREFIX:-ftest}
TIMEOUT=6
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_netns_fault.XXXXXX")
passed=0 failed=0
bash "$H" up --prefix "$P" --hosts 2 --rate "$rate" --delay "$delay" --tcp-retries 3
rc=$?
[ $rc = 77 ] && { rm -rf "$tmp"; exit 77; }
[ $rc = 0 ] || { rm -rf "$tmp"; echo "FAIL: hosts.sh up (exit $rc)"; exit 1; }
trap 'bash "$H" down --prefix "$P"; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

"$OT" prepare --corpus data/shakespeare.txt --out "$tmp/data" --vocab-size 300 --quiet >/dev/null 2>&1 ||
  { echo "FAIL: ot prepare"; exit 1; }
bash "$H" rank-table --prefix "$P" --per-host 1 >"$tmp/table.json"
common=(--model tiny --data "$tmp/data" --vocab-size 300 --max-seq 64 --seq-len 64 --batch-size 8 --grad-accum 2
        --data-parallel 2 --steps 300 --save-every 25 --eval-every 0 --comm-timeout "$TIMEOUT" --quiet)
train() {  # train OUT [ot train args]: through the rank-table launcher, across the hosts
  local out=$1
  shift
  bash "$H" launch --prefix "$P" "$OT" --rank-table "$tmp/table.json" --out "$out.launch" -- \
    train "${common[@]}" --out "$out" "$@"
}
# the processes left in the hosts' namespaces (pid and name)
left() { for k in 1 2; do for p in $(ip netns pids "$P-h$k"); do echo "$P-h$k: $p $(cat /proc/$p/comm 2>/dev/null)"; done; done; }

t0=$(date +%s%N)
train "$tmp/full" >"$tmp/full.log" 2>&1 || { tail -20 "$tmp/full.log"; echo "FAIL: uninterrupted run"; exit 1; }
echo "uninterrupted run across 2 hosts: $(ms "$t0") ms"

# broken NAME: starts a run, waits for a checkpoint >= 50, breaks it by $break_it (run with the
# rank on h2's pid in $victim); sets took (ms) and rc
broken() {
  local out=$tmp/$1
  train "$out" >"$out.log" 2>&1 &
  local job=$!
  if ! wait_ckpt "$out" $job 50; then
    kill $job 2>/dev/null; tail -20 "$out.log"; echo "FAIL: $1: no checkpoint >= 50 while the job ran"; exit 1
  fi
  victim=""
  for p in $(ip netns pids "$P-h2"); do [ "$(cat /proc/$p/comm 2>/dev/null)" = ot ] && victim=$p; done
  [ -n "$victim" ] || { echo "FAIL: $1: no rank process on $P-h2"; exit 1; }
  local t
  t=$(date +%s%N)
  $break_it
  wait $job
  rc=$?
  took=$(ms "$t")
  echo "$1: checkpoint at step $(ckpt_step "$out"), broken: exit $rc after $took ms"
}

# 1. kill -9 of the rank on h2
kill_victim() { kill -9 "$victim"; }
break_it=kill_victim
broken kill
check "kill: non-zero exit" [ $rc != 0 ]
check "kill: ended in $took ms (timeout $TIMEOUT s + 4)" [ "$took" -lt $(( (TIMEOUT + 4) * 1000 )) ]
check "kill: mpirun names rank 1, its pid and host $P-h2: $(grep -m1 'exited on signal' "$tmp/kill.log")" \
  has "process rank 1 with PID $victim on node $P-h2 exited on signal 9" "$tmp/kill.log"
sleep 1
check "kill: no process of the job left: $(left | tr '\n' ' ')" [ -z "$(left)" ]

# 2. h2's link cut
cut_link() { bash "$H" link-down --prefix "$P" 2; }
break_it=cut_link
broken cut
check "link cut: non-zero exit" [ $rc != 0 ]
check "link cut: ended in $took ms (timeout $TIMEOUT s + 10)" [ "$took" -lt $(( (TIMEOUT + 10) * 1000 )) ]
named="rank 1 (dp 1, tp 0, pp 0, host $P-h2, pid $victim, silent for"
check "link cut: the watchdog names $named ...: $(grep -m1 'did not complete' "$tmp/cut.log")" \
  grep -q "stopped answering (no heartbeat: .*): $named" "$tmp/cut.log"
grep -m1 -A1 'did not complete' "$tmp/cut.log" | sed 's/^ */  message: /'
for _ in $(seq 100); do [ -z "$(left)" ] && break; sleep 0.1; done
check "link cut: no process of the job left (h2's end by themselves): $(left | tr '\n' ' ')" [ -z "$(left)" ]
bash "$H" link-up --prefix "$P" 2

# 3. resumed runs repeat the uninterrupted losses exactly
full=$(step_losses "$tmp/full")
[ "$(wc -l <<<"$full")" = 300 ] || { echo "FAIL: the uninterrupted log has $(wc -l <<<"$full") losses"; exit 1; }
for name in kill cut; do
  at=$(ckpt_step "$tmp/$name")
  t0=$(date +%s%N)
  train "$tmp/$name" --resume "$tmp/$name" >"$tmp/$name.resume.log" 2>&1
  rc=$?
  check "$name: resumed run exits 0 (rc $rc; $(tail -2 "$tmp/$name.resume.log" | tr '\n' ' '))" [ $rc = 0 ]
  resumed=$(step_losses "$tmp/$name")
  check "$name: resumed from step $at, the losses of all 300 steps equal the uninterrupted run's" \
    [ "$resumed" = "$full" ]
  echo "$name: resumed from step $at in $(ms "$t0") ms"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
