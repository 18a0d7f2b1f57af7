#!/usr/bin/env bash
# Checks the layering of ARCHITECTURE.md on every #include "..." of the library:
#  - a file under src/<layer>/ includes only headers of its own layer or of the
#    layers below it (core < ops < io < model < dist < train < infer < serve < cli),
#    whether it names a src/ header ("model/graph.h") or a public one ("ot/model.h");
#  - a public header include/ot/X.h includes only public headers of its own or a
#    lower layer (ot/ot.h, the umbrella, belongs to the top);
#  - a kernel folder (src/core/kern/, src/ops/kern/: the SIMD kernels) includes
#    only core/simd.h, internal.h and the kernel prototype headers beside it
#    (one <family>_k.h per kernel family, also included by the kernels' callers,
#    so the compiler checks every signature), never a public header or another
#    layer's header; and every OT_KDECL lives in such a prototype header (the
#    kernels are compiled with -Wmissing-prototypes, so a kernel whose header
#    is not included fails to build);
#  - core calls nothing above it (no OT_KPICK of a kernel core does not own).
# Since every include points down (or stays in its folder), the folders form no
# cycle. Exit status 1 with one line per violation, 0 when clean.
# Usage: tools/check_layers.sh [REPO_DIR]
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$repo"

layers=(core ops io model dist train infer serve cli)
rank_of_layer() {
  local i
  for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo -1
}
# The layer a public header belongs to.
rank_of_public() {
  case "$1" in
    core) rank_of_layer core ;;
    ops|attn|quant) rank_of_layer ops ;;
    io|data) rank_of_layer io ;;
    model|dist|train|infer|serve) rank_of_layer "$1" ;;
    plan) rank_of_layer train ;;   # the layout planner lives in the train layer
    ot) rank_of_layer cli ;;   # the umbrella: the command (and users) only
    *) echo -1 ;;
  esac
}

bad=0
report() { echo "layering: $*"; bad=1; }

# Resolves what `file` includes as "inc" to the layer rank of the included file;
# prints "RANK" or "unknown".
rank_of_include() {
  local file=$1 inc=$2 dir
  case "$inc" in
    ot/*.h) local n=${inc#ot/}; rank_of_public "${n%.h}"; return ;;
    internal.h) rank_of_layer core; return ;;
  esac
  dir=$(dirname "$file")
  if [ -f "$dir/$inc" ]; then inc=${dir#src/}/$inc; fi   # beside the includer
  local top=${inc%%/*}
  if [ "$top" != "$inc" ]; then rank_of_layer "$top"; return; fi
  echo unknown
}

while IFS= read -r -d '' f; do
  rel=${f#./}
  layer=${rel#src/}; layer=${layer%%/*}
  [ "$rel" = src/internal.h ] && layer=core   # the library-wide internal header: core level
  own=$(rank_of_layer "$layer")
  [ "$own" -ge 0 ] || { report "$rel: in no layer folder (${layers[*]})"; continue; }
  while IFS= read -r line; do
    lineno=${line%%:*}
    inc=$(sed -E 's/^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")
    case "$rel" in
      src/*/kern/*)
        kdir=$(dirname "$rel")
        if [ "$inc" = core/simd.h ] || [ "$inc" = internal.h ] || [ -f "$kdir/$inc" ]; then continue; fi
        report "$rel:$lineno: a kernel includes \"$inc\" (kern/ sees only core/simd.h, internal.h and its prototype headers)"
        continue ;;
    esac
    r=$(rank_of_include "$rel" "$inc")
    if [ "$r" = unknown ] || [ "$r" -lt 0 ]; then
      report "$rel:$lineno: \"$inc\" is in no layer"
    elif [ "$r" -gt "$own" ]; then
      report "$rel:$lineno: \"$inc\" points up (a $layer file includes a header of a higher layer)"
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$rel" || true)
done < <(find src -name '*.[ch]' -print0 | sort -z)

# Kernel prototypes: declared only in a kernel folder's *_k.h (never in a caller).
while IFS= read -r hit; do
  case "${hit%%:*}" in
    src/internal.h|src/*/kern/*_k.h) ;;
    *) report "$hit: OT_KDECL outside a kernel prototype header (move it to src/<layer>/kern/<family>_k.h)" ;;
  esac
done < <(grep -rnE '^[[:space:]]*OT_KDECL\(' src bench tests tools 2>/dev/null | cut -d: -f1,2 || true)

for h in include/ot/*.h; do
  n=$(basename "$h" .h)
  own=$(rank_of_public "$n")
  [ "$own" -ge 0 ] || { report "$h: a public header of no layer (add it to rank_of_public)"; continue; }
  while IFS= read -r line; do
    lineno=${line%%:*}
    inc=$(sed -E 's/^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")
    case "$inc" in
      ot/*.h) m=${inc#ot/}; r=$(rank_of_public "${m%.h}") ;;
      *) report "$h:$lineno: a public header includes the private \"$inc\""; continue ;;
    esac
    if [ "$r" -lt 0 ] || [ "$r" -gt "$own" ]; then
      report "$h:$lineno: \"$inc\" points up (a public header includes a higher layer's)"
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$h" || true)
done

if [ "$bad" = 0 ]; then echo "layering: ok ($(find src -name '*.[ch]' | wc -l) source files, $(ls include/ot/*.h | wc -l) public headers)"; fi
exit "$bad"
