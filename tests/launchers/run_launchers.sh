#!/usr/bin/env bash
# run_launchers.sh [BUILD_DIR]: the perf tool (tools/perf/perf.c) under real
# launchers, each run with nothing set but the library's location
# (LD_LIBRARY_PATH) and, for Slurm, the test cluster's SLURM_CONF:
#   launch-srun-pmix   `srun -n 4 -O perf ...` three times in a row on a
#                      one-node Slurm cluster this script starts (MpiDefault=pmix)
#   launch-srun-pmi2   `srun --mpi=pmi2 -n 4 -O perf ...` three times
#                      (SKIP without libpmi2.so.0: Debian's libpmi2-0; a
#                      copy elsewhere: PERF_PMI2_LIBRARY=/path/libpmi2.so.0)
#   launch-mpirun      `mpirun -np 4 --oversubscribe --allow-run-as-root perf ...`
#                      three times (Open MPI's PMIx)
#   launch-id-file     --id-file with ranks that only know their rank from the
#                      environment: the file is mode 0600, named per job, kept
#                      fresh for a rank that starts late, removed afterwards;
#                      a stale file at that name is never read; three reruns
#   launch-id-file-attacks  another user's file, links at the id file's and the
#                      probe's names, two jobs on one path, future-dated and
#                      stale files: each refused with a clear message
# Every run must exit 0 and print the expected sizes, "through PMIx" (or
# PMI-2) on its launcher line and "# Out of bounds values : 0 OK".
# The cluster: munged with its own key and socket directory, slurmctld and
# slurmd on 127.0.0.1 with their own ports, state, spool, pid and log files,
# all under one temporary directory; everything stopped and removed on exit.
# Prints "PASS name", "FAIL name" (with its log) or "SKIP name: reason" per
# case, and last "N passed, M failed, K skipped". Needs root for Slurm.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
out=$build/tests/launchers
mkdir -p "$out" || exit 1
passed=0 failed=0 skipped=0
case_start=$SECONDS
pass() { passed=$((passed + 1)); echo "PASS $1  ($((SECONDS - case_start)) s)"; case_start=$SECONDS; }
skip() { skipped=$((skipped + 1)); echo "SKIP $1: $2"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL $1  ($((SECONDS - case_start)) s)"
  case_start=$SECONDS
  [ -f "${2:-}" ] && sed 's/^/    /' "$2" | tail -n 60
}
finish() {
  echo "$passed passed, $failed failed, $skipped skipped"
  [ $failed -eq 0 ]
  exit
}

export PKG_CONFIG_PATH="$build/lib/pkgconfig"
perf=$out/perf
# the compile (-c) through the compile cache (tests/c/compile-cache.sh), the link every time
. "$root/tests/c/compile-cache.sh"
# shellcheck disable=SC2046
if ! cc_program gcc "$perf" -std=c11 -O2 -Wall -Wextra -Werror $(pkg-config --cflags mscclpp) "$root/tools/perf/perf.c" \
  $(pkg-config --libs mscclpp) -pthread >"$out/build.log" 2>&1; then
  fail launchers-build "$out/build.log"
  finish
fi
args=(-b 8 -e 64K -f 8 -n 3 -w 1 -c 1)
want_sizes="16 64 512 4096 32768"
clean_env=(env -i "PATH=$PATH" "HOME=${HOME:-/root}" "LD_LIBRARY_PATH=$build/lib")

# check_run LOG RC STORE: one run's output is a whole, correct perf run through STORE
check_run() {
  local log=$1 rc=$2 store=$3 sizes
  sizes=$(awk '$1 ~ /^[0-9]+$/ {printf "%s%s", sep, $1; sep=" "}' "$log")
  if [ "$rc" -ne 0 ]; then echo "-- exit $rc" >>"$log"; return 1; fi
  if [ "$sizes" != "$want_sizes" ]; then echo "-- sizes '$sizes', want '$want_sizes'" >>"$log"; return 1; fi
  if [ -n "$store" ] && ! grep -q "^# launcher: .*$store" "$log"; then
    echo "-- the launcher line does not name $store" >>"$log"
    return 1
  fi
  if [ "$(awk '$1 ~ /^[0-9]+$/ && ($9 != "0" || $13 != "0")' "$log" | wc -l)" != 0 ]; then
    echo "-- a row's #wrong is not 0" >>"$log"
    return 1
  fi
  grep -q '^# Out of bounds values : 0 OK$' "$log" && grep -q '^# Avg bus bandwidth' "$log" ||
    { echo "-- no closing lines" >>"$log"; return 1; }
}

# three_runs NAME STORE CMD...: CMD three times in a row, each checked
three_runs() {
  local name=$1 store=$2 log=$out/$1.log ok=1 i rc
  shift 2
  : >"$log"
  for i in 1 2 3; do
    echo "== run $i: $*" >>"$log"
    local t0=$SECONDS
    timeout -k 5 40 "$@" >"$log.run" 2>&1
    rc=$?
    cat "$log.run" >>"$log"
    echo "-- run $i took $((SECONDS - t0)) s" >>"$log"
    check_run "$log.run" "$rc" "$store" || { ok=0; cat "$log.run" >>"$log"; }
  done
  rm -f "$log.run"
  if [ $ok = 1 ]; then pass "$name"; else fail "$name" "$log"; fi
}

# ---- Open MPI ----
if command -v mpirun >/dev/null 2>&1; then
  three_runs launch-mpirun "through PMIx" "${clean_env[@]}" mpirun -np 4 --oversubscribe --allow-run-as-root \
    "$perf" "${args[@]}"
else
  skip launch-mpirun "mpirun not found (Debian: openmpi-bin)"
fi

# ---- --id-file, ranks from the environment only ----
. "$here/idfile_case.sh"
idfile_case
idfile_attacks_case

# ---- Slurm ----
. "$here/slurm_cluster.sh"
if why=$(cluster_cannot); then
  skip launch-srun "$why"
  finish
fi
trap cluster_stop EXIT
if ! cluster_start "$out/cluster.log"; then
  fail launch-srun-cluster "$out/cluster.log"
  finish
fi
three_runs launch-srun-pmix "through PMIx" "${clean_env[@]}" "SLURM_CONF=$cluster_conf" srun -n 4 -O "$perf" "${args[@]}"
# PMI-2: libpmi2.so.0 where the loader finds it, or a copy named by PERF_PMI2_LIBRARY
pmi2=()
if [ -n "${PERF_PMI2_LIBRARY:-}" ] && [ -f "$PERF_PMI2_LIBRARY" ]; then
  pmi2=("PERF_PMI2_LIBRARY=$PERF_PMI2_LIBRARY")
elif ldconfig -p 2>/dev/null | grep -q 'libpmi2\.so\.0 '; then
  pmi2=("PERF_PMI2_LIBRARY=")
fi
if [ ${#pmi2[@]} -gt 0 ]; then
  three_runs launch-srun-pmi2 "through PMI-2" "${clean_env[@]}" "SLURM_CONF=$cluster_conf" "${pmi2[@]}" \
    srun --mpi=pmi2 -n 4 -O "$perf" "${args[@]}"
else
  skip launch-srun-pmi2 "libpmi2.so.0 not installed (Debian: libpmi2-0)"
fi
cluster_stop
trap - EXIT
finish
