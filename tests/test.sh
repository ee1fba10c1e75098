#!/usr/bin/env bash
# test.sh [BUILD_DIR]: what `make test` runs after `make deps` and `make`:
# the Go tests (-race, through `go test -json`, so every skipped test is
# seen; -vet=all: every vet check on every package as the tag builds it),
# go vet without the tag where that build holds files the tagged one does
# not (go_vet below), the C/C++
# conformance suite (tests/c/run.sh, which runs the SHM, tools and multinode
# suites too), the docs' blocks (tests/docs/check.sh) and the short
# fault-injection run (tests/faults/run.sh with FAULTS_TEST_CATS and
# FAULTS_TEST_RUNS), then one closing summary over all of them: each skip
# with its reason, marked allowed or not by tests/skips-allowed.txt, the ten
# slowest checks, each phase's wall and CPU time (user + system of its
# processes), and last "N passed, M failed, K skipped".
#
# The phases run in three lanes side by side (MSCCLPP_TEST_LANES=1: one
# after another): go vet (a listing, mostly); the Go tests, then the faults; the C suite, then
# the docs (whose `make` must not meet the C suite's builds). The fault runs' simulated nodes
# wait for the multinode suite's, and the other way round (tests/multinode/simnodes-lock.sh:
# each counts what is left on the machine). Much of a lane's time is one process at work or ranks
# waiting out a timeout, so the others keep both CPUs busy. A phase's output
# is kept in its log and printed whole when the phase ends, so lines of two
# lanes never interleave.
#
# Exit status 1 when a check failed; with MSCCLPP_CI=1 (.ci/run) also when a
# skip is not on the allow-list, i.e. a check this machine could have run.
# Environment: GO (default go), MSCCLPP_TEST_FILTER (the C suite's filter; the
# Go tests always run all), MSCCLPP_TEST_LANES (3, or 1), MSCCLPP_TEST_JOBS
# (tests/c/run.sh: 1 runs its sub-suites after its own cases).
#
# The Go tests build with -tags mscclpp_testhooks: the test harnesses
# (cuda/harness.go, impl/p2p/harness.go, ib/harness.go) and the tests that drive them are behind
# that tag, so the shipped library (built without it) holds only the product.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root" || exit 1
build=${1:-build}
GO=${GO:-go}
: "${FAULTS_TEST_CATS:=shm-kill,shm-flap,eth-kill,eth-stop,eth-flap,eth-linkdown,eth-linkflap,ib-kill,ib-stop,ib-flap,shm-destroy,eth-destroy,ib-destroy}"
: "${FAULTS_TEST_RUNS:=13}"
lanes=${MSCCLPP_TEST_LANES:-3}
out=$build/tests/summary
mkdir -p "$out" || exit 1
rm -f "$out"/*.records "$out"/*.log "$out"/*.phase

start=$(date +%s.%N)
ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
# cpu_of PID: the CPU time of the shell PID and of its reaped children, user + system
cpu_of() { awk -v t="$ticks" '{ printf "%.2f", ($14 + $15 + $16 + $17) / t }' "/proc/$1/stat"; }
if ! $GO build -o "$out/summary" ./tests/summary; then
  echo "FAIL build tests/summary"
  exit 1
fi
records=$out/steps.records
: >"$records"

# phase NAME CMD...: runs CMD (a function of this file) with its output in $out/NAME.log,
# then prints that log whole (one phase at a time: flock) and notes the phase's wall and
# CPU time in $out/NAME.phase; phase_secs: its wall time. Returns CMD's status.
phase() {
  local name=$1 w0 c0 rc me=$BASHPID # this lane's shell ($(...) runs in a subshell)
  shift
  w0=$(date +%s.%N) c0=$(cpu_of "$me")
  "$@" >"$out/$name.log" 2>&1
  rc=$?
  phase_secs=$(awk -v a="$w0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  awk -v n="$name" -v s="$phase_secs" -v a="$c0" -v b="$(cpu_of "$me")" \
    'BEGIN { printf "#   %-12s %6.1f s wall, %6.1f s CPU\n", n, s, b - a }' >"$out/$name.phase"
  flock "$out/print.lock" cat "$out/$name.log"
  return $rc
}

# go vet without the tag, on what go test -vet=all does not vet: go test vets every package
# (with or without test files) as the tag builds it, and that build holds every file of the
# build without the tag, unless a file is left out by the tag (//go:build !mscclpp_testhooks).
# So the packages vetted here are those where the build without the tag holds a file (or the
# package) that the tagged build does not: none while no file says !mscclpp_testhooks.
go_files() { # [TAGS]: "package file" for each Go file of every package, tests included
  $GO list "$@" -f '{{$p := .ImportPath}}{{range .GoFiles}}{{$p}} {{.}}{{"\n"}}{{end}}{{range .CgoFiles}}{{$p}} {{.}}{{"\n"}}{{end}}{{range .TestGoFiles}}{{$p}} {{.}}{{"\n"}}{{end}}{{range .XTestGoFiles}}{{$p}} {{.}}{{"\n"}}{{end}}' ./...
}
go_vet() {
  local untagged tagged pkgs
  untagged=$(go_files | sort -u) && tagged=$(go_files -tags mscclpp_testhooks | sort -u) || return 1
  pkgs=$(comm -23 <(printf '%s\n' "$untagged") <(printf '%s\n' "$tagged") | cut -d' ' -f1 | sort -u)
  if [ -z "$pkgs" ]; then
    echo "== go vet: every file of the build without the tag is in the tagged build (go test -vet=all vets it): nothing more to vet"
    return 0
  fi
  echo "== go vet (no tag) where the tagged build leaves files out:" $pkgs
  # shellcheck disable=SC2086
  $GO vet $pkgs
}
go_test() {
  echo "== go test -tags mscclpp_testhooks -race -vet=all ./..."
  set -o pipefail
  # -timeout is each package binary's hang guard, not a speed goal (each test bounds its own
  # waits): a package's tests under -race beside the other lanes on 2 busy CPUs take minutes
  $GO test -tags mscclpp_testhooks -race -vet=all -count=1 -timeout 900s -json ./... 2>&1 | "$out/summary" gotest "$out/go.records"
}
c_suite() {
  echo "== tests/c/run.sh $build"
  bash tests/c/run.sh "$build" 2>&1
}
docs_check() {
  echo "== tests/docs/check.sh $build"
  bash tests/docs/check.sh "$build" 2>&1
}
faults() {
  echo "== tests/faults/run.sh $build (short: $FAULTS_TEST_CATS, $FAULTS_TEST_RUNS runs)"
  # four runs at a time, not two: most of a run is waiting out its fault, and by then the Go
  # tests are over
  FAULTS_RUNS=$FAULTS_TEST_RUNS FAULTS_CATS=$FAULTS_TEST_CATS FAULTS_FUZZTIME=0 FAULTS_SELFTEST=0 FAULTS_JOBS=4 \
    bash tests/faults/run.sh "$build" 2>&1
}

# the lanes; a phase that failed without a FAIL line of its own gets one in the records
vet_lane() {
  if phase go-vet go_vet; then
    echo "PASS go-vet  ($phase_secs s)" >>"$records"
  else
    echo "FAIL go-vet  ($phase_secs s)" >>"$records"
  fi
}
test_lane() {
  if ! phase go-test go_test && ! grep -q '^FAIL ' "$out/go.records"; then
    echo "FAIL go-test (exit status not 0, see its output above)" >>"$records"
  fi
  faults_phase
}
c_lane() {
  if ! phase c-suite c_suite && ! grep -q '^FAIL ' "$out/c-suite.log"; then
    echo "FAIL c-suite (exit status not 0, see its output above)" >>"$records"
  fi
  if ! phase docs-check docs_check && ! grep -q '^FAIL ' "$out/docs-check.log"; then
    echo "FAIL docs-check (exit status not 0, see its output above)" >>"$records"
  fi
}
faults_phase() {
  local rc=0
  phase faults faults || rc=1
  if grep -q '^SKIP ' "$out/faults.log"; then
    grep '^SKIP ' "$out/faults.log" >>"$records"
  elif [ $rc -eq 0 ]; then
    echo "PASS faults-short  ($phase_secs s)" >>"$records"
  else
    echo "FAIL faults-short  ($phase_secs s) (exit status not 0, see its output above)" >>"$records"
  fi
}

c0=$(cpu_of $$)
if [ "$lanes" = 1 ]; then
  vet_lane
  test_lane
  c_lane
else
  # each lane a subshell of its own, so that a phase's CPU time is its lane's children only
  vet_lane &
  test_lane &
  c_lane &
  wait
fi
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')

echo "== summary (all of make test, $wall s wall, $(awk -v a="$c0" -v b="$(cpu_of $$)" 'BEGIN { printf "%.0f", b - a }') s CPU, $lanes lane(s))"
echo "# the phases:"
cat "$out/go-vet.phase" "$out/go-test.phase" "$out/c-suite.phase" "$out/docs-check.phase" "$out/faults.phase" 2>/dev/null
strict=()
[ "${MSCCLPP_CI:-0}" = 1 ] && strict=(--strict)
"$out/summary" final "$here/skips-allowed.txt" ${strict[@]+"${strict[@]}"} \
  "$records" "$out/go.records" "$out/c-suite.log" "$out/docs-check.log"
