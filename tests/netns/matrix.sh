#!/usr/bin/env bash
# The MPI equivalence matrix across simulated hosts (not in CI; a few minutes):
#   tests/netns/matrix.sh BUILD_DIR         (as root, from the repository root)
# tests/mpi/mpi_parallel.c trains every layout of its world size (dp, tp, pp, 3D dp2 x tp2 x pp2;
# ZeRO-1, -2, -3, recompute, vocab-parallel, GPipe, bf16, f16, Llama-style) and compares each with
# one process (losses to 1e-5, final weights); here its ranks are spread over hosts (network
# namespaces, tests/netns/hosts.sh) joined by shaped links, started by the rank-table launcher:
#   2 hosts, 10gbit / 50us:  2 ranks (1 per host), 4 ranks (2 per host)
#   4 hosts, 1gbit / 1ms:    4 ranks (1 per host), 8 ranks (2 per host; its step-3 checkpoint
#                            is then resumed by one process)
# Prints one line per row: hosts, ranks, link, the checks passed, seconds. Exit 77 where network
# namespaces cannot be made; 1 when a row fails (its log's end printed).
set -u
trap "exit 1" INT TERM HUP   # so that the EXIT trap removes the hosts
B=$(readlink -f "${1:-build}")
[ -x "$B/mpi_parallel" ] || { echo "usage: tests/netns/matrix.sh BUILD_DIR (with mpi_parallel built)"; exit 2; }
here=$(dirname "$(readlink -f "$0")")
. "$here/../mpi/lib.sh"
H=$here/hosts.sh
export OT_NETDELAY=${OT_NETDELAY:-$B/netdelay}   # the delay where the kernel has no netem
P=${OT_NETNS_PREFIX:-mtest}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_netns_matrix.XXXXXX")
trap 'bash "$H" down --prefix "$P" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0 failed=0

hosts_up() {  # hosts_up N RATE DELAY
  bash "$H" up --prefix "$P" --hosts "$1" --rate "$2" --delay "$3" || exit $?
  link="$2 / $(bash "$H" info --prefix "$P" | sed -n 's/^delay=//p') delay"
}
# row NP PER_HOST [mpi_parallel args]: mpi_parallel on NP ranks, PER_HOST on each host
row() {
  local np=$1 per=$2 name="np$1_per$2_$(bash "$H" info --prefix "$P" | sed -n 's/^hosts=//p')hosts"
  shift 2
  bash "$H" rank-table --prefix "$P" --per-host "$per" >"$tmp/$name.json"
  local t0=$SECONDS
  bash "$H" launch --prefix "$P" "$B/ot" --rank-table "$tmp/$name.json" --out "$tmp/$name.launch" -- \
    "$B/mpi_parallel" "$@" >"$tmp/$name.log" 2>&1
  local rc=$? s=$((SECONDS - t0))
  local ok
  ok=$(grep -cE '^[0-9]+ passed, 0 failed' "$tmp/$name.log")
  check "$name: exit $rc, $ok of $np ranks report no failure" [ $rc = 0 ] && [ "$ok" = "$np" ]
  if [ $rc = 0 ] && [ "$ok" = "$np" ]; then
    echo "ok: $np ranks on $((np / per)) hosts ($per per host), $link: $(grep -m1 -E '^[0-9]+ passed, 0 failed' "$tmp/$name.log") on each rank, $s s"
  else
    grep -E "FAIL|fail|rror" "$tmp/$name.log" | head -20; tail -5 "$tmp/$name.log"
  fi
}

hosts_up 2 10gbit 50us
row 2 1
row 4 2
hosts_up 4 1gbit 1ms
row 4 1
row 8 2 "$tmp/ckpt_step3"
t0=$SECONDS
OMP_NUM_THREADS=1 "$B/mpi_parallel" --resume "$tmp/ckpt_step3" >"$tmp/resume.log" 2>&1
rc=$?
check "the 8-rank checkpoint resumed by one process: exit $rc ($(tail -1 "$tmp/resume.log"))" [ $rc = 0 ]
[ $rc = 0 ] && echo "ok: one process resumes the 8-rank, 4-host checkpoint: $(tail -1 "$tmp/resume.log"), $((SECONDS - t0)) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
