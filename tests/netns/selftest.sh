#!/usr/bin/env bash
# The simulated hosts' self-test (CTest netns_selftest): `hosts.sh selftest [--prefix P] PROBE`
# (PROBE: the build's netprobe). Three hosts with 1gbit / 1ms links:
# 1. every host has its own hostname, and reaches every other one over TCP;
# 2. Open MPI started through the harness runs one process on each host (their hostnames);
# 3. none of the hosts' addresses or links is in the namespace the test runs in;
# 4. a round trip between two hosts takes >= 2 x the delay that was applied (none where the
#    kernel has no netem: said so), and a 16 MB transfer runs at 50-105% of the rate;
# 5. link-down cuts a host off (a connection attempt fails), link-up restores it;
# 6. after `down`, no namespace, file or link of the prefix is left.
# Exit 77 (CTest SKIP_RETURN_CODE) where network namespaces cannot be made here.
set -u
H=$1 prefix=$2 PROBE=$(readlink -f "${3:-}")
[ -x "$PROBE" ] || { echo "usage: hosts.sh selftest [--prefix P] NETPROBE_BINARY"; exit 2; }
RATE=1gbit RATE_MBIT=1000 DELAY=1ms DELAY_US=1000
hosts() { bash "$H" "$1" --prefix "$prefix" "${@:2}"; }
passed=0 failed=0
check() {  # check WHAT COND...
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what"; fi
}
fails() { ! "$@" 2>/dev/null; }
links_before=$(ip -o link | wc -l)
hosts up --hosts 3 --rate $RATE --delay $DELAY
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "FAIL: hosts.sh up (exit $rc)"; exit 1; }
trap 'hosts down' EXIT
applied=$(hosts info | sed -n 's/^delay=//p')

# 1. names and reachability
for k in 1 2 3; do
  name=$(hosts exec $k hostname)
  check "host $k is named $prefix-h$k (got '$name')" [ "$name" = "$prefix-h$k" ]
done
port=7001
for j in 1 2 3; do
  hosts exec $j "$PROBE" serve $port 2 &
  sleep 0.2
  for i in 1 2 3; do
    [ $i = $j ] && continue
    out=$(timeout 15 bash "$H" exec --prefix "$prefix" $i "$PROBE" rtt 10.77.0.$j $port 3 2>&1)
    check "host $i reaches host $j ($out)" grep -q "^rtt_us" <<<"$out"
  done
  wait
done

# 2. Open MPI on every host
names=$(timeout 60 bash "$H" mpirun --prefix "$prefix" -np 3 --map-by node hostname 2>&1 | sort | tr '\n' ' ')
check "mpirun runs on the 3 hosts (got: $names)" [ "$names" = "$prefix-h1 $prefix-h2 $prefix-h3 " ]

# 3. nothing in this namespace
check "no address of the hosts here" [ -z "$(ip -o addr | grep -F ' 10.77.0.')" ]
check "no link added here" [ "$(ip -o link | wc -l)" = "$links_before" ]

# 4. the shaped link: latency and throughput between hosts 1 and 2
hosts exec 2 "$PROBE" serve $((port + 1)) 2 &
sleep 0.2
rtt=$(timeout 30 bash "$H" exec --prefix "$prefix" 1 "$PROBE" rtt 10.77.0.2 $((port + 1)) 200)
send=$(timeout 30 bash "$H" exec --prefix "$prefix" 1 "$PROBE" send 10.77.0.2 $((port + 1)) 16000000)
wait
med=$(sed -n 's/.*median \([0-9]*\).*/\1/p' <<<"$rtt")
mbit=$(sed -n 's/.*: \([0-9]*\) Mbit\/s/\1/p' <<<"$send")
echo "link $RATE, delay $DELAY asked, $applied applied: round trip $rtt; $send"
if [ "$applied" = 0 ]; then
  echo "note: the delay is not applied on this kernel (no netem qdisc): the round trip is not checked"
  check "a round trip measured ($rtt)" [ -n "$med" ]
else
  check "round trip median ${med} us >= 2 x $DELAY" [ "${med:-0}" -ge $((2 * DELAY_US)) ]
fi
check "throughput ${mbit} Mbit/s within 50-105% of $RATE" \
  [ "${mbit:-0}" -ge $((RATE_MBIT / 2)) ] && [ "${mbit:-0}" -le $((RATE_MBIT * 105 / 100)) ]

# 5. a cut link
hosts exec 2 "$PROBE" serve $((port + 2)) 1 &
server=$!
sleep 0.2
hosts link-down 2
check "after link-down host 1 cannot reach host 2" \
  fails timeout 3 bash "$H" exec --prefix "$prefix" 1 "$PROBE" rtt 10.77.0.2 $((port + 2)) 1
hosts link-up 2
sleep 0.5
out=$(timeout 15 bash "$H" exec --prefix "$prefix" 1 "$PROBE" rtt 10.77.0.2 $((port + 2)) 3 2>&1)
check "after link-up host 1 reaches host 2 again ($out)" grep -q "^rtt_us" <<<"$out"
wait $server

# 6. nothing left after down
trap - EXIT
hosts down
check "no namespace of $prefix left: $(ip netns list | grep "^$prefix-" | tr '\n' ' ')" \
  [ -z "$(ip netns list | grep "^$prefix-")" ]
check "no state directory left" [ ! -e "${OT_NETNS_RUN:-/run/ot-netns}/$prefix" ]
check "no hosts file left" [ -z "$(ls -d /etc/netns/"$prefix"-* 2>/dev/null)" ]
check "the links here as before" [ "$(ip -o link | wc -l)" = "$links_before" ]
# a second down (nothing to remove) succeeds
check "down again: nothing to do, exit 0" hosts down
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
