#!/usr/bin/env bash
# Fresh-machine check: proves that the README's set-up works on a Debian 12 with
# nothing installed. Builds a minimal bookworm root with debootstrap (from the
# mirror the host's apt uses), copies this checkout's tracked files into it (as
# they are in the working tree, uncommitted edits included), then runs inside it
# (chroot, as root): scripts/setup.sh, scripts/build.sh build, and a smoke test
# (ot info, a 20-step ot train on the bundled corpus, a 2-rank mpirun ot train,
# ctest test_core). Every step prints its elapsed time; the first that fails is
# named with its exit status and the end of its log, and the check exits 1.
# /proc, /sys, /dev/pts and /dev/shm are mounted for the chroot and always
# unmounted on exit (also on failure or Ctrl-C), and the root is removed.
#
# Usage (as root, needs the network; 15-18 minutes on a busy 2-core machine, a third to
# a half of it the README's full build):
#   scripts/fresh-machine-check.sh [--keep]
#     --keep   keep the root and the step logs (their path is printed) for debugging:
#              chroot DIR/root /bin/bash
set -euo pipefail
set -m  # each step runs as a job in its own process group: a signal ends the whole step
cd "$(dirname "$0")/.."
repo=$PWD

keep=0
case "${1:-}" in
  "") ;;
  --keep) keep=1 ;;
  -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  *) echo "fresh-machine-check: unknown argument '$1' (usage: $0 [--keep])" >&2; exit 2 ;;
esac
if [ "$(id -u)" != 0 ]; then
  echo "fresh-machine-check: must run as root (debootstrap, mount, chroot): sudo $0 $*" >&2
  exit 2
fi
if ! git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "fresh-machine-check: $repo is not a git checkout (its tracked files are what is copied)" >&2
  exit 2
fi

work=""     # DIR: DIR/root is the chroot, DIR/logs the step logs
root=""
step_name=""
step_pid=""  # the running step: a job in its own process group (set -m)
n=0
t_start=$SECONDS

# The Debian mirror the host's apt uses (deb822 or one-line format), else deb.debian.org.
host_mirror() {
  local m=""
  if [ -r /etc/apt/sources.list.d/debian.sources ]; then
    m=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$m" ] && [ -r /etc/apt/sources.list ]; then
    m=$(awk '$1 == "deb" && $0 !~ /security/ {
               for (i = 2; i <= NF; i++) if ($i ~ /^(https?|ftp|file):/) { print $i; exit } }' \
          /etc/apt/sources.list)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

# Mount points at or under the root, deepest first.
root_mounts() {
  awk -v r="$root" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/self/mounts | sort -r
}

# Ends every process whose root directory is the chroot (a build or mpirun left
# running when the check is interrupted).
kill_root_procs() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    if [ "$r" = "$root" ]; then kill -KILL "${p#/proc/}" 2>/dev/null || true; fi
  done
}

cleanup() {
  local rc=$? m t0
  trap - EXIT INT TERM HUP
  if [ -n "$step_pid" ]; then  # (stderr off: no "Terminated" job notice)
    {
      kill -TERM -- "-$step_pid" || true
      sleep 1
      kill -KILL -- "-$step_pid" || true
      wait "$step_pid" || true
    } 2>/dev/null
  fi
  [ -n "$work" ] && [ -d "$work" ] || exit "$rc"
  kill_root_procs
  sleep 0.2
  for m in $(root_mounts); do
    umount "$m" 2>/dev/null || umount -l "$m" || true
  done
  if [ -n "$(root_mounts)" ]; then
    echo "fresh-machine-check: still mounted under $root, NOT removing it:" >&2
    root_mounts >&2
    exit 1
  fi
  if [ "$keep" = 1 ]; then
    echo "kept: $root (chroot $root /bin/bash) and the step logs in $work/logs"
  else
    t0=$SECONDS
    rm -rf --one-file-system "$work"
    echo "removed $work in $((SECONDS - t0)) s (check: $((SECONDS - t_start)) s in all)"
  fi
  exit "$rc"
}
interrupted() {
  echo >&2
  echo "fresh-machine check INTERRUPTED (signal $1) during step '${step_name:-start}'" >&2
  exit $((128 + $2))
}
trap cleanup EXIT
trap 'interrupted INT 2' INT
trap 'interrupted TERM 15' TERM
trap 'interrupted HUP 1' HUP

