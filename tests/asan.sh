#!/usr/bin/env bash
# asan.sh [BUILD_DIR]: the C suite against a library whose C helpers (engine,
# proxy, transports, CUDA/IB providers, tools layer: everything cgo compiles)
# are built with AddressSanitizer and UndefinedBehaviorSanitizer, and with
# test programs built with the same flags, so a memory error or undefined
# behaviour in C fails the run (.ci/run, `make test-asan`).
#
# The library goes to BUILD_DIR/asan (CGO_CFLAGS/CGO_LDFLAGS; the Go code is
# not instrumented). The programs are compiled through wrappers named cc, gcc,
# c++ and g++ put first in PATH, which add the flags, so every executable that
# loads the library links libasan first, as ASan requires. ASAN_OPTIONS:
# detect_leaks=0 (the Go runtime and the library's process-lifetime state are
# never freed), abort_on_error=0 and exitcode 66; UBSan halts on the first
# error. A report in a case's output fails that case (its exit status, and a
# grep for "runtime error:" / "AddressSanitizer" here).
#
# The subset (MSCCLPP_ASAN_FILTER overrides): every case of tests/c/run.sh
# that runs the library in its own processes -- bootstrap, connections,
# datapath, Ethernet waits, bad input, timeouts, stranger/adversary, init failures, logging,
# fork, modes, threads, the README example -- and the data-path suite
# (SHM, Ethernet and IB-double transports) and the tools suite. Left out:
# cases that build with other compilers or run uninstrumented programs
# (headers, ABI layout, install/CMake/packaging, perf, multinode).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root" || exit 1
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
abuild=$build/asan
san="-fsanitize=address,undefined -fno-omit-frame-pointer"
start=$(date +%s)

echo "# asan: building the library with CGO_CFLAGS='$san -g -O1' into $abuild"
if ! CGO_CFLAGS="$san -g -O1" CGO_LDFLAGS="-fsanitize=address,undefined" \
  make -s all BUILD="$abuild" >"$build/asan-build.log" 2>&1; then
  cat "$build/asan-build.log"
  echo "FAIL asan-build"
  exit 1
fi
if ! nm -D "$abuild/lib/libmscclpp.so.0.1.0" | grep -q ' U __asan_init'; then
  echo "FAIL asan-build: $abuild/lib/libmscclpp.so.0.1.0 has no ASan instrumentation"
  exit 1
fi

wrap=$abuild/cc-wrappers
mkdir -p "$wrap"
for c in cc:gcc gcc:gcc c++:g++ g++:g++; do
  name=${c%%:*} real=$(command -v "${c#*:}")
  printf '#!/bin/sh\nexec %s %s "$@"\n' "$real" "$san -g" >"$wrap/$name"
  chmod +x "$wrap/$name"
done

export PATH="$wrap:$PATH" CC=cc CXX=c++
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:exitcode=66:print_summary=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
filter=${MSCCLPP_ASAN_FILTER:-'^(error_strings|bootstrap|connections|datapath|ethwait|bad_input|timeouts|stranger|adversary|init-|logging|fork|mode-|threads|readme-example|shm|transports|tools)'}
rm -rf "$abuild/tests"
log=$abuild/suite.log
MSCCLPP_TEST_FILTER=$filter MSCCLPP_TEST_BUDGET=${MSCCLPP_TEST_BUDGET:-400} \
  bash "$root/tests/c/run.sh" "$abuild" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
# a sanitizer report anywhere (also in a case that passed: a report on a
# thread the test did not watch)
reports=$(grep -rl -E 'ERROR: AddressSanitizer|runtime error:|ERROR: UndefinedBehaviorSanitizer' \
  "$abuild/tests" "$log" 2>/dev/null | sort -u)
if [ -n "$reports" ]; then
  echo "FAIL asan-reports: sanitizer reports in:"
  echo "$reports" | sed 's/^/    /'
  grep -h -A 30 -E 'ERROR: AddressSanitizer|runtime error:' $reports | head -n 80 | sed 's/^/    /'
  rc=1
fi
echo "# asan: $(($(date +%s) - start)) s"
exit "$rc"
