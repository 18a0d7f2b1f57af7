#!/usr/bin/env bash
# Several hosts on one machine: N simulated hosts made of Linux network namespaces, and Open MPI
# across them over TCP. Needs root and iproute2 (`ip`, `tc`) and util-linux (`nsenter`, `unshare`).
#
#   hosts.sh up --hosts N [--rate R --delay D] [--slots S] [--tcp-retries K] [--prefix P]
#               [--delay-by netem|netdelay] [--netdelay PATH] [--cpus split]
#       Makes namespaces P-h1 .. P-hN (the hosts) and P-br (the switch). Host k has hostname P-hk
#       (its own UTS namespace, kept for every process started in it), address 10.77.0.k/24 on its
#       interface eth0, and /etc/hosts naming every host. Each eth0's peer is a port of the
#       bridge br0 in P-br: nothing is added to the namespace the script runs in. R (tc rate, e.g.
#       10gbit, 1gbit) shapes both directions of each host's link (tbf); D (e.g. 50us, 1ms) delays
#       what each host sends (netem under the tbf), so a round trip between two hosts takes 2 D.
#       A kernel without the netem qdisc gets the delay from netdelay (tests/netns/netdelay.c; PATH,
#       else $OT_NETDELAY, else build/netdelay): a userspace switch in P-br whose TAP devices are
#       the hosts' eth0 (MTU 9000), delaying each frame by D and passing at most R into each host
#       (tbf on eth0 shapes what a host sends); it manages ~4 Gbit/s on a busy 2-core machine.
#       --delay-by netdelay uses it where netem exists too. Without either, the rate only, with a
#       warning (`info` shows what is applied). Writes P's state directory (${OT_NETNS_RUN:-/run/ot-netns}/P): hostfile (S slots
#       per host, default 1), rsh (Open MPI's rsh agent: `rsh HOST COMMAND` runs COMMAND by `sh -c`
#       in HOST's namespaces) and env (what `info` prints). Removes a previous run's leftovers
#       of the same prefix first. --tcp-retries K sets the hosts' net.ipv4.tcp_retries2 (Linux's
#       default 15: a connection to a host whose link is cut gives up after ~15 minutes; 3: ~3 s,
#       so that mpirun ends soon after a link cut ends the job). --cpus split gives each host its
#       own part of this machine's CPUs (host k: CPUs (k-1)C/N .. kC/N - 1 of the C this script may
#       use; hosts beyond the CPUs share one): everything started in a host (`exec`, `mpirun`,
#       the rsh agent's commands) is bound to them, as on separate machines. Without it every
#       host runs on every CPU.
#   hosts.sh mpirun [--prefix P] [MPIRUN ARGS] [--] PROGRAM ARGS
#       Runs mpirun in host 1 across the hosts: --hostfile, the rsh agent, btl self,vader,tcp (shared
#       memory only inside a host: each host is its own Open MPI node), btl_tcp_if_include and
#       oob_tcp_if_include = the hosts' subnet, --bind-to none (every host is the same CPUs),
#       --allow-run-as-root --oversubscribe, mpi_yield_when_idle (the hosts share the cores), -x
#       OMP_NUM_THREADS (default 1). Its exit status.
#       --peak-rss (before the --): each rank prints "peak RSS: rank R on HOST: M MiB" when it
#       ends (its maximum resident memory, by GNU time).
#   hosts.sh launch [--prefix P] OT [OT LAUNCH ARGS] -- COMMAND
#       `OT launch` in host 1 with the same mpirun settings (--mpirun-arg=...; --bind none unless
#       given); write the rank table with `rank-table`.
#   hosts.sh rank-table [--prefix P] --per-host K
#       Prints a rank table (MindSpore / HCCL JSON) of K devices on each host, ranks in host order.
#   hosts.sh exec [--prefix P] HOST COMMAND...     runs COMMAND in HOST (k or P-hk)
#   hosts.sh link-down|link-up [--prefix P] HOST   cuts / restores HOST's link (ip link set eth0 down/up)
#   hosts.sh info [--prefix P]                     hosts, addresses, shaping applied
#   hosts.sh down [--prefix P]                     ends the processes in P's namespaces, removes them,
#                                                  the hosts files and the state directory
#   hosts.sh selftest [--prefix P] PROBE           the harness's self-test (PROBE: build/netprobe):
#       3 hosts at 1gbit / 1ms: each host reaches each other one, the hostnames differ, Open MPI
#       runs a process on every host, a round trip takes >= 2 x the delay, a 16 MB transfer is
#       bounded by the rate, a cut link stops traffic and link-up restores it; after `down` no
#       namespace, link or file of the prefix is left. Then the kernel bridge without delay, and
#       netdelay where netem did the delay (tests/netns/selftest.sh). Exit 77: no namespaces.
# P defaults to $OT_NETNS_PREFIX, else "otnet". Exit status 2: bad usage; 77: no namespaces here
# (not root, no `ip`, or the kernel refuses): callers skip.
set -u
SUBNET=10.77.0
RUNDIR=${OT_NETNS_RUN:-/run/ot-netns}
prefix=${OT_NETNS_PREFIX:-otnet}
me=$(readlink -f "$0")

