#!/usr/bin/env bash
# `ot launch` (CTest mpi_launch): `tests/mpi/launch.sh OT_BINARY` (from the repository root).
# 1. --dry-run of an 8-device, 2-server MindSpore rank table: the hostfile (each
#    server with 4 slots, in rank order) and the mpirun command (binding,
#    OMP_NUM_THREADS, the ot command with its arguments); an interleaved table
#    writes a rankfile; a plain --hostfile is used as it is;
# 2. refusals: a table with a duplicate rank (rc 2, the file and the rank named),
#    no table, no command, --np against the table;
# 3. a real launch on localhost: a 2-device rank table runs `ot train` of the
#    tiny preset for 2 steps with --data_parallel 2 under mpirun (a few seconds).
set -u
OT=$(readlink -f "$1")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_mpi_launch.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0 failed=0
. "$(dirname "$0")/lib.sh"

# 1. dry runs
dev() { printf '{"device_id": "%s", "device_ip": "192.%s.27.6", "rank_id": "%s"}' "$1" "$1" "$2"; }
cat >"$tmp/rank_table_8pcs.json" <<EOF
{"version": "1.0", "server_count": "2", "status": "completed",
 "server_list": [
  {"server_id": "10.0.0.1", "host_nic_ip": "reserve",
   "device": [$(dev 0 0), $(dev 1 1), $(dev 2 2), $(dev 3 3)]},
  {"server_id": "10.0.0.2", "host_nic_ip": "reserve",
   "device": [$(dev 0 4), $(dev 1 5), $(dev 2 6), $(dev 3 7)]}]}
EOF
"$OT" launch --rank-table "$tmp/rank_table_8pcs.json" --out "$tmp/l8" --threads 2 --dry-run -- \
  train --data_parallel 4 --model_parallel 2 --out "$tmp/a b" >"$tmp/dry8" 2>&1
rc=$?
check "dry run exits 0 (rc $rc)" [ $rc = 0 ]
check "8 ranks on 2 hosts" has "ot launch: 8 ranks on 2 hosts from $tmp/rank_table_8pcs.json; OMP_NUM_THREADS=2" "$tmp/dry8"
check "hostfile printed" has "  10.0.0.1 slots=4" "$tmp/dry8"
check "hostfile written" [ "$(grep -v '^#' "$tmp/l8/hostfile")" = $'10.0.0.1 slots=4\n10.0.0.2 slots=4' ]
check "no rankfile" [ ! -e "$tmp/l8/rankfile" ]
check "mpirun command" has "mpirun -np 8 --hostfile $tmp/l8/hostfile --map-by slot:PE=2 --bind-to core -x OMP_NUM_THREADS=2 $OT train --data_parallel 4 --model_parallel 2 --out '$tmp/a b'" "$tmp/dry8"

cat >"$tmp/inter.json" <<EOF
{"server_count": "2", "server_list": [
  {"server_id": "hostA", "device": [$(dev 0 0), $(dev 1 2)]},
  {"server_id": "hostB", "device": [$(dev 0 1), $(dev 1 3)]}]}
EOF
"$OT" launch --rank-table "$tmp/inter.json" --out "$tmp/li" --threads 1 --dry-run -- train >"$tmp/dryi" 2>&1
check "interleaved: a rankfile" has "(its rank order needs a rankfile)" "$tmp/dryi"
check "rankfile lines" [ "$(grep '^rank' "$tmp/li/rankfile" | tr '\n' ' ')" = "rank 0=hostA slot=0 rank 1=hostB slot=0 rank 2=hostA slot=1 rank 3=hostB slot=1 " ]
check "rankfile command" has "mpirun -np 4 --hostfile $tmp/li/hostfile --rankfile $tmp/li/rankfile -x OMP_NUM_THREADS=1 $OT train" "$tmp/dryi"

printf 'node1 slots=2\nnode2 slots=2\n' >"$tmp/hosts"
"$OT" launch --hostfile "$tmp/hosts" --np 3 --bind none --threads 4 --mpirun-arg=--report-bindings --dry-run -- \
  /bin/hostname >"$tmp/dryh" 2>&1
check "hostfile: its slots, --np, no binding, any program" \
  has "mpirun -np 3 --hostfile $tmp/hosts --map-by slot --bind-to none -x OMP_NUM_THREADS=4 --report-bindings /bin/hostname" "$tmp/dryh"

# 2. refusals
refused() {  # refused WANT ARGS...: rc 2 and WANT in the output
  local want=$1 out rc
  shift
  out=$("$OT" launch "$@" 2>&1)
  rc=$?
  check "ot launch $*: rc $rc, '$want' in: $(head -2 <<<"$out")" [ $rc = 2 ] && grep -qF -- "$want" <<<"$out"
}
sed 's/"rank_id": "5"/"rank_id": "4"/' "$tmp/rank_table_8pcs.json" >"$tmp/dup.json"
refused "$tmp/dup.json: rank_id 4 appears twice: server_list[1] (10.0.0.2) device[0] and server_list[1] (10.0.0.2) device[1]" \
  --rank-table "$tmp/dup.json" --dry-run -- train
refused "give --rank-table FILE or --hostfile FILE" --dry-run -- train
refused "what to run? put it after --" --rank-table "$tmp/rank_table_8pcs.json"
refused "--np 4, but $tmp/rank_table_8pcs.json has 8 ranks" --rank-table "$tmp/rank_table_8pcs.json" --np 4 -- train

# 3. a real launch: 2 ranks on localhost, tiny preset, 2 steps, data parallel 2
cat >"$tmp/local2.json" <<EOF
{"version": "1.0", "server_count": "1", "status": "completed",
 "server_list": [{"server_id": "localhost", "device": [$(dev 0 0), $(dev 1 1)]}]}
EOF
"$OT" prepare --corpus data/shakespeare.txt --out "$tmp/data" --vocab-size 300 --quiet >/dev/null 2>&1 ||
  { echo "FAIL: ot prepare"; exit 1; }
OMP_NUM_THREADS=1 "$OT" launch --rank-table "$tmp/local2.json" --out "$tmp/l2" \
  --mpirun-arg=--oversubscribe --mpirun-arg=--allow-run-as-root -- \
  train --model tiny --data "$tmp/data" --vocab-size 300 --max-seq 64 --seq-len 64 --batch-size 4 \
  --data_parallel 2 --steps 2 --eval-every 0 --out "$tmp/run" >"$tmp/run.log" 2>&1
rc=$?
check "the launched run exits 0 (rc $rc; $(tail -3 "$tmp/run.log" | tr '\n' ' '))" [ $rc = 0 ]
check "it ran data parallel over 2 processes" has "parallel: data 2 x tensor 1 x pipeline 1 = 2 processes" "$tmp/run.log"
check "2 steps logged" [ "$(grep -c '"loss"' "$tmp/run/log.jsonl" 2>/dev/null)" -ge 2 ]
check "the profile ratios of both ranks printed" \
  [ "$(sed -n '/^profile ratios over 1 step, the first left out/,/^done/p' "$tmp/run.log" | grep -cE '^ +[01] +[0-9.]+%')" = 2 ]
check "and logged, one record per rank" [ "$(grep -c '"ratios": {"rank": ' "$tmp/run/log.jsonl")" = 2 ]

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
