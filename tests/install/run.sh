#!/usr/bin/env bash
# Install test (CTest: install_consumer): installs the build tree into a
# temporary prefix, then builds tests/install/consumer.c against the INSTALLED
# tree four ways and runs each on tests/golden/hf_gpt2 (load, one forward,
# logits and loss vs transformers):
#   pc_shared     cc + `pkg-config --cflags --libs ot`            -> libot.so
#   pc_static     cc + `pkg-config --static --cflags --libs ot`   -> libot.a
#   cm_shared     find_package(ot), target ot::ot                 -> libot.so
#   cm_static     find_package(ot), target ot::ot_static          -> libot.a
# The shared ones must resolve libot.so.N to the installed file (ldd), the
# static ones must need no libot.so; nothing installed may name the build tree.
# Usage (from the repository root): tests/install/run.sh <build dir> ["extra C and link flags"]
set -euo pipefail
build=$(cd "${1:?usage: run.sh <build dir> [flags]}" && pwd)
extra=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
model=$(cd "$here/../golden/hf_gpt2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ot_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH PKG_CONFIG_LIBDIR
cmake=${CMAKE:-cmake}   # CTest passes the build's cmake and C compiler (CC)
prefix=$tmp/prefix
fail=0
bad() { echo "FAIL: $*"; fail=1; }
step() { echo "-- $*"; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
pc=$(find "$prefix" -name ot.pc -path '*/pkgconfig/*' 2>/dev/null || true)
[ -n "$pc" ] || { bad "no pkgconfig/ot.pc under $prefix"; exit 1; }
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
libdir=$(pkg-config --variable=libdir ot)
incdir=$(pkg-config --variable=includedir ot)
for f in "$incdir/ot/ot.h" "$incdir/ot/model.h" "$libdir/libot.a" "$libdir/libot.so" \
         "$libdir/cmake/ot/otConfig.cmake" "$libdir/cmake/ot/otConfigVersion.cmake" \
         "$libdir/cmake/ot/otTargets.cmake" "$prefix/bin/ot"; do
  [ -e "$f" ] || bad "not installed: ${f#"$prefix"/}"
done
[ "$fail" = 0 ] || exit 1
so=$(readelf -d "$libdir/libot.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [ -z "$so" ] || [ ! -L "$libdir/libot.so" ] || [ ! -e "$libdir/$so" ]; then
  bad "libot.so: SONAME '$so' not installed as $libdir/$so"
fi
installed_so=$(realpath "$libdir/$so")
if grep -rlF "$build" "$libdir/cmake/ot" "$pc" >"$tmp/hits"; then
  bad "installed files name the build tree $build: $(tr '\n' ' ' <"$tmp/hits")"
fi
for f in "$installed_so" "$prefix/bin/ot"; do
  if readelf -d "$f" | grep -E 'RPATH|RUNPATH' | grep -qF "$build"; then bad "${f#"$prefix"/}: run path names $build"; fi
done
[ "$fail" = 0 ] || exit 1
echo "   ot.pc: $(pkg-config --modversion ot): $(pkg-config --cflags --libs ot) | static: $(pkg-config --static --libs ot)"
"$prefix/bin/ot" info >"$tmp/info.log" 2>&1 || { cat "$tmp/info.log"; bad "installed 'ot info' failed"; }

cc=${CC:-cc}
cflags="-std=c11 -Wall -Wextra -Werror -O1 $extra"
step "pkg-config builds"
# shellcheck disable=SC2046,SC2086
$cc $cflags "$here/consumer.c" -o "$tmp/pc_shared" $(pkg-config --cflags --libs ot) -lm \
    -Wl,-rpath,"$libdir" || bad "pc_shared: build failed"
# pkg-config --static lists the private libraries; -l:libot.a picks the archive next to libot.so
static_libs=$(pkg-config --static --libs ot | sed -E 's/(^| )-lot( |$)/\1-l:libot.a\2/')
# shellcheck disable=SC2046,SC2086
$cc $cflags "$here/consumer.c" -o "$tmp/pc_static" $(pkg-config --static --cflags ot) $static_libs -lm \
    || bad "pc_static: build failed"

step "find_package(ot) build"
if "$cmake" -S "$here" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" \
     -DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" >"$tmp/cm.log" 2>&1 &&
   "$cmake" --build "$tmp/cm" -j2 >>"$tmp/cm.log" 2>&1; then
  grep -E '^-- ot ' "$tmp/cm.log" | sed 's/^/   /'
  cp "$tmp/cm/consumer" "$tmp/cm_shared"
  cp "$tmp/cm/consumer_static" "$tmp/cm_static"
else
  cat "$tmp/cm.log"
  bad "find_package(ot) build failed"
fi
[ "$fail" = 0 ] || exit 1

for exe in pc_shared pc_static cm_shared cm_static; do
  step "$exe"
  ldd "$tmp/$exe" >"$tmp/ldd" || { cat "$tmp/ldd"; bad "$exe: ldd failed"; continue; }
  got=$(awk '$1 ~ /^libot\.so/ { print $3 }' "$tmp/ldd")
  case $exe in
    *_shared)
      if [ -z "$got" ] || [ "$(realpath "$got")" != "$installed_so" ]; then
        bad "$exe: libot resolves to '${got:-nothing}', not the installed $installed_so"; cat "$tmp/ldd"; continue
      fi
      echo "   ldd: $(grep '^\s*libot\.so' "$tmp/ldd" | xargs)";;
    *_static)
      [ -z "$got" ] || { bad "$exe: linked libot.a but needs $got"; continue; };;
  esac
  if ! "$tmp/$exe" "$model" >"$tmp/run.log" 2>&1; then
    cat "$tmp/run.log"; bad "$exe: run failed"; continue
  fi
  sed 's/^/   /' "$tmp/run.log"
done
[ "$fail" = 0 ] && echo "install: ok"
exit "$fail"