die() { echo "hosts.sh: $*" >&2; exit 2; }
skip() { echo "hosts.sh: SKIP: $*" >&2; exit 77; }
state() { echo "$RUNDIR/$prefix"; }

# the namespaces of this prefix that exist now
our_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(h[0-9]+|br)\$"; }

# ns HOST: the namespace of host k, P-hk or hk
ns_of() {
  local h=$1
  case $h in
    [0-9]*) h=$prefix-h$h ;;
    h[0-9]*) h=$prefix-$h ;;
  esac
  [ -e "/run/netns/$h" ] && [[ $h == $prefix-h* ]] || die "no host '$1' (hosts: $(our_ns | grep -v -- -br | tr '\n' ' '))"
  echo "$h"
}

can_netns() {
  [ "$(id -u)" = 0 ] || skip "network namespaces need root (run as root)"
  command -v ip >/dev/null && command -v tc >/dev/null || skip "iproute2 is not installed (apt-get install iproute2)"
  command -v nsenter >/dev/null && command -v unshare >/dev/null || skip "nsenter / unshare (util-linux) missing"
  local t=$prefix-probe$$
  ip netns add "$t" 2>/dev/null || skip "the kernel refused 'ip netns add' (a container without CAP_SYS_ADMIN?)"
  ip netns del "$t"
}

