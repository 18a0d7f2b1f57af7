# shellcheck shell=bash
# Shell helpers of the shell tests: `. tests/lib.sh`. The caller sets passed=0 failed=0 and ends
# with  echo "$passed passed, $failed failed"; [ "$failed" = 0 ]

# check WHAT COND...: COND succeeds, else WHAT is printed as a failure
check() {
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what"; fi
}
# has TEXT FILE: FILE holds TEXT (fixed string)
has() { grep -qF -- "$1" "$2"; }
# fails RC WANT ARGS...: `$ot ARGS` (the caller's ot binary) exits RC with WANT on stderr
fails() {
  local rc=$1 want=$2 out got
  shift 2
  out=$("$ot" "$@" 2>&1 >/dev/null); got=$?
  if [ "$got" = "$rc" ] && grep -qF -- "$want" <<<"$out"; then passed=$((passed + 1))
  else failed=$((failed + 1)); echo "FAIL: ot $*: rc $got (want $rc), stderr: $(head -2 <<<"$out") (want '$want')"; fi
}
