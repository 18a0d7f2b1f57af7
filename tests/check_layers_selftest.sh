#!/usr/bin/env bash
# tools/check_layers.sh catches what it is for (CTest check_layers): on this
# tree it passes; on a copy of src/ and include/ with one planted violation at
# a time it fails, naming the file: an include that points up (dist -> train),
# a public header including a higher one, a kernel including a public header,
# an OT_KDECL in a kernel's caller, a file outside every layer folder.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
check="$repo/tools/check_layers.sh"
tmp=$(mktemp -d /tmp/ot_layers_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$(bash "$check" "$repo") || { echo "$out"; fail "check_layers.sh fails on this tree"; }
echo "$out"

# plant NAME FILE LINE EXPECTED: a copy with LINE appended to FILE must fail naming EXPECTED
plant() {
  local name=$1 file=$2 line=$3 want=$4 d="$tmp/$1"
  mkdir -p "$d" && cp -r "$repo/src" "$repo/include" "$d/"
  mkdir -p "$(dirname "$d/$file")" && printf '%s\n' "$line" >> "$d/$file"
  local got rc
  got=$(bash "$check" "$d" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "$name: not detected (exit 0)"
  grep -q -- "$want" <<<"$got" || { echo "$got"; fail "$name: the message does not name $want"; }
  echo "detected: $name: $(grep -- "$want" <<<"$got" | head -1)"
}
plant upward      src/dist/comm.c          '#include "train/train_impl.h"'   'src/dist/comm.c:.*points up'
plant public-up   include/ot/ops.h         '#include "ot/train.h"'           'include/ot/ops.h:.*points up'
plant core-up     src/core/mem.c           '#include "ot/ops.h"'             'src/core/mem.c:.*points up'
plant kern-public src/ops/kern/act.c       '#include "ot/quant.h"'           'src/ops/kern/act.c:.*a kernel includes'
plant kern-up     src/core/kern/convert.c  '#include "ops/gemm_impl.h"'      'src/core/kern/convert.c:.*a kernel includes'
plant kdecl       src/ops/act.c            'OT_KDECL(void, k_x, (int a));'   'src/ops/act.c:.*OT_KDECL outside'
plant no-layer    src/misc/x.c             '#include "internal.h"'           'src/misc/x.c: in no layer'
echo "check_layers: ok"