# step NAME SHOW CMD...: runs CMD with its output in a log, prints the elapsed
# time and the log's last SHOW lines (all with SHOW = all); on failure names the
# step, its exit status and the end of its log, and exits 1.
step() {
  local name=$1 show=$2 log rc=0 t0=$SECONDS
  shift 2
  n=$((n + 1))
  step_name=$name
  log="$work/logs/$(printf '%02d' "$n")-$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' _).log"
  echo "[$n] $name ..."
  "$@" </dev/null >"$log" 2>&1 &
  step_pid=$!
  wait "$step_pid" || rc=$?
  step_pid=""
  if [ "$rc" != 0 ]; then
    echo "fresh-machine check FAILED at step '$name' (rc $rc, after $((SECONDS - t0)) s);" \
         "last lines of its log:" >&2
    tail -n 40 "$log" | sed 's/^/  | /' >&2
    [ "$keep" = 1 ] || echo "(rerun with --keep to keep the root and the whole log)" >&2
    exit 1
  fi
  if [ "$show" = all ]; then sed 's/^/  | /' "$log"; else tail -n "$show" "$log" | sed 's/^/  | /'; fi
  echo "[$n] $name: ok in $((SECONDS - t0)) s"
}

# Tracked files of the working tree (uncommitted edits included, deleted ones skipped).
copy_checkout() {
  mkdir -p "$root/root/ops-transformer" || return 1
  git -C "$repo" ls-files -z | (
    cd "$repo" || exit 1
    while IFS= read -r -d '' f; do
      if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
    done
  ) | tar -C "$repo" --null --no-recursion -T - -cf - \
    | tar -C "$root/root/ops-transformer" -xf - || return 1
  echo "copied $(git -C "$repo" ls-files | wc -l) tracked files ($(du -sh "$root/root/ops-transformer" | cut -f1))"
}

mount_fs() {
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" || return 1
  mkdir -p "$root/dev/pts" "$root/dev/shm" || return 1
  mount -t proc proc "$root/proc" || return 1
  mount -t sysfs sysfs "$root/sys" || return 1
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts" || return 1
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm" || return 1
  root_mounts
}

# in_root CMD: runs the shell command CMD in the checkout inside the root, with a clean environment.
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "set -euo pipefail; cd /root/ops-transformer; $1"
}

work=$(mktemp -d "${TMPDIR:-/var/tmp}/ot-fresh.XXXXXX")
root=$work/root
case "$work" in
  *[[:space:]]*) echo "fresh-machine-check: '$work' has white space; set TMPDIR to a plain path" >&2; exit 2 ;;
esac
mkdir -p "$root" "$work/logs"
mirror=$(host_mirror)
echo "fresh-machine check: Debian bookworm from $mirror in $root"

if ! command -v debootstrap >/dev/null; then
  step "apt-get install debootstrap" 1 bash -c \
    "DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap"
fi
step "debootstrap" 1 debootstrap --variant=minbase bookworm "$root" "$mirror"
step "copy checkout" 1 copy_checkout
step "mount /proc /sys /dev/pts /dev/shm" 0 mount_fs
step "setup.sh" 3 in_root "scripts/setup.sh"
step "build.sh build" 2 in_root "scripts/build.sh build"
step "ot info" all in_root "./build/ot info"
step "ot train (20 steps)" 4 in_root \
  "./build/ot train --steps 20 --eval-every 10 --eval-batches 2 --batch-size 4 --seq-len 128 \
     --out out/train && test -e out/train/latest"
step "mpirun -np 2 ot train" 2 in_root \
  "mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1 ./build/ot train \
     --data-parallel 2 --steps 2 --eval-every 0 --eval-batches 1 --batch-size 4 --seq-len 128 \
     --out out/mpi"
step "ctest test_core" 3 in_root "cd build && ctest --output-on-failure -R '^test_core\$'"
step_name=""
echo "fresh-machine check passed: $n steps in $((SECONDS - t_start)) s"
