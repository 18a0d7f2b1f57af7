#!/usr/bin/env bash
# The simulated hosts' self-test (CTest netns_selftest): `hosts.sh selftest [--prefix P] PROBE`
# (PROBE: the build's netprobe; its netdelay beside it). First three hosts with 1gbit / 1ms links
# (netem, or netdelay on a kernel without it):
# 1. every host has its own hostname, and reaches every other one over TCP;
# 2. Open MPI started through the harness runs one process on each host (their hostnames);
# 3. none of the hosts' addresses or links is in the namespace the test runs in;
# 4. a round trip between two hosts takes >= 2 x the delay (and < 2 x the delay + 2 ms), and a
#    16 MB transfer runs at 50-105% of the rate;
# 5. link-down cuts a host off (a connection attempt fails), link-up restores it;
# 6. after `down`, no namespace, file or link of the prefix is left; `down` again does nothing.
# 7. up --cpus split: each host's processes (exec, mpirun's ranks) run on its own CPUs.
# Then two hosts on the kernel bridge without delay at 500mbit, split over the CPUs (4's
# throughput, 7, 6), and, where
# the first part used netem, two hosts through netdelay at 1gbit / 1ms (4, 6).
# Exit 77 (CTest SKIP_RETURN_CODE) where network namespaces cannot be made here.
set -u
trap "exit 1" INT TERM HUP   # so that the EXIT trap removes the hosts
H=$1 prefix=$2 PROBE=$(readlink -f "${3:-}")
[ -x "$PROBE" ] || { echo "usage: hosts.sh selftest [--prefix P] NETPROBE_BINARY"; exit 2; }
. "$(dirname "$H")/../mpi/lib.sh"
ND=$(dirname "$PROBE")/netdelay
hosts() { bash "$H" "$1" --prefix "$prefix" "${@:2}"; }
in_host() { local k=$1; shift; timeout 30 bash "$H" exec --prefix "$prefix" "$k" "$@" 2>&1; }
fails() { ! "$@" 2>/dev/null; }
passed=0 failed=0
links_before=$(ip -o link | wc -l)
port=7000

# up ARGS...: the hosts, or exit 77 / 1; $by: what delays the links
up() {
  hosts up --netdelay "$ND" "$@"
  local rc=$?
  [ $rc = 77 ] && exit 77
  [ $rc = 0 ] || { echo "FAIL: hosts.sh up $* (exit $rc)"; exit 1; }
  trap 'hosts down' EXIT
  by=$(hosts info | sed -n 's/^delay_by=//p')
}
# link RATE_MBIT DELAY_US: round trip and throughput from host 1 to host 2
link() {
  local rate=$1 delay=$2 rtt send med mbit
  port=$((port + 1))
  hosts exec 2 "$PROBE" serve $port 2 &
  sleep 0.2
  rtt=$(in_host 1 "$PROBE" rtt 10.77.0.2 $port 200)
  send=$(in_host 1 "$PROBE" send 10.77.0.2 $port 16000000)
  wait
  med=$(sed -n 's/.*median \([0-9]*\).*/\1/p' <<<"$rtt")
  mbit=$(sed -n 's/.*: \([0-9]*\) Mbit\/s/\1/p' <<<"$send")
  echo "link ${rate}mbit, delay ${delay}us by $by: round trip $rtt; $send"
  check "round trip median ${med:-none} us in [2 x $delay, 2 x $delay + 2000]" \
    [ "${med:-0}" -ge $((2 * delay)) ] && [ "${med:-0}" -lt $((2 * delay + 2000)) ]
  check "throughput ${mbit:-none} Mbit/s within 50-105% of ${rate}mbit" \
    [ "${mbit:-0}" -ge $((rate / 2)) ] && [ "${mbit:-0}" -le $((rate * 105 / 100)) ]
}
# gone: after down, nothing of the prefix is left
gone() {
  trap - EXIT
  hosts down
  check "no namespace of $prefix left: $(ip netns list | grep "^$prefix-" | tr '\n' ' ')" \
    [ -z "$(ip netns list | grep "^$prefix-")" ]
  check "no state directory left" [ ! -e "${OT_NETNS_RUN:-/run/ot-netns}/$prefix" ]
  check "no hosts file left" [ -z "$(ls -d /etc/netns/"$prefix"-* 2>/dev/null)" ]
  check "the links here as before" [ "$(ip -o link | wc -l)" = "$links_before" ]
  check "down again: nothing to do, exit 0" hosts down
}

