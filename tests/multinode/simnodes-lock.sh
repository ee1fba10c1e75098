# simnodes-lock.sh: sourced by the suites that make simulated nodes (tests/multinode/
# run_multinode.sh, tests/faults/run.sh). Both compare the machine before and after (the host's
# namespaces, links and mounts in mn-nothing-left, /dev/shm in the faults' litter count) and
# both time faults (SIGSTOP, link flaps) sized for one suite's load; make test runs them in
# different lanes, and two clones may run make test at once: one holds the machine's lock at
# a time.
#
#   simnodes_lock NAME SCRIPT [ARGS...]   runs SCRIPT under the lock (the caller's own file,
#                                         run again) unless this process already holds it,
#                                         then exits with its status; returns when held
#
# flock -o: the ranks and holders the suite starts do not inherit the lock. The wait is bounded
# (MSCCLPP_SIMNODES_LOCK_WAIT seconds, default 900); past it, one FAIL line and status 1.
simnodes_lock() {
  [ "${MSCCLPP_SIMNODES_LOCK_HELD:-}" = 1 ] && return 0
  local name=$1 lock=/tmp/mscclpp-simnodes.lock wait=${MSCCLPP_SIMNODES_LOCK_WAIT:-900} rc
  shift
  MSCCLPP_SIMNODES_LOCK_HELD=1 flock -o -E 75 -w "$wait" "$lock" bash "$@"
  rc=$?
  if [ $rc -eq 75 ]; then
    echo "FAIL $name (another suite held the simulated nodes' lock $lock for ${wait} s)"
    echo "0 passed, 1 failed"
    exit 1
  fi
  exit $rc
}
