#!/usr/bin/env bash
# Predicted against measured, for the layout planner (`ot plan`): each layout of a list is
# predicted by `ot plan --only` and then trained for a few steps by `ot train` (mpirun on this
# host, or across simulated hosts made by tests/netns/hosts.sh with shaped links); prints one
# table row per layout: predicted / measured peak memory of the fullest rank (the library's
# tracked allocations; and the resident set: those + the machine's rank_overhead) and
# predicted / measured step time (median of the steps after the first).
#
#   bench/plan_check.sh OT_BINARY [LIST]
#   BEST="HOSTS RATE DELAY" GLOBAL=ROWS bench/plan_check.sh OT_BINARY
#       the planner's choice against trying them: `ot plan` ranks every layout of HOSTS x 2
#       ranks; the list is then its best layout of every (dp, tp, pp) shape, run in the
#       planner's order (the first row is its choice); the last line compares the planner's
#       choice with the fastest measured.
#
# LIST (default: the built-in one below): lines "HOSTS RATE DELAY | TRAINING KEYS", HOSTS 0 = this
# host (RATE, DELAY ignored), else that many simulated hosts with links of RATE / DELAY (tc
# syntax: 1gbit 1ms; DELAY - for none: the kernel bridge with rate shaping only, while a delay
# runs tests/netns/netdelay, which takes CPU from the ranks). The model keys common to all rows are $MODEL (default below). The machine
# of this host is out/machine.conf (measure it first: `mpirun -np 8 --oversubscribe ot plan --measure`); the
# simulated hosts' machine is derived from it: the host's cores split evenly over the simulated
# hosts (each host's processes bound to its part: hosts.sh up --cpus split; hosts beyond the
# cores share one), their link measured by `ot plan --measure` over 4 ranks spread over the hosts
# (a pair on 2 hosts: inter_bw; the 4: inter_bw4). Needs root for the simulated hosts. Timing: run on a quiet machine.
set -u
OT=$(readlink -f "$1")
LIST=${2:-}
here=$(dirname "$(readlink -f "$0")")
H=${HOSTS_SH:-$here/../tests/netns/hosts.sh}
MACHINE=${MACHINE:-out/machine.conf}
MODEL=${MODEL:---d-model 384 --layers 6 --heads 6 --kv-heads 6 --d-ff 1536 --vocab-size 8192 --seq-len 128 --max-seq 128}
STEPS=${STEPS:-5}
DATA=${DATA:-out/data}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_plan_check.XXXXXX")
P=otplanck
up=""
mach=""
cleanup() { [ -z "$up" ] || bash "$H" down --prefix "$P" >/dev/null 2>&1; [ -n "${KEEP:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT
[ -f "$MACHINE" ] || { echo "plan_check: no $MACHINE (run: mpirun -np 8 --oversubscribe $OT plan --measure)" >&2; exit 2; }
[ -n "$(ls "$DATA"/train_*.bin 2>/dev/null)" ] || "$OT" prepare --corpus data/shakespeare.txt --out "$DATA" --quiet

if [ -z "$LIST" ]; then
  LIST=$tmp/list
  cat >"$LIST" <<'EOF'
0 - - | --batch-size 8 --grad-accum 2
0 - - | --batch-size 8 --data-parallel 2
0 - - | --batch-size 8 --data-parallel 2 --optimizer-shard 1
0 - - | --batch-size 8 --data-parallel 2 --optimizer-shard 2
0 - - | --batch-size 8 --data-parallel 2 --optimizer-shard 3
0 - - | --batch-size 8 --grad-accum 2 --tensor-parallel 2
0 - - | --batch-size 8 --grad-accum 2 --tensor-parallel 2 --vocab-parallel
0 - - | --batch-size 4 --grad-accum 4 --pipeline-stages 2
0 - - | --batch-size 4 --grad-accum 4 --pipeline-stages 2 --balanced-stages
0 - - | --batch-size 8 --data-parallel 2 --recompute full
0 - - | --batch-size 4 --data-parallel 4
0 - - | --batch-size 8 --data-parallel 2 --tensor-parallel 2
0 - - | --batch-size 4 --grad-accum 2 --data-parallel 2 --pipeline-stages 2
0 - - | --batch-size 4 --grad-accum 4 --tensor-parallel 2 --pipeline-stages 2
0 - - | --batch-size 2 --data-parallel 8
0 - - | --batch-size 4 --grad-accum 2 --data-parallel 2 --tensor-parallel 2 --pipeline-stages 2
2 1gbit - | --batch-size 8 --data-parallel 2
2 1gbit - | --batch-size 4 --data-parallel 4
2 1gbit - | --batch-size 8 --data-parallel 2 --tensor-parallel 2
2 1gbit - | --batch-size 4 --grad-accum 4 --tensor-parallel 2 --pipeline-stages 2
2 1gbit - | --batch-size 4 --grad-accum 2 --data-parallel 2 --pipeline-stages 2
2 1gbit - | --batch-size 4 --data-parallel 4 --optimizer-shard 3
2 1gbit 1ms | --batch-size 4 --data-parallel 4
2 10gbit - | --batch-size 4 --data-parallel 4
4 1gbit - | --batch-size 4 --data-parallel 4
4 1gbit - | --batch-size 4 --grad-accum 2 --data-parallel 2 --tensor-parallel 2 --pipeline-stages 2
EOF
fi

cores=$(awk -F' = ' '$1 == "cores" {print $2}' "$MACHINE")
BEST=${BEST:-}
GLOBAL=${GLOBAL:-16}
# the machine of H simulated hosts at RATE / DELAY into $mach (the hosts made if they are not
# up): this host's cores and rates split over them, their link measured (cached per H RATE DELAY)
cur=""
sim_machine() {
  local hosts=$1 rate=$2 delay=$3
  mach=$tmp/sim-$1-$2-$3.conf
  if [ "$cur" != "$hosts $rate $delay" ]; then
    [ -z "$up" ] || bash "$H" down --prefix "$P" >/dev/null 2>&1
    up=""
    local d=()
    [ "$delay" = - ] || d=(--delay "$delay")   # (-: no delay: the kernel bridge, rate shaping only)
    bash "$H" up --prefix "$P" --hosts "$hosts" --rate "$rate" "${d[@]}" --slots 8 --tcp-retries 3 --cpus split >/dev/null </dev/null ||
      return 1
    up=1
    cur="$hosts $rate $delay"
  fi
  [ -f "$mach" ] && return 0
  bash "$H" mpirun --prefix "$P" -np 4 --map-by node -- "$OT" plan --measure --out "$tmp/link.conf" >"$tmp/link.log" 2>&1 </dev/null ||
    { cat "$tmp/link.log" >&2; return 1; }
  # (inside a simulated host, k ranks moving data compete with the other hosts' ranks for the
  # same cores: the bandwidth this machine measured for k x H ranks)
  awk -v h="$hosts" -v c="$cores" -v link="$tmp/link.conf" '
    BEGIN { while ((getline l < link) > 0) { split(l, kv, " = "); if (kv[1] ~ /^inter_(bw|lat|bw4)$/) L[kv[1]] = kv[2] } }
    /^#/ { next }
    { split($0, kv, " = "); K[++n] = kv[1]; V[kv[1]] = kv[2] }
    function T(k) { return k <= 2 ? V["intra_bw"] : k <= 4 ? V["intra_bw4"] : k <= 8 ? V["intra_bw8"] : V["intra_bw8"] * 8 / k }
    END {
      c1 = c / h < 1 ? 1 : c / h
      for (i = 1; i <= n; i++) { k = K[i]; v = V[k]
        if (k == "cores") v = c1
        else if (k == "hosts") v = h
        else if (k == "devices_per_host") v = 8
        else if (k == "mem_bytes" || k == "mem_bw" || k == "peak_flops" || k == "gemm_flops" || k == "attn_flops") v = v / h
        else if ((k == "core_gemm_flops" || k == "core_attn_flops") && h > c) v = v * c / h   # (a fraction of a core each)
        else if (k == "intra_bw") v = T(2 * h)
        else if (k == "intra_bw4") v = T(4 * h)
        else if (k == "intra_bw8") v = T(8 * h)
        else if (k in L) { v = L[k]; delete L[k] }
        else if (k == "name") v = h " simulated hosts"
        else if (k == "source") v = "this host (" v ") split over " h " simulated hosts; their link measured by ot plan --measure over 4 ranks spread over the hosts"
        print k " = " v }
      for (k in L) print k " = " L[k] }' "$MACHINE" >"$mach"
  grep -E "^(inter_bw|inter_lat|inter_bw4)" "$mach" | tr '\n' ' ' >&2; echo "(measured by 4 ranks on $hosts hosts, one a host first, at $rate / $delay)" >&2
}

if [ -n "$BEST" ]; then   # the planner's best layout of every shape, in its order
  read -r bh brate bdelay <<<"$BEST"
  LIST=$tmp/best
  sim_machine "$bh" "$brate" "$bdelay" || { echo "plan_check: simulated hosts failed" >&2; exit 1; }
  "$OT" plan --machine "$mach" --hosts "$bh" --devices $((2 * bh)) $MODEL --global-batch "$GLOBAL" --top 5 \
    --csv "$tmp/rank.csv" > "$tmp/rank.log" 2>&1 || { cat "$tmp/rank.log" >&2; exit 1; }
  sed -n '1,/^chosen/p' "$tmp/rank.log" | tail -9
  awk -F, -v w="$BEST" 'NR > 1 && $11 == 1 && !seen[$1 " " $2 " " $3]++ {
      printf "%s | --data-parallel %s --tensor-parallel %s --pipeline-stages %s --grad-accum %s --batch-size %s --optimizer-shard %s --recompute %s%s%s%s\n",
        w, $1, $2, $3, $4, $5, $6, $7, ($8 == 1 ? " --vocab-parallel" : ""), ($9 > 0 ? " --comm-fusion-layers " $9 : ""),
        ($10 == 1 ? " --balanced-stages" : "") }' "$tmp/rank.csv" >"$LIST"
fi

med() { python3 -c "
import json, statistics, sys
L = [json.loads(l) for l in open(sys.argv[1])]
t = [r['time_s'] for r in L if 'time_s' in r][1:]
m = [r for r in L if r.get('event') == 'memory'][0]['ranks']
print('%.4f %.2f %.2f' % (statistics.median(t), max(x['tracked_peak_mib'] for x in m), max(x['rss_peak_mib'] for x in m)))
" "$1"; }

printf '%-6s %-7s %-60s | %8s %8s %6s | %8s %8s %6s | %7s %7s %6s %8s\n' hosts link layout "mem MiB" measured err "RSS" measured err "step s" measured err "tokens/s"
n=0 bad_mem=0 bad_t=0 first_tps="" best_tps=0 best_row=""
while IFS='|' read -r where keys; do
  [ -z "${where// }" ] && continue
  read -r hosts rate delay <<<"$where"
  read -r -a K <<<"$keys"
  dp=1 tp=1 pp=1
  for ((i = 0; i < ${#K[@]}; i++)); do
    case ${K[i]} in --data-parallel) dp=${K[i+1]} ;; --tensor-parallel) tp=${K[i+1]} ;; --pipeline-stages) pp=${K[i+1]} ;; esac
  done
  np=$((dp * tp * pp))
  out=$tmp/run$n
  if [ "$hosts" = 0 ]; then
    mach=$MACHINE; h=1
    th=$((cores / np)); [ $th -ge 1 ] || th=1
    cmd=(env OMP_NUM_THREADS=$th)
    [ $np -gt 1 ] && cmd+=(mpirun --oversubscribe --allow-run-as-root --bind-to none -np $np)
  else
    sim_machine "$hosts" "$rate" "$delay" || { echo "plan_check: simulated hosts failed" >&2; exit 1; }
    h=$hosts
    cmd=(bash "$H" mpirun --prefix "$P" -np $np --map-by "ppr:$((np / hosts)):node" --)
  fi
  pred=$("$OT" plan --machine "$mach" --hosts $h --devices $np --only $MODEL $keys --csv "$out.csv" 2>&1) ||
    { echo "$pred" >&2; exit 1; }
  IFS=, read -r -a p < <(tail -1 "$out.csv")
  # columns (from 0): 19 total_bytes, 24 t_step
  pmem=$(awk -v b="${p[19]}" 'BEGIN { printf "%.2f", b / 1048576 }')
  pt=${p[24]}
  prss=$(awk -v b="${p[27]}" 'BEGIN { printf "%.2f", b / 1048576 }')
  "${cmd[@]}" "$OT" train $MODEL $keys --data "$DATA" --steps $STEPS --eval-every 0 --eval-batches 1 --print-every 100 \
    --out "$out" >"$out.log" 2>&1 </dev/null || { tail -5 "$out.log" >&2; echo "plan_check: run $n failed" >&2; exit 1; }
  read -r mt mmem mrss < <(med "$out/log.jsonl")
  emem=$(awk -v a="$pmem" -v b="$mmem" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }')
  et=$(awk -v a="$pt" -v b="$mt" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }')
  erss=$(awk -v a="$prss" -v b="$mrss" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }')
  awk -v a="$pmem" -v b="$mmem" 'BEGIN { exit !(a > 1.05 * b || a < 0.95 * b) }' && bad_mem=$((bad_mem + 1))
  awk -v a="$pt" -v b="$mt" 'BEGIN { exit !(a > 1.25 * b || a < 0.75 * b) }' && bad_t=$((bad_t + 1))
  link=$([ "$hosts" = 0 ] && echo "-" || echo "$rate")
  rows=$(( p[0] * p[3] * p[4] ))   # dp x micro-batches x batch-size
  seq=$(sed -n 's/.*--seq-len \([0-9]*\).*/\1/p' <<<"$MODEL $keys" | tail -1)
  tps=$(awk -v r="$rows" -v s="${seq:-256}" -v t="$mt" 'BEGIN { printf "%.0f", r * s / t }')
  [ -n "$first_tps" ] || first_tps=$tps
  [ "$tps" -gt "$best_tps" ] && { best_tps=$tps; best_row=$(echo $keys); }
  printf '%-6s %-7s %-60s | %8.1f %8.1f %6s | %8.1f %8.1f %6s | %7.3f %7.3f %6s %8s\n' "$([ "$hosts" = 0 ] && echo 1 || echo "$hosts")" \
    "$link" "$(echo $keys | sed 's/--global-batch [0-9]* *//; s/--tensor-parallel 1 //; s/--pipeline-stages 1 //; s/--data-parallel 1 //')" \
    "$pmem" "$mmem" "$emem" "$prss" "$mrss" "$erss" "$pt" "$mt" "$et" "$tps"
  n=$((n + 1))
done <"$LIST"
echo "$n layouts: memory outside 5%: $bad_mem; step time outside 25%: $bad_t"
[ -z "$BEST" ] || echo "the planner's choice: $first_tps tokens/s measured; the fastest measured: $best_tps tokens/s ($best_row)"
[ $bad_mem = 0 ] && [ $bad_t = 0 ]
