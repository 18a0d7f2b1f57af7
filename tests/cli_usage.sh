#!/usr/bin/env bash
# The `ot` command's answers to a mistyped or unknown command: rc 2, the
# command named as unknown, a did-you-mean for a near miss, then the usage.
# Usage: tests/cli_usage.sh PATH/TO/ot
set -u
ot=${1:?usage: $0 PATH/TO/ot}
fail=0
check() {  # check ARGS... : expects rc 2 and stderr matching $want
  local out rc
  out=$("$ot" "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" != 2 ]; then echo "FAIL: ot $*: rc $rc, expected 2"; fail=1; fi
  if ! grep -qF -- "$want" <<<"$out"; then echo "FAIL: ot $*: no '$want' in: $out"; fail=1; fi
  if ! grep -q "^usage: ot <command>" <<<"$out"; then echo "FAIL: ot $*: no usage after the message"; fail=1; fi
}
want="ot: unknown command 'trian' (did you mean 'train'?)"; check trian
want="ot: unknown command 'genrate' (did you mean 'generate'?)"; check genrate
want="ot: unknown command 'xyzzyq'"; check xyzzyq
if "$ot" xyzzyq 2>&1 | grep -q "did you mean"; then echo "FAIL: a suggestion for a far-off command"; fail=1; fi
[ "$fail" = 0 ] && echo "cli usage: ok"
exit "$fail"