up --hosts 3 --rate 1gbit --delay 1ms
first_by=$by
# 1. names and reachability
for k in 1 2 3; do
  name=$(hosts exec $k hostname)
  check "host $k is named $prefix-h$k (got '$name')" [ "$name" = "$prefix-h$k" ]
done
for j in 1 2 3; do
  port=$((port + 1))
  hosts exec $j "$PROBE" serve $port 2 &
  sleep 0.2
  for i in 1 2 3; do
    [ $i = $j ] && continue
    out=$(in_host $i "$PROBE" rtt 10.77.0.$j $port 3)
    check "host $i reaches host $j ($out)" grep -q "^rtt_us" <<<"$out"
  done
  wait
done
# 2. Open MPI on every host
out=$(timeout 60 bash "$H" mpirun --prefix "$prefix" -np 3 --map-by node hostname 2>&1)
names=$(grep -E "^$prefix-h[0-9]+\$" <<<"$out" | sort | tr '\n' ' ')
check "mpirun runs on the 3 hosts (got: $out)" [ "$names" = "$prefix-h1 $prefix-h2 $prefix-h3 " ]
# 3. nothing in this namespace
check "no address of the hosts here" [ -z "$(ip -o addr | grep -F ' 10.77.0.')" ]
check "no link added here" [ "$(ip -o link | wc -l)" = "$links_before" ]
# 4. the shaped link
if [ "$by" = none ]; then
  check "the delay is applied (netem, or netdelay at $ND)" false
else
  link 1000 1000
fi
# 5. a cut link
port=$((port + 1))
hosts exec 2 "$PROBE" serve $port 1 &
server=$!
sleep 0.2
hosts link-down 2
check "after link-down host 1 cannot reach host 2" fails timeout 3 bash "$H" exec --prefix "$prefix" 1 "$PROBE" rtt 10.77.0.2 $port 1
hosts link-up 2
sleep 0.5
out=$(in_host 1 "$PROBE" rtt 10.77.0.2 $port 3)
check "after link-up host 1 reaches host 2 again ($out)" grep -q "^rtt_us" <<<"$out"
wait $server
# 6.
gone

# the kernel bridge, no delay; each host on its own CPUs
up --hosts 2 --rate 500mbit --cpus split
check "without a delay: the kernel bridge (by: $by)" [ "$by" = none ]
link 500 0
# 7.
ncpu=$(nproc)
for k in 1 2; do
  want=$(hosts info | sed -n "s/^cpus=.*h$k:\([^ ]*\).*/\1/p")
  got=$(in_host $k grep Cpus_allowed_list /proc/self/status | cut -f2)
  check "host $k runs on its CPUs ($want; got '$got')" [ "${want:-none}" = "$got" ]
done
out=$(timeout 60 bash "$H" mpirun --prefix "$prefix" -np 2 --map-by node -- sh -c 'echo "$(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2)"' 2>&1 | sort)
want="$prefix-h1 $(hosts info | sed -n 's/^cpus=.*h1:\([^ ]*\).*/\1/p')"
check "an mpirun rank on host 1 runs on host 1's CPUs (got: $(echo $out))" grep -qx "$want" <<<"$out"
[ "$ncpu" -lt 2 ] ||
  check "the 2 hosts' CPUs differ on a machine of $ncpu" [ "$(in_host 1 grep Cpus_allowed_list /proc/self/status)" != "$(in_host 2 grep Cpus_allowed_list /proc/self/status)" ]
gone

# netdelay where the first part had netem
if [ "$first_by" = netem ]; then
  up --hosts 2 --rate 1gbit --delay 1ms --delay-by netdelay
  link 1000 1000
  gone
else
  echo "(the first part used $first_by: not repeated)"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
