#!/usr/bin/env bash
# test.sh [BUILD_DIR]: what `make test` runs after `make deps` and `make`:
# go vet, the Go tests (-race, through `go test -json`, so every skipped test
# is seen), the C/C++ conformance suite (tests/c/run.sh, which runs the SHM,
# tools and multinode suites too) and the short fault-injection run
# (tests/faults/run.sh with FAULTS_TEST_CATS and FAULTS_TEST_RUNS), then one closing summary over all of them:
# each skip with its reason, marked allowed or not by tests/skips-allowed.txt,
# the ten slowest checks, each phase's wall and CPU time (user + system of
# its processes), and last "N passed, M failed, K skipped".
#
# Exit status 1 when a check failed; with MSCCLPP_CI=1 (.ci/run) also when a
# skip is not on the allow-list, i.e. a check this machine could have run.
# Environment: GO (default go), MSCCLPP_TEST_FILTER (the C suite's filter; the
# Go tests always run all).
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
: "${FAULTS_TEST_CATS:=shm-kill,shm-flap,eth-kill,eth-stop,eth-flap,eth-linkdown,eth-linkflap,ib-kill,ib-stop,ib-flap}"
: "${FAULTS_TEST_RUNS:=20}"
out=$build/tests/summary
mkdir -p "$out" || exit 1
rm -f "$out"/*.records "$out"/*.log

start=$(date +%s)
# phase NAME: ends the phase begun last (from here, or the last call) and notes its
# wall time and its CPU time, user + system (this shell's and its reaped children's, from
# /proc/$$/stat); phase_secs: the last phase's wall time
ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_now() { awk -v t="$ticks" '{ printf "%.2f", ($14 + $15 + $16 + $17) / t }' "/proc/$$/stat"; }
phases=() p_wall=$(date +%s.%N) p_cpu=$(cpu_now) phase_secs=0
phase() {
  local w c
  w=$(date +%s.%N) c=$(cpu_now)
  phase_secs=$(awk -v a="$p_wall" -v b="$w" 'BEGIN { printf "%.1f", b - a }')
  phases+=("$(awk -v n="$1" -v s="$phase_secs" -v a="$p_cpu" -v b="$c" 'BEGIN { printf "#   %-12s %6.1f s wall, %6.1f s CPU", n, s, b - a }')")
  p_wall=$w p_cpu=$c
}
if ! $GO build -o "$out/summary" ./tests/summary; then
  echo "FAIL build tests/summary"
  exit 1
fi

records=$out/steps.records
: >"$records"
phase build
echo "== go vet ./... (with and without -tags mscclpp_testhooks)"
ok=0
$GO vet ./... && $GO vet -tags mscclpp_testhooks ./... && ok=1
phase go-vet
if [ $ok = 1 ]; then echo "PASS go-vet  ($phase_secs s)" >>"$records"; else echo "FAIL go-vet  ($phase_secs s)" | tee -a "$records"; fi

echo "== go test -tags mscclpp_testhooks -race ./..."
set -o pipefail
$GO test -tags mscclpp_testhooks -race -count=1 -timeout 300s -json ./... 2>&1 | "$out/summary" gotest "$out/go.records"
rc=$?
phase go-test
if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$out/go.records"; then
  echo "FAIL go-test (exit $rc, see above)" | tee -a "$records"
fi

echo "== tests/c/run.sh $build"
bash tests/c/run.sh "$build" 2>&1 | tee "$out/c.log"
rc=$?
phase c-suite
if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$out/c.log"; then
  echo "FAIL c-suite (exit $rc, see above)" | tee -a "$records"
fi

echo "== tests/docs/check.sh $build"
bash tests/docs/check.sh "$build" 2>&1 | tee "$out/docs.log"
rc=$?
phase docs-check
if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$out/docs.log"; then
  echo "FAIL docs-check (exit $rc, see above)" | tee -a "$records"
fi

echo "== tests/faults/run.sh $build (short: $FAULTS_TEST_CATS, $FAULTS_TEST_RUNS runs)"
FAULTS_RUNS=$FAULTS_TEST_RUNS FAULTS_CATS=$FAULTS_TEST_CATS FAULTS_FUZZTIME=0 FAULTS_SELFTEST=0 \
  bash tests/faults/run.sh "$build" 2>&1 | tee "$out/faults.log"
rc=$?
phase faults
if grep -q '^SKIP ' "$out/faults.log"; then
  grep '^SKIP ' "$out/faults.log" >>"$records"
elif [ $rc -eq 0 ]; then
  echo "PASS faults-short  ($phase_secs s)" >>"$records"
else
  echo "FAIL faults-short  ($phase_secs s) (exit $rc, see above)" | tee -a "$records"
fi
set +o pipefail

echo "== summary (all of make test, $(($(date +%s) - start)) s)"
echo "# the phases:"
printf '%s\n' "${phases[@]}"
strict=()
[ "${MSCCLPP_CI:-0}" = 1 ] && strict=(--strict)
"$out/summary" final "$here/skips-allowed.txt" ${strict[@]+"${strict[@]}"} \
  "$records" "$out/go.records" "$out/c.log" "$out/docs.log"
