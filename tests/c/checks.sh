# checks.sh: sourced (bash) by the scripts that test the test tooling (compile-cache-test.sh,
# golib-cache-test.sh): a temporary directory, and one "ok"/"FAIL" line per check.
#
#   checks_init NAME KEEP_VAR   makes $tmp (${TMPDIR:-/tmp}/mscclpp-NAME.XXXXXX), removed on exit
#                               unless the variable KEEP_VAR is set; status=0
#   check WHAT CONDITION...     runs CONDITION: prints "ok   WHAT", or "FAIL WHAT" and sets status=1
checks_init() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-$1.XXXXXX") || exit 1
  checks_keep=$2
  trap '[ -n "${!checks_keep:-}" ] || rm -rf "$tmp"' EXIT INT TERM
  status=0
}
check() {
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; status=1; fi
}
