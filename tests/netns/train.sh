#!/usr/bin/env bash
# Training across simulated hosts (CTest netns_train): `tests/netns/train.sh OT_BINARY` (from the
# repository root). Two hosts (network namespaces, tests/netns/hosts.sh) joined by 10gbit / 50us
# links, one rank on each, Open MPI over TCP between them; the tiny preset for 4 steps:
# 1. dp2 started by the rank-table launcher (`ot launch`, a 2-server table) and pp2 by mpirun:
#    Open MPI's map puts one rank on each host, and every step's loss equals one process's on
#    the same global batch (2 micro-batches) to 1e-6 relative;
# 2. the processes of both hosts ran with their hosts' names, and nothing is left after `down`.
# Exit 77 (CTest SKIP_RETURN_CODE) where network namespaces cannot be made (not root, no iproute2).
set -u
trap "exit 1" INT TERM HUP   # so that the EXIT trap removes the hosts
OT=$(readlink -f "$1")
here=$(dirname "$(readlink -f "$0")")
. "$here/../mpi/lib.sh"
H=$here/hosts.sh
export OT_NETDELAY=${OT_NETDELAY:-$(dirname "$OT")/netdelay}   # the delay where the kernel has no netem
P=${OT_NETNS_PREFIX:-cttrain}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_netns_train.XXXXXX")
passed=0 failed=0
bash "$H" up --prefix "$P" --hosts 2 --rate 10gbit --delay 50us
rc=$?
[ $rc = 77 ] && { rm -rf "$tmp"; exit 77; }
[ $rc = 0 ] || { rm -rf "$tmp"; echo "FAIL: hosts.sh up (exit $rc)"; exit 1; }
trap 'bash "$H" down --prefix "$P"; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT

"$OT" prepare --corpus data/shakespeare.txt --out "$tmp/data" --vocab-size 300 --quiet >/dev/null 2>&1 ||
  { echo "FAIL: ot prepare"; exit 1; }
common=(--model tiny --data "$tmp/data" --vocab-size 300 --max-seq 64 --seq-len 64 --batch-size 4 --steps 4
        --eval-every 0 --print-every 1)
OMP_NUM_THREADS=1 "$OT" train "${common[@]}" --grad-accum 2 --out "$tmp/ref" >"$tmp/ref.log" 2>&1 ||
  { tail -5 "$tmp/ref.log"; echo "FAIL: the one-process reference"; exit 1; }

# same NAME: the run's losses equal the reference's, and Open MPI placed one rank on each host
same() {
  local name=$1 rc=$2 log=$tmp/$1.log
  check "$name: exit 0 (rc $rc; $(tail -2 "$log" | tr '\n' ' '))" [ "$rc" = 0 ]
  [ "$rc" = 0 ] || return
  local bad
  bad=$(loss_diff "$tmp/ref" "$tmp/$name")
  check "$name: losses equal one process's (differ at steps: $bad)" [ -z "$bad" ]
  [ -z "$bad" ] && echo "ok: $name across 2 hosts: 4 losses equal one process's (largest relative difference $(max_rel_diff "$tmp/ref" "$tmp/$name"))"
  check "$name: one rank on $P-h1 and one on $P-h2 (Open MPI's map)" \
    [ "$(grep -cE "Data for node: $P-h[12][[:space:]]+Num slots: 1[[:space:]]+Max slots: 0[[:space:]]+Num procs: 1" "$log")" = 2 ]
}

bash "$H" rank-table --prefix "$P" --per-host 1 >"$tmp/table.json"
bash "$H" launch --prefix "$P" "$OT" --rank-table "$tmp/table.json" --out "$tmp/launch" \
  --mpirun-arg=--display-map -- train "${common[@]}" --data-parallel 2 --out "$tmp/dp2" >"$tmp/dp2.log" 2>&1
same dp2 $?
check "dp2: the launcher read the table: 2 ranks on 2 hosts" has "ot launch: 2 ranks on 2 hosts" "$tmp/dp2.log"

bash "$H" mpirun --prefix "$P" -np 2 --map-by node --display-map \
  "$OT" train "${common[@]}" --pipeline-stages 2 --grad-accum 2 --out "$tmp/pp2" >"$tmp/pp2.log" 2>&1
same pp2 $?

out=$(bash "$H" mpirun --prefix "$P" -np 2 --map-by node hostname 2>&1)
names=$(grep -E "^$P-h[0-9]+\$" <<<"$out" | sort | tr '\n' ' ')
check "the ranks' hostnames are the hosts' (got: $out)" [ "$names" = "$P-h1 $P-h2 " ]

trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
bash "$H" down --prefix "$P"
check "down: no namespace of $P left" [ -z "$(ip netns list | grep "^$P-")" ]
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
