#!/usr/bin/env bash
# The shared library exports exactly the public API (CTest: install_symbols).
# Usage: tests/install/symbols.sh <libot.so> <include/ot>
# Checks libot.so's dynamic symbol table (nm -D --defined-only) against the
# functions that include/ot/*.h declare:
#  - every exported symbol is declared in a public header (so no ot__* name,
#    no kernel variant *_portable / *_avx2 / *_avx512, no other helper);
#  - every function a public header declares is exported (else a program that
#    calls it fails to link);
#  - the main entry points are there, and the library has a versioned SONAME.
set -euo pipefail
lib=${1:?usage: symbols.sh <libot.so> <include/ot>}
inc=${2:?usage: symbols.sh <libot.so> <include/ot>}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The headers without comments, as one line.
for h in "$inc"/*.h; do sed -e 's://.*$::' "$h"; done | tr '\n' ' ' |
  sed -e 's:/\*\([^*]\|\*[^/]\)*\*/::g' >"$tmp/headers"
# Declared functions: `ot_name(`; static inline ones are compiled into callers.
grep -oE '(^|[^A-Za-z0-9_])ot_[A-Za-z0-9_]+\(' "$tmp/headers" | grep -oE 'ot_[A-Za-z0-9_]+' |
  sort -u >"$tmp/declared"
grep -oE 'static +inline[^(;{}]*[^A-Za-z0-9_]ot_[A-Za-z0-9_]+\(' "$tmp/headers" |
  grep -oE 'ot_[A-Za-z0-9_]+\($' | tr -d '(' | sort -u >"$tmp/inline"
comm -23 "$tmp/declared" "$tmp/inline" | grep -v '^ot__' >"$tmp/api" || true
[ -s "$tmp/api" ] || bad "no function declared in $inc/*.h"

# Exported: defined dynamic symbols, version suffix dropped; the version node (A) is no symbol.
nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u >"$tmp/exported"
echo "$lib: $(wc -l <"$tmp/exported") exported symbols, $(wc -l <"$tmp/api") public functions declared"

n=$(grep -c '^ot__' "$tmp/exported" || true)
[ "$n" = 0 ] || bad "$n internal ot__* symbols exported, e.g. $(grep '^ot__' "$tmp/exported" | head -3 | tr '\n' ' ')"
n=$(grep -cE '_(portable|avx2|avx512)$' "$tmp/exported" || true)
[ "$n" = 0 ] || bad "$n kernel variants exported, e.g. $(grep -E '_(portable|avx2|avx512)$' "$tmp/exported" | head -3 | tr '\n' ' ')"
comm -23 "$tmp/exported" "$tmp/api" >"$tmp/extra"
if [ -s "$tmp/extra" ]; then
  bad "$(wc -l <"$tmp/extra") exported symbols are not declared in $inc/*.h (the version script must hide them):"
  head -20 "$tmp/extra" | sed 's/^/  /'
fi
comm -13 "$tmp/exported" "$tmp/api" >"$tmp/missing"
if [ -s "$tmp/missing" ]; then
  bad "$(wc -l <"$tmp/missing") functions declared in $inc/*.h are not exported (define them or drop the declaration):"
  head -20 "$tmp/missing" | sed 's/^/  /'
fi

for f in ot_last_error ot_status_name ot_isa_active ot_threads_set ot_st_open ot_st_find ot_st_close \
         ot_st_write ot_gemm ot_linear_fwd ot_attn_flash_fwd ot_adamw ot_model_create ot_model_init \
         ot_model_load_hf ot_model_forward ot_model_backward ot_model_logits ot_model_free \
         ot_bpe_load ot_bpe_encode ot_generate ot_trainer_create ot_trainer_step ot_dist_init; do
  grep -qx "$f" "$tmp/exported" || bad "entry point $f is not exported"
done

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[[ "$soname" =~ ^libot\.so\.[0-9]+$ ]] || bad "SONAME '$soname' (want libot.so.<major>)"

[ "$fail" = 0 ] && echo "symbols: ok (SONAME $soname)"
exit "$fail"