cmd_down() {
  local d n p f
  d=$(state)
  for n in $(our_ns); do   # the processes started in our namespaces, then the namespaces
    for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for n in $(our_ns); do
    for _ in 1 2 3 4 5 6 7 8 9 10; do [ -z "$(ip netns pids "$n" 2>/dev/null)" ] && break; sleep 0.1; done
    ip netns del "$n" 2>/dev/null || echo "hosts.sh: could not remove namespace $n" >&2
  done
  if [ -d "$d" ]; then
    for f in "$d"/uts/*; do [ -e "$f" ] && umount "$f" 2>/dev/null; done
    rm -rf "$d"
  fi
  rm -rf /etc/netns/"$prefix"-h[0-9]*
  rmdir /etc/netns 2>/dev/null   # where nothing else uses it
  [ -z "$(our_ns)" ]
}

# bits/s of a rate (10gbit, 100mbit, 500kbit)
bps_of() {
  local r=$1 v u
  v=${r%%[a-zA-Z]*}
  u=${r#"$v"}
  [[ $v =~ ^[0-9]+$ ]] || die "--rate '$r': give INTEGER kbit|mbit|gbit (e.g. 1gbit)"
  case $u in
    gbit) echo $((v * 1000000000)) ;; mbit) echo $((v * 1000000)) ;; kbit) echo $((v * 1000)) ;;
    *) die "--rate '$r': give INTEGER kbit|mbit|gbit (e.g. 1gbit)" ;;
  esac
}
# microseconds of a delay (50us, 1ms, 0.5ms, 1s)
us_of() { awk -v d="$1" 'BEGIN { f = d + 0; u = d; sub(/^[0-9.]+/, "", u);
  printf "%d\n", f * (u == "s" ? 1000000 : u == "ms" ? 1000 : 1) }'; }

# tbf burst for a rate: 1 ms of it, at least 64 KiB (a GSO packet passes whole)
burst_of() {
  local bps
  bps=$(bps_of "$1") || exit 2
  local b=$((bps / 8 / 1000))
  [ $b -ge 65536 ] || b=65536
  echo $b
}

# shape NS DEV WITH_DELAY: tbf at the rate (both ends of a link), netem delay under it (host side)
shape() {
  local ns=$1 dev=$2 d=""
  [ "$3" = 1 ] && [ "$mode" = netem ] && d=$delay
  if [ -n "$rate" ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst "$(burst_of "$rate")" \
      latency 100ms || die "tc tbf on $ns/$dev failed"
    [ -z "$d" ] || ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$d" limit 100000 ||
      die "tc netem on $ns/$dev failed"
  elif [ -n "$d" ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 10: netem delay "$d" limit 100000 ||
      die "tc netem on $ns/$dev failed"
  fi
}

cmd_up() {
  local n="" slots=1 retries="" by="" cpus="" k d
  rate="" delay="" netdelay=${OT_NETDELAY:-$(dirname "$me")/../../build/netdelay}
  while [ $# -gt 0 ]; do
    case $1 in
      --hosts) n=${2:-}; shift 2 ;;
      --rate) rate=${2:-}; shift 2 ;;
      --delay) delay=${2:-}; shift 2 ;;
      --slots) slots=${2:-}; shift 2 ;;
      --tcp-retries) retries=${2:-}; shift 2 ;;
      --netdelay) netdelay=${2:-}; shift 2 ;;
      --delay-by) by=${2:-}; shift 2 ;;
      --cpus) cpus=${2:-}; shift 2 ;;
      *) die "up: unknown argument '$1' (up --hosts N [--rate R] [--delay D] [--slots S] [--tcp-retries K] [--cpus split] [--prefix P])" ;;
    esac
  done
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: --hosts N with N in 1..200 (got '${n}')"
  [[ $slots =~ ^[0-9]+$ ]] && [ "$slots" -ge 1 ] || die "up: --slots S with S >= 1 (got '$slots')"
  [ -z "$retries" ] || [[ $retries =~ ^[0-9]+$ ]] && [ "${retries:-1}" -ge 1 ] && [ "${retries:-1}" -le 15 ] ||
    die "up: --tcp-retries K with K in 1..15 (got '$retries')"
  [ -z "$rate" ] || burst_of "$rate" >/dev/null || exit 2
  case $by in
    ""|netem) ;;
    netdelay) [ -x "$netdelay" ] || die "up: --delay-by netdelay: no netdelay at '$netdelay' (build it, or --netdelay PATH)" ;;
    *) die "up: --delay-by '$by': netem or netdelay" ;;
  esac
  case $cpus in "" | split) ;; *) die "up: --cpus '$cpus': split (each host its own CPUs), or leave it out" ;; esac
  [ -z "$delay" ] || [[ $delay =~ ^[0-9.]+(us|ms|s)$ ]] || die "up: --delay '$delay': give NUMBER us|ms|s (e.g. 50us)"
  can_netns
  cmd_down 2>/dev/null
  d=$(state)
  mkdir -p "$d/uts" || die "cannot make $d"
  delay_applied=${delay:-0}
  mode=bridge   # veth pairs to a kernel bridge; netem: with netem delay; switch: netdelay's TAPs
  if [ -n "$delay" ]; then   # does this kernel have netem?
    ip netns add "$prefix-br" || die "ip netns add $prefix-br failed"
    if [ "$by" != netdelay ] && ip netns exec "$prefix-br" tc qdisc add dev lo root netem delay 1us 2>/dev/null; then
      mode=netem
    elif [ -x "$netdelay" ]; then
      mode=switch
    else
      echo "hosts.sh: WARNING: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM) and there is no netdelay" \
        "(build it, or give --netdelay PATH): --delay $delay is not applied, links are shaped by rate only" >&2
      delay_applied=0
    fi
    ip netns del "$prefix-br"
  fi
  trap 'cmd_down; exit 1' ERR
  set -E
  ip netns add "$prefix-br"
  ip -n "$prefix-br" link set lo up
  if [ $mode = switch ]; then   # the delaying switch: its TAPs t1..tN become the hosts' eth0
    ip netns exec "$prefix-br" setsid "$netdelay" t "$n" "$(us_of "$delay")" "$([ -z "$rate" ] || bps_of "$rate")" \
      >"$d/netdelay.log" 2>&1 </dev/null &
    for _ in $(seq 100); do grep -qs ready "$d/netdelay.log" && break; sleep 0.05; done
    grep -q ready "$d/netdelay.log" || { cat "$d/netdelay.log" >&2; die "netdelay did not start"; }
  else
    ip -n "$prefix-br" link add br0 type bridge
    ip -n "$prefix-br" link set br0 up
  fi
  : >"$d/hostfile"
  local hosts_file="127.0.0.1 localhost"$'\n'
  for k in $(seq "$n"); do hosts_file+="$SUBNET.$k $prefix-h$k"$'\n'; done
  for k in $(seq "$n"); do
    local h=$prefix-h$k
    ip netns add "$h"
    ip -n "$h" link set lo up
    [ -z "$retries" ] || ip netns exec "$h" sh -c "echo $retries >/proc/sys/net/ipv4/tcp_retries2"
    if [ $mode = switch ]; then
      ip -n "$prefix-br" link set "t$k" netns "$h"
      ip -n "$h" link set "t$k" name eth0 mtu 9000
    else
      ip -n "$h" link add eth0 type veth peer name "h$k" netns "$prefix-br"
      ip -n "$prefix-br" link set "h$k" master br0 up
    fi
    ip -n "$h" addr add "$SUBNET.$k/24" dev eth0
    ip -n "$h" link set eth0 up
    shape "$h" eth0 1
    [ $mode = switch ] || shape "$prefix-br" "h$k" 0
    touch "$d/uts/$h"
    unshare --uts="$d/uts/$h" hostname "$h"
    mkdir -p "/etc/netns/$h"
    printf '%s' "$hosts_file" >"/etc/netns/$h/hosts"
    echo "$h slots=$slots" >>"$d/hostfile"
  done
  if [ "$cpus" = split ]; then   # host k's CPUs into cpus/HOST, read by in_host and the rsh agent
    local all=() c0 c1
    local r a b
    for r in $(grep '^Cpus_allowed_list:' /proc/self/status | cut -f2 | tr ',' ' '); do   # 0-3,8 ...
      a=${r%-*} b=${r#*-}
      for ((k = a; k <= b; k++)); do all+=("$k"); done
    done
    [ ${#all[@]} -ge 1 ] || die "up --cpus split: cannot read this process's CPUs (/proc/self/status)"
    mkdir -p "$d/cpus"
    for ((k = 1; k <= n; k++)); do
      c0=$(((k - 1) * ${#all[@]} / n))
      c1=$((k * ${#all[@]} / n - 1))
      [ $c1 -ge $c0 ] || c1=$c0
      echo "${all[@]:c0:c1-c0+1}" | tr ' ' ',' >"$d/cpus/$prefix-h$k"
    done
  fi
  cat >"$d/rsh" <<EOF
#!/bin/sh
# Open MPI's rsh agent for the simulated hosts of $prefix: rsh [OPTIONS] HOST COMMAND...
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
h=\$1
shift
case \$h in $prefix-h[0-9]*) ;; *) echo "rsh: '\$h' is not a host of $prefix" >&2; exit 255 ;; esac
[ -e "$d/uts/\$h" ] || { echo "rsh: no host \$h" >&2; exit 255; }
pin=""
[ -f "$d/cpus/\$h" ] && pin="taskset -c \$(cat "$d/cpus/\$h")"
exec ip netns exec "\$h" nsenter --uts="$d/uts/\$h" -- \$pin sh -c "\$*"
EOF
  chmod +x "$d/rsh"
  {
    echo "hosts=$n"
    echo "slots=$slots"
    echo "cpus=$([ "$cpus" = split ] && for ((k = 1; k <= n; k++)); do printf 'h%d:%s ' $k "$(cat "$d/cpus/$prefix-h$k")"; done || echo all)"
    echo "subnet=$SUBNET.0/24"
    echo "rate=${rate:-unshaped}"
    echo "delay=$delay_applied"
    echo "delay_asked=${delay:-0}"
    echo "delay_by=$(case $mode in netem) echo "netem" ;; switch) echo "netdelay (a userspace switch; MTU 9000)" ;;
                       *) echo none ;; esac)"
    echo "tcp_retries2=${retries:-$(ip netns exec "$prefix-h1" cat /proc/sys/net/ipv4/tcp_retries2)}"
  } >"$d/env"
  set +E
  trap - ERR
  echo "hosts.sh: $n hosts $prefix-h1..$prefix-h$n on $SUBNET.0/24, rate ${rate:-unshaped}, delay $delay_applied; state in $d"
}

# the mpirun arguments that run across the hosts; mpi_args nohostfile: all but --hostfile.
# The simulated hosts share this machine's cores, which Open MPI cannot see (each host offers
# --slots): without mpi_yield_when_idle a waiting rank spins through its time slice while the
# rank it waits for is descheduled (measured, 4 ranks on 2 simulated hosts at 10gbit: an 8-byte
# all-reduce 12 ms instead of 67 us, 64 MiB 544 ms instead of 136).
mpi_args() {
  local d
  d=$(state)
  [ -f "$d/env" ] || die "no hosts of prefix '$prefix' (run: hosts.sh up --hosts N --prefix $prefix)"
  [ "${1:-}" = nohostfile ] || echo --hostfile "$d/hostfile"
  echo --mca plm_rsh_agent "$d/rsh" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl self,vader,tcp --mca btl_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_if_include "$SUBNET.0/24" \
    --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1
  [ "${1:-}" = nohostfile ] || echo -x OMP_NUM_THREADS   # (ot launch passes it itself)
}

in_host() {  # in_host HOST COMMAND...: COMMAND in HOST's namespaces, with its hostname
  local h
  h=$(ns_of "$1")
  shift
  local pin=()
  [ -f "$(state)/cpus/$h" ] && pin=(taskset -c "$(cat "$(state)/cpus/$h")")
  ip netns exec "$h" nsenter --uts="$(state)/uts/$h" -- "${pin[@]}" "$@"
}

cmd_mpirun() {
  local args=() bind=(--bind-to none) a seen=0 rss=0
  for a in "$@"; do
    if [ $seen = 1 ]; then args+=("$a"); continue; fi
    case $a in
      --) seen=1; [ $rss = 0 ] || args+=(bash "$me" rank-rss) ;;
      --peak-rss) rss=1 ;;
      --bind-to|--bind-to=*) bind=(); args+=("$a") ;;
      *) args+=("$a") ;;
    esac
  done
  [ $rss = 0 ] || [ $seen = 1 ] || die "mpirun --peak-rss: put the program after --"
  [ $rss = 0 ] || [ -x /usr/bin/time ] || die "mpirun --peak-rss needs GNU time (apt-get install time)"
  # shellcheck disable=SC2046
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} in_host 1 mpirun $(mpi_args) "${bind[@]}" "${args[@]}"
}

# rank-rss PROGRAM ARGS: runs PROGRAM, then prints its peak resident memory (one rank's)
cmd_rank_rss() {
  local f rc
  f=$(mktemp)
  /usr/bin/time -f %M -o "$f" "$@"
  rc=$?
  echo "peak RSS: rank ${OMPI_COMM_WORLD_RANK:-?} on $(hostname): $(( $(tail -1 "$f") / 1024 )) MiB" >&2
  rm -f "$f"
  return $rc
}

cmd_launch() {
  local ot=${1:-} a before=() after=() seen=0 bind=(--bind none)
  [ -n "$ot" ] || die "launch: OT [OT LAUNCH ARGS] -- COMMAND"
  shift
  for a in "$@"; do
    if [ $seen = 1 ]; then after+=("$a"); continue; fi
    case $a in
      --) seen=1 ;;
      --bind|--bind=*) bind=(); before+=("$a") ;;
      *) before+=("$a") ;;
    esac
  done
  local m=()
  for a in $(mpi_args nohostfile); do m+=("--mpirun-arg=$a"); done
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} in_host 1 "$ot" launch "${before[@]}" "${bind[@]}" "${m[@]}" -- "${after[@]}"
}

cmd_rank_table() {
  local k="" d n h i r=0 sep=""
  [ "${1:-}" = --per-host ] && k=${2:-}
  [[ $k =~ ^[0-9]+$ ]] && [ "$k" -ge 1 ] || die "rank-table --per-host K (K >= 1)"
  d=$(state)
  [ -f "$d/env" ] || die "no hosts of prefix '$prefix'"
  n=$(sed -n 's/^hosts=//p' "$d/env")
  printf '{"version": "1.0", "server_count": "%d", "status": "completed",\n "server_list": [' "$n"
  for h in $(seq "$n"); do
    printf '%s\n  {"server_id": "%s-h%d", "host_nic_ip": "reserve", "device": [' "$sep" "$prefix" "$h"
    for i in $(seq 0 $((k - 1))); do
      printf '%s{"device_id": "%d", "device_ip": "%s.%d", "rank_id": "%d"}' "$([ "$i" = 0 ] || echo ', ')" \
        "$i" "$SUBNET" "$h" $r
      r=$((r + 1))
    done
    printf ']}'
    sep=,
  done
  printf ']}\n'
}

cmd_info() {
  local d
  d=$(state)
  [ -f "$d/env" ] || die "no hosts of prefix '$prefix'"
  cat "$d/env"
  for n in $(our_ns | grep -v -- -br); do
    echo "$n: $(ip -n "$n" -br addr show eth0 | awk '{print $2, $3}'); $(ip netns exec "$n" tc qdisc show dev eth0 | paste -sd ';')"
  done
}

cmd_link() {
  local h
  h=$(ns_of "${2:-}")
  ip -n "$h" link set eth0 "$1"
}

# the subcommand, then --prefix P (up also takes it among its options)
sub=${1:-}
[ $# -gt 0 ] && shift
case ${1:-} in
  --prefix) prefix=${2:-}; shift 2 ;;
  --prefix=*) prefix=${1#--prefix=}; shift ;;
esac
if [ "$sub" = up ]; then
  rest=()
  while [ $# -gt 0 ]; do
    case $1 in --prefix) prefix=${2:-}; shift 2 ;; *) rest+=("$1"); shift ;; esac
  done
  set -- "${rest[@]}"
fi
[[ $prefix =~ ^[a-z][a-z0-9]{0,9}$ ]] || die "--prefix '$prefix': a lower-case letter, then up to 9 letters or digits"
case $sub in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  mpirun) cmd_mpirun "$@" ;;
  launch) cmd_launch "$@" ;;
  rank-table) cmd_rank_table "$@" ;;
  rank-rss) cmd_rank_rss "$@" ;;
  exec) [ $# -ge 2 ] || die "exec HOST COMMAND..."; in_host "$@" ;;
  link-down) cmd_link down "$@" ;;
  link-up) cmd_link up "$@" ;;
  info) cmd_info ;;
  selftest) exec bash "$(dirname "$me")/selftest.sh" "$me" "$prefix" "$@" ;;
  *) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2 ;;
esac
