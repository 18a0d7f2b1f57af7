#!/usr/bin/env bash
# Installs what ops-transformer needs on Debian 12 (run as root). Idempotent:
# when every package is present it only checks and returns in well under a second.
set -euo pipefail
# ocl-icd-opencl-dev: Debian's oneDNN CMake package asks for OpenCL, which
# libdnnl-dev only recommends (and --no-install-recommends skips).
# pkg-config: the install test builds a program against ot.pc.
# clang, libclang-rt-14-dev: the fuzz targets (scripts/fuzz.sh; libFuzzer and the sanitizers' runtimes).
# python3, python3-venv: the PyTorch package and its tests (scripts/test_python.sh).
# iproute2: the simulated hosts of the multi-host tests (tests/netns/hosts.sh: ip netns, tc).
pkgs=(build-essential cmake pkg-config libdnnl-dev ocl-icd-opencl-dev libopenmpi-dev openmpi-bin
      clang libclang-rt-14-dev python3 python3-venv iproute2)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing packages: ${missing[*]} — run as root (or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
