#!/usr/bin/env bash
# run.sh [BUILD_DIR]: the C/C++ conformance suite of libmscclpp.
#
# Builds every program in tests/c against the library in BUILD_DIR (default
# build, relative to the current directory or else to the repository root)
# using only pkg-config (PKG_CONFIG_PATH=$BUILD/lib/pkgconfig), into
# $BUILD/tests/c/, then runs each case -- a program started as N ranks by
# `launch` with a timeout -- and prints "PASS name", "FAIL name" (with the
# case's output) or "SKIP name: reason" per case, and last exactly one line
# "N passed, M failed, K skipped". The exit status is non-zero when M > 0
# (skips are judged by tests/test.sh, against tests/skips-allowed.txt).
#
# Environment:
#   MSCCLPP_TEST_FILTER=REGEX   run only the cases whose name matches
#   MSCCLPP_TEST_VERBOSE=1      print every case's output, not only failures
#   MSCCLPP_TEST_JOBS=1         run the sub-suites (transports, tools, launchers,
#                               multinode) after the cases, one at a time, not
#                               in two chains beside them (the default, 2)
#   MSCCLPP_TEST_BUDGET=SECONDS the time limit of the cases of this file (default 600):
#                               each case's timeout is cut to what is left,
#                               and cases left when it is used up FAIL unrun
#   CC, CXX                     compilers (default cc, c++)
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

build=${1:-build}
if [ -d "$build" ]; then
  build=$(cd "$build" && pwd)
elif [ -d "$root/$build" ]; then
  build=$(cd "$root/$build" && pwd)
else
  echo "run.sh: no build directory '$build' (looked in $PWD and $root)"
  echo "FAIL build-dir"
  echo "0 passed, 1 failed"
  exit 1
fi

CC=${CC:-cc}
CXX=${CXX:-c++}
filter=${MSCCLPP_TEST_FILTER:-}
verbose=${MSCCLPP_TEST_VERBOSE:-0}

# The library's behaviour must come from each case's own settings only.
unset MSCCLPP_DEBUG MSCCLPP_DEBUG_SUBSYS MSCCLPP_DEBUG_FILE MSCCLPP_COMM_ID MSCCLPP_SOCKET_IFNAME \
  MSCCLPP_SOCKET_FAMILY MSCCLPP_HOSTID NPKIT_DUMP_DIR MSCCLPP_TEST_RANK MSCCLPP_TEST_NRANKS MSCCLPP_TEST_ADDR \
  MSCCLPP_TEST_DIR MSCCLPP_BOOTSTRAP_SECRET MSCCLPP_BOOTSTRAP_SECRET_FILE MSCCLPP_BOOTSTRAP_TIMEOUT

export PKG_CONFIG_PATH="$build/lib/pkgconfig"
export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

out="$build/tests/c"
mkdir -p "$out" || exit 1
# clean what an earlier run left (only ours: others may build here too)
(cd "$out" && rm -rf launch abi_layout_c abi_layout_cc11 abi_layout_cc14 abi_layout_cc17 abi_layout_cc20 \
  error_strings bootstrap connections alltoall datapath ethwait bad_input hardening eager timeouts stranger adversary init_failures logging fork threads_cc \
  perf perf.out perf.csv perf.json readme_example readme_example.inc \
  build-*.log ./*.log ./*.short ./*.o only-mscclpp*.c only-mscclpp*.cc logging-file.d logging-link.d cmake-prefix cmake-build-prefix \
  cmake-build-tree)

passed=0
failed=0
skipped=0
suite_start=$EPOCHREALTIME
budget=${MSCCLPP_TEST_BUDGET:-600}
suite_deadline=$((EPOCHSECONDS + budget))

# time_left CASE_TIMEOUT -> the timeout to use, or nothing when the budget is spent
time_left() {
  local left=$((suite_deadline - EPOCHSECONDS))
  if [ $left -lt 5 ]; then return 1; fi
  if [ "$1" -lt $left ]; then echo "$1"; else echo $left; fi
}

# budget_spent NAME START LOG: the case is not run (the suite's budget is used up): a failure
budget_spent() {
  echo "not run: the suite's ${budget} s budget is used up" >"$3"
  fail "$1" "$2" "$3"
}

elapsed() { # START [END]: END (default now) less START, in seconds with one decimal; both are
  # $EPOCHREALTIME values (bash's own clock: no date and awk forked for every case)
  local a=${1/[.,]/} b=${2:-$EPOCHREALTIME} d
  b=${b/[.,]/}
  d=$(((10#$b - 10#$a + 50000) / 100000))
  printf '%d.%d' $((d / 10)) $((d % 10))
}

selected() {
  [ -z "$filter" ] && return 0
  [[ $1 =~ $filter ]]
}

show_log() { # file: everything but the "ok" lines of passing checks
  local lines shown
  lines=$(wc -l <"$1")
  grep -Ev '^(\[rank [0-9]+\] )?ok   ' "$1" >"$1.short"
  shown=$(wc -l <"$1.short")
  if [ "$shown" -gt 150 ]; then
    echo "    ... ($shown lines without the passing checks; the first 30 and the last 120 follow; all in $1)"
    head -n 30 "$1.short" | sed 's/^/    /'
    echo "    ..."
    tail -n 120 "$1.short" | sed 's/^/    /'
  else
    sed 's/^/    /' "$1.short"
    [ "$shown" -lt "$lines" ] && echo "    ($((lines - shown)) passing checks not shown; all in $1)"
  fi
  rm -f "$1.short"
}

pass() { # name start
  passed=$((passed + 1))
  echo "PASS $1  ($(elapsed "$2") s)"
  if [ "$verbose" = 1 ] && [ -n "${3:-}" ]; then sed 's/^/    /' "$3"; fi
}

fail() { # name start log
  failed=$((failed + 1))
  echo "FAIL $1  ($(elapsed "$2") s)"
  if [ -n "${3:-}" ] && [ -f "$3" ]; then show_log "$3"; fi
}

skip() { # name reason
  skipped=$((skipped + 1))
  echo "SKIP $1: $2"
}

# ---- pkg-config ----
if ! pkg-config --exists mscclpp 2>"$out/pkg-config.log"; then
  echo "pkg-config cannot find mscclpp in $PKG_CONFIG_PATH" >>"$out/pkg-config.log"
  fail pkg-config "$suite_start" "$out/pkg-config.log"
  echo "$passed passed, $failed failed"
  exit 1
fi
cflags=$(pkg-config --cflags mscclpp)
libs=$(pkg-config --libs mscclpp)
echo "# library: $build/lib ($(pkg-config --modversion mscclpp 2>/dev/null))"
echo "# cflags: $cflags"
echo "# libs:   $libs"

# ---- build ----
# Every program: the exact pkg-config command line (plus -pthread and -o), its compile (-c) through
# the compile cache (compile-cache.sh: the same compiler over the same input and flags: its object
# again), its link made every time.
. "$here/compile-cache.sh"
declare -A built=()
build_c() { # bin src
  local bin=$1 src=$2
  # shellcheck disable=SC2086
  if cc_program $CC "$out/$bin" -std=c11 -Wall -Wextra -Werror $cflags "$here/$src" $libs -pthread \
    >"$out/build-$bin.log" 2>&1; then
    built[$bin]=1
  else
    built[$bin]=0
  fi
}
build_cxx() { # bin src std
  local bin=$1 src=$2 std=$3
  # shellcheck disable=SC2086
  if cc_program $CXX "$out/$bin" -std="$std" -Wall -Wextra -Werror $cflags "$here/$src" $libs -pthread \
    >"$out/build-$bin.log" 2>&1; then
    built[$bin]=1
  else
    built[$bin]=0
  fi
}

# The host-mode example: the one fenced block between the marker comments of
# docs/PROGRAMMING.md, extracted into readme_example.inc and compiled through the
# harness readme_example.cc (C++11, like any application would).
build_readme() { # bin src
  local bin=$1 src=$2 inc=$out/readme_example.inc
  awk '/<!-- readme-example:begin -->/ { inside = 1; begun++; next }
       /<!-- readme-example:end -->/ { inside = 0; ended++; next }
       inside && /^```/ { fence++; next }
       inside && fence == 1 { print }
       END { if (begun != 1 || ended != 1 || fence != 2) exit 1 }' "$root/docs/PROGRAMMING.md" >"$inc"
  if [ $? -ne 0 ] || [ ! -s "$inc" ]; then
    echo "docs/PROGRAMMING.md: want one fenced code block between one <!-- readme-example:begin --> and one <!-- readme-example:end -->" \
      >"$out/build-$bin.log"
    return
  fi
  # shellcheck disable=SC2086
  cc_program $CXX "$out/$bin" -std=c++11 -Wall -Wextra -Werror $cflags -I"$out" "$here/$src" $libs -pthread \
    >"$out/build-$bin.log" 2>&1
}

if ! cc_program $CC "$out/launch" -std=c11 -Wall -Wextra -Werror "$here/launch.c" >"$out/build-launch.log" 2>&1; then
  fail build-launch "$suite_start" "$out/build-launch.log"
  echo "$passed passed, $failed failed"
  exit 1
fi

# ---- the sub-suites ----
# The data-path suite over every transport (tests/c/transports), the tool-stack suite
# (tests/c/tools), perf under real launchers (tests/launchers: Open MPI's mpirun, a one-node
# Slurm cluster it starts itself, --id-file) and the multi-node suite on simulated nodes
# (tests/multinode; needs root and namespaces, else one line "SKIP multinode: why"): their
# cases and skips count here too. They run beside the builds and the cases of this file, in two
# chains (transports, tools, then launchers; multinode, the longest under load, alone;
# MSCCLPP_TEST_JOBS=1: after the cases, one at a time), each into its log; finish_subsuite
# prints a suite's lines once it ended.
declare -A sub_script=([transports]=$here/transports/run_transports.sh [tools]=$here/tools/run_tools.sh
  [launchers]=$root/tests/launchers/run_launchers.sh [multinode]=$root/tests/multinode/run_multinode.sh)
sub_selected() { [ -z "$filter" ] || [[ $1 =~ $filter ]]; }
run_subsuite() { # NAME
  sub_selected "$1" || return 0
  if [ -e "$out/$1-suite.time" ]; then # each sub-suite runs once (its .time is removed below, at the start)
    echo "FAIL $1-suite (started a second time)" >>"$out/$1-suite.log"
    return 1
  fi
  local TIMEFORMAT="# $1 suite: %R s wall, %U s user + %S s system CPU"
  { time bash "${sub_script[$1]}" "$build" >"$out/$1-suite.log" 2>&1; } 2>"$out/$1-suite.time"
}
sub_chains=()
rm -f "$out"/*-suite.time
if [ "${MSCCLPP_TEST_JOBS:-2}" -gt 1 ]; then
  (run_subsuite transports; run_subsuite tools; run_subsuite launchers) &
  sub_chains+=($!)
  (run_subsuite multinode) &
  sub_chains+=($!)
fi
finish_subsuite() { # NAME: after its chain ended (every chain, the first time), or run it now
  sub_selected "$1" || return 0
  local log=$out/$1-suite.log summary
  if [ "${MSCCLPP_TEST_JOBS:-2}" -le 1 ]; then
    run_subsuite "$1"
  elif [ ${#sub_chains[@]} -gt 0 ]; then
    wait "${sub_chains[@]}"
    sub_chains=()
  fi
  if [ "$1" = transports ]; then
    grep -E '^(PASS|FAIL|SKIP)' "$log"
  else
    grep -vE '^[0-9]+ passed, [0-9]+ failed' "$log"
  fi
  cat "$out/$1-suite.time" 2>/dev/null
  if summary=$(tail -n 1 "$log") && [[ $summary =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)? ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
    skipped=$((skipped + ${BASH_REMATCH[4]:-0}))
  else
    echo "FAIL $1-suite (no summary line; see $log)"
    failed=$((failed + 1))
  fi
}



build_start=$EPOCHREALTIME
builds=(
  "c abi_layout_c abi_layout.c" "c error_strings error_strings.c" "c bootstrap bootstrap.c"
  "c connections connections.c" "c alltoall alltoall.c" "c datapath datapath.c" "c ethwait ethwait.c" "c bad_input bad_input.c" "c timeouts timeouts.c"
  "c stranger stranger.c" "c adversary adversary.c" "c init_failures init_failures.c" "c logging logging.c" "c fork fork.c" "c hardening hardening.c" "c eager eager.c" "c mode mode.c" "cxx threads_cc threads.cc c++17"
  "c perf ../../tools/perf/perf.c" "readme readme_example readme_example.cc"
  "cxx abi_layout_cc11 abi_layout.cc c++11" "cxx abi_layout_cc14 abi_layout.cc c++14"
  "cxx abi_layout_cc17 abi_layout.cc c++17" "cxx abi_layout_cc20 abi_layout.cc c++20"
)
# the compilers' identities asked once here, not in each background build (compile-cache.sh)
cache_tool_init "$CC"
cache_tool_init "$CXX"
# in a subshell of its own: its jobs and waits are the builds', not the sub-suites'
(
  for job in "${builds[@]}"; do
    compile_slot
    set -- $job
    lang=$1
    shift
    case $lang in
      c) build_c "$@" & ;;
      cxx) build_cxx "$@" & ;;
      readme) build_readme "$@" & ;;
    esac
  done
  wait
)
# `built` was filled in subshells: read the results back from the files
for f in "$out"/build-*.log; do
  bin=${f#"$out"/build-}
  bin=${bin%.log}
  [ "$bin" = launch ] && continue
  if [ -x "$out/$bin" ]; then built[$bin]=1; else built[$bin]=0; fi
done
echo "# built the programs in $(elapsed "$build_start") s"

# ---- cases ----
# run_case NAME N TIMEOUT BIN [ARGS...]; before the call, optionally:
#   case_env=(VAR=value ...)   extra environment for the ranks
#   case_expect_fail=RANKS     ranks expected to die
#   case_lenv=(VAR=value ...)  environment set by launch, with its {ADDR+k},
#                              {PORT+k}, {DIR}, {RANK} placeholders expanded
case_env=()
case_lenv=()
case_expect_fail=""
run_case() {
  local name=$1 n=$2 t=$3 bin=$4
  shift 4
  local envs=(${case_env[@]+"${case_env[@]}"}) lenvs=(${case_lenv[@]+"${case_lenv[@]}"}) expect=$case_expect_fail
  case_env=()
  case_lenv=()
  case_expect_fail=""
  selected "$name" || return 0
  local start log=$out/$name.log
  start=$EPOCHREALTIME
  if [ "${built[$bin]:-0}" != 1 ]; then
    {
      echo "$bin did not compile:"
      cat "$out/build-$bin.log" 2>/dev/null
    } >"$log"
    fail "$name" "$start" "$log"
    return
  fi
  if ! t=$(time_left "$t"); then
    budget_spent "$name" "$start" "$log"
    return
  fi
  local args=(-n "$n" -t "$t")
  [ -n "$expect" ] && args+=(--expect-fail "$expect")
  local e
  for e in ${lenvs[@]+"${lenvs[@]}"}; do args+=(-e "$e"); done
  env ${envs[@]+"${envs[@]}"} "$out/launch" "${args[@]}" -- "$out/$bin" "$@" >"$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    pass "$name" "$start" "$log"
  else
    fail "$name" "$start" "$log"
  fi
}

# `make install PREFIX=...` then build and run a C and a C++ program with that
# prefix's pkg-config file only (no LD_LIBRARY_PATH: the .pc's rpath must do)
install_case() {
  local name=install-pkgconfig start log=$out/install.log prefix=$out/prefix
  selected "$name" || return 0
  start=$EPOCHREALTIME
  rm -rf "$prefix"
  if make -s -C "$root" install PREFIX="$prefix" BUILD="$build" >"$log" 2>&1 &&
    [ -f "$prefix/lib/libmscclpp.so.0.1.0" ] && [ -L "$prefix/lib/libmscclpp.so.0" ] && [ -L "$prefix/lib/libmscclpp.so" ] &&
    [ -f "$prefix/include/mscclpp.h" ] && [ -f "$prefix/include/mscclppfifo.h" ] && [ -f "$prefix/include/mscclppdevconn.h" ] &&
    [ -f "$prefix/include/mscclpp_tools.h" ] &&
    env -u LD_LIBRARY_PATH PKG_CONFIG_PATH="$prefix/lib/pkgconfig" bash -c '
      set -e
      . "$2/compile-cache.sh"
      cc_program $0 "$3/inst_c" -std=c11 -Wall -Werror $(pkg-config --cflags mscclpp) "$2/error_strings.c" $(pkg-config --libs mscclpp)
      cc_program $1 "$3/inst_cc" -std=c++17 -Wall -Werror $(pkg-config --cflags mscclpp) "$2/abi_layout.cc" $(pkg-config --libs mscclpp)
      ldd "$3/inst_c" | grep -q "$3/prefix/lib/libmscclpp.so.0"
      "$3/inst_c" && "$3/inst_cc"' "$CC" "$CXX" "$here" "$out" >>"$log" 2>&1; then
    pass "$name" "$start" "$log"
  else
    echo "install or the installed pkg-config build failed" >>"$log"
    fail "$name" "$start" "$log"
  fi
}

# `make install PREFIX=...`, then a CMake project (tests/c/cmake) that finds
# the package with find_package(mscclpp) and links mscclpp::mscclpp, once
# against that prefix and once against the build tree; each program runs
# without LD_LIBRARY_PATH (CMake's build rpath must do). SKIP without cmake.
cmake_case() {
  local name=cmake-find-package start log=$out/cmake.log prefix=$out/cmake-prefix
  selected "$name" || return 0
  if ! command -v cmake >/dev/null 2>&1; then
    skip "$name" "cmake not found"
    return
  fi
  start=$EPOCHREALTIME
  local t
  if ! t=$(time_left 120); then
    budget_spent "$name" "$start" "$log"
    return
  fi
  rm -rf "$prefix" "$out/cmake-build-prefix" "$out/cmake-build-tree"
  if ! make -s -C "$root" install PREFIX="$prefix" BUILD="$build" >"$log" 2>&1 ||
    [ ! -f "$prefix/lib/cmake/mscclpp/mscclppConfig.cmake" ] ||
    [ ! -f "$prefix/lib/cmake/mscclpp/mscclppConfigVersion.cmake" ]; then
    echo "make install did not install lib/cmake/mscclpp/mscclppConfig{,Version}.cmake" >>"$log"
    fail "$name" "$start" "$log"
    return
  fi
  local ok=1 where p d
  for where in prefix tree; do
    if [ $where = prefix ]; then p=$prefix; else p=$build; fi
    d=$out/cmake-build-$where
    mkdir -p "$d"
    echo "== find_package(mscclpp) with CMAKE_PREFIX_PATH=$p" >>"$log"
    if ! (cd "$d" && env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH CC="$CC" timeout -k 5 "$t" \
      cmake -DCMAKE_PREFIX_PATH="$p" -DEXPECTED_PREFIX="$p" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
      "$here/cmake" && timeout -k 5 "$t" cmake --build .) >>"$log" 2>&1; then
      echo "configuring or building against $p failed" >>"$log"
      ok=0
      continue
    fi
    if ! env -u LD_LIBRARY_PATH ldd "$d/find_package" 2>&1 | tee -a "$log" | grep -q "=> $p/lib/libmscclpp.so.0 "; then
      echo "$d/find_package does not load $p/lib/libmscclpp.so.0 through its rpath" >>"$log"
      ok=0
    fi
    if ! env -u LD_LIBRARY_PATH "$d/find_package" >>"$log" 2>&1; then
      echo "$d/find_package failed" >>"$log"
      ok=0
    fi
  done
  if [ $ok = 1 ]; then pass "$name" "$start" "$log"; else fail "$name" "$start" "$log"; fi
}

# the perf tool (perf.c) takes nccl-tests' flags: run it as it starts its own
# ranks (--nranks) and check the sizes, iterations and checking it reports,
# that bad flags exit 2, and that `make run NRANKS=.. ARGS=..` reaches it
perf_case() {
  local name=perf-flags start log=$out/perf.log
  selected "$name" || return 0
  start=$EPOCHREALTIME
  if [ "${built[perf]:-0}" != 1 ]; then
    { echo "perf did not compile:"; cat "$out/build-perf.log" 2>/dev/null; } >"$log"
    fail "$name" "$start" "$log"
    return
  fi
  local t
  if ! t=$(time_left 90); then
    budget_spent "$name" "$start" "$log"
    return
  fi
  : >"$log"
  local ok=1 o=$out/perf.out
  # perf_run WANT_RC ARGS...: run perf, keep its output in $o, check the exit status
  perf_run() {
    local want=$1 rc
    shift
    echo "== perf $* (want exit $want)" >>"$log"
    timeout -k 5 "$t" "$out/perf" "$@" >"$o" 2>&1
    rc=$?
    cat "$o" >>"$log"
    if [ $rc -ne "$want" ]; then
      echo "-- exit $rc, want $want" >>"$log"
      ok=0
      return 1
    fi
  }
  # expect_sizes "S1 S2 ...": the size column of the rows, in order
  expect_sizes() {
    local got
    got=$(awk '$1 ~ /^[0-9]+$/ {printf "%s%s", sep, $1; sep=" "}' "$o")
    if [ "$got" != "$1" ]; then
      echo "-- sizes '$got', want '$1'" >>"$log"
      ok=0
    fi
  }
  expect_line() { # REGEX: some line of the output matches
    if ! grep -Eq -- "$1" "$o"; then
      echo "-- no line matches /$1/" >>"$log"
      ok=0
    fi
  }
  # expect_col N "V1 V2 ...": column N of the rows, in order
  expect_col() {
    local got
    got=$(awk -v c="$1" '$1 ~ /^[0-9]+$/ {printf "%s%s", sep, $c; sep=" "}' "$o")
    if [ "$got" != "$2" ]; then
      echo "-- column $1: '$got', want '$2'" >>"$log"
      ok=0
    fi
  }
  # rows: size count type redop root, time algbw busbw #wrong out of place ($6-$9) and in place ($10-$13), iters ($14)
  if perf_run 0 --nranks 2 -b 8 -e 64K -f 4 -n 3 -w 1 -c 1; then
    expect_sizes "8 32 128 512 2048 8192 32768"
    expect_col 2 "1 4 16 64 256 1024 4096"
    expect_col 3 "float float float float float float float"
    expect_col 9 "0 0 0 0 0 0 0"
    expect_col 13 "0 0 0 0 0 0 0"
    expect_col 14 "3 3 3 3 3 3 3"
    expect_line "^# nranks 2 .*minBytes 8 maxBytes 65536 step: 4\(factor\) warmup iters: 1 iters: 3 agg iters: 1 validation: 1 graph: 0\$"
    expect_line '^# +size +count +type +redop +root +time +algbw +busbw +#wrong +time +algbw +busbw +#wrong +iters$'
    expect_line '^# +out-of-place +in-place'
    expect_line '^# time: the average over the ranks \(-a 1\)'
    expect_line '^# Out of bounds values : 0 OK$'
  fi
  # -f 1: steps of -i bytes; -c 0: no check; 3 ranks: count = size / 4 / 3
  if perf_run 0 --nranks 3 -b 3K -e 12K -f 1 -i 3K -n 2 -w 0 -c 0; then
    expect_sizes "3072 6144 9216 12288"
    expect_line 'step: 3072\(bytes\) warmup iters: 0 iters: 2 agg iters: 1 validation: 0 graph: 0$'
    expect_col 9 "N/A N/A N/A N/A"
    expect_col 13 "N/A N/A N/A N/A"
  fi
  # long forms, and nccl-tests' -t 1 -g 1
  if perf_run 0 -t 1 -g 1 --nranks 2 --minbytes 1M --maxbytes 1M --stepfactor 2 --iters 2 --warmup_iters 1 --check 1 \
    --malloc; then
    expect_sizes "1048576"
    expect_line '^# buffers: malloc;'
    expect_line ' warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0$'
  fi
  # the rest of nccl-tests' flags, and the CSV and JSON files
  local csv=$out/perf.csv json=$out/perf.json
  rm -f "$csv" "$json"
  if perf_run 0 --nranks 2 -b 1K -e 4K -f 2 -n 2 -w 1 -d int8 -o max -r 1 -a 3 -z 1 -G 2 -m 2 -p 1 -C 1 -y 0 \
    -F "$csv" -J "$json"; then
    expect_sizes "1024 2048 4096"
    expect_col 2 "512 1024 2048"
    expect_col 3 "int8 int8 int8"
    expect_col 4 "none none none"
    expect_col 5 "-1 -1 -1"
    expect_col 14 "2 2 2"
    expect_line ' iters: 2 agg iters: 2 validation: 1 graph: 2$'
    expect_line '^# -o max -r 1: an allgather has neither a reduction nor a root'
    expect_line '^# Blocking Enabled'
    expect_line '^# Parallel Init: '
    expect_line '^# -G 2: '
    expect_line '^# cputime: the maximum over the ranks \(-a 3\)'
    expect_line '^# +size +count +type +redop +root +cputime '
    if [ "$(head -n 1 "$csv" 2>/dev/null)" != "size,count,type,redop,root,time_us,algbw,busbw,wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong,iters" ] ||
      [ "$(awk -F, 'NR > 1 {printf "%s%s/%s/%s/%s/%s", sep, $1, $3, $9, $13, $14; sep=" "}' "$csv")" != "1024/int8/0/0/2 2048/int8/0/0/2 4096/int8/0/0/2" ]; then
      { echo "-- $csv:"; cat "$csv"; } >>"$log" 2>&1
      ok=0
    fi
    if ! python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["nranks"] == 2 and d["ok"] is True and d["out_of_bounds"] == 0, d
assert [r["size"] for r in d["rows"]] == [1024, 2048, 4096], d["rows"]
for r in d["rows"]:
    assert r["type"] == "int8" and r["iters"] == 2 and r["count"] * 2 == r["size"], r
    for k in ("out_of_place", "in_place"):
        assert r[k]["wrong"] == 0 and r[k]["time_us"] > 0 and r[k]["busbw"] >= 0, r
assert d["params"]["agg_iters"] == 2 and d["params"]["average"] == 3 and d["params"]["cudagraph"] == 2, d["params"]' "$json" >>"$log" 2>&1; then
      { echo "-- $json is not the run as JSON:"; cat "$json"; } >>"$log" 2>&1
      ok=0
    fi
  fi
  # -d all: one pass per type; -a 0 and 2
  if perf_run 0 --nranks 2 -b 64 -e 64 -n 1 -w 0 -d all -a 2 -F "$csv"; then
    expect_col 3 "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16"
    expect_col 2 "32 32 8 8 4 4 16 8 4 16"
    expect_line '^# time: the minimum over the ranks \(-a 2\)'
    if [ "$(awk -F, 'NR > 1 {printf "%s%s", sep, $3; sep=" "}' "$csv")" != "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16" ]; then
      { echo "-- $csv: the type column is not the types in order:"; cat "$csv"; } >>"$log" 2>&1
      ok=0
    fi
  fi
  perf_run 0 --nranks 2 -b 64 -e 64 -n 1 -w 0 -a 0 && expect_line "^# time: rank 0's time \(-a 0\)"
  # without -n, big sizes run fewer iterations, and the row says how many
  if perf_run 0 --nranks 2 -b 8M -e 64M -f 8 -c 0 -w 0; then
    expect_sizes "8388608 67108864"
    expect_col 14 "20 8"
    expect_line '^# iters: the timed iterations of each row; without -n sizes above 25 MiB run fewer'
  fi
  local bad
  for bad in "-t 2" "-g 4" "-b 1X" "-b 2M -e 1M" "-n 0" "-w -1" "-c x" "-f 1 -i 0" "--nranks 0" "-q" "stray" \
    "-a 4" "-d float8" "-o xor" "-z 2" "-m 0" "-G -1" "-p 2" "-r -1"; do
    # shellcheck disable=SC2086
    perf_run 2 $bad && expect_line '^usage: perf '
  done
  # --help is the manual: exit 0, and it names every flag of the option table
  # (each long option of perf_opts.h's longopts, each letter of its getopt string)
  if perf_run 0 --help; then
    local opts=$root/tools/perf/perf_opts.h flag
    for flag in $(grep -o '{"[a-z_-]*", [a-z_]*argument' "$opts" | sed 's/{"\([^"]*\)".*/--\1/') \
      $(grep -o 'getopt_long(argc, argv, "[^"]*"' "$opts" | sed 's/.*"\(.*\)"/\1/; s/://g' | sed 's/./-& /g'); do
      grep -q -e "^ *$flag[ ,]" -e "^ *-., $flag " "$o" || { echo "-- --help does not describe $flag" >>"$log"; ok=0; }
    done
    expect_line '^  --transport T '
  fi
  # a cross-node transport the machine lacks (ib, no such device; every rank
  # its own host): each rank gives the library's reason and exits 3
  echo "== launch -n 2 (a host each) perf --transport ib, MSCCLPP_PERF_IB_DEV=nosuch0 (want exit 3 and the reason)" >>"$log"
  MSCCLPP_PERF_IB_DEV=nosuch0 timeout -k 5 "$t" "$out/launch" -n 2 -t "$t" -e 'MSCCLPP_HOSTID=host{RANK}' -- \
    "$out/perf" --transport ib -b 8 -e 64 -n 1 -w 0 >"$o" 2>&1
  cat "$o" >>"$log"
  expect_line '^\[rank 0\] perf rank 0: cannot connect to rank 1 over the cross-node transport ib \(2\): .*IB device "nosuch0" not found'
  expect_line '^launch: .*rank 0: exit 3 .*rank 1: exit 3 '
  if grep -q 'not available in this library' "$o"; then
    echo "-- says the transport is not available in this library, though the device is what is missing" >>"$log"
    ok=0
  fi
  # make run passes NRANKS and ARGS through perf.sh
  echo "== make run NRANKS=2 ARGS=\"-b 64 -e 256 -f 2 -n 2 -w 1 -c 1\"" >>"$log"
  if timeout -k 5 "$t" make -s -C "$root" run BUILD="$build" NRANKS=2 ARGS="-b 64 -e 256 -f 2 -n 2 -w 1 -c 1" >"$o" 2>&1; then
    cat "$o" >>"$log"
    expect_sizes "64 128 256"
    expect_line '^# nranks 2 .* iters: 2 agg iters: 1 validation: 1 graph: 0$'
  else
    cat "$o" >>"$log"
    echo "-- make run failed" >>"$log"
    ok=0
  fi
  rm -f "$o"
  if [ $ok = 1 ]; then pass "$name" "$start" "$log"; else fail "$name" "$start" "$log"; fi
}

# compile-only case: the headers alone, strictly, in C and C++
headers_case() {
  local name=headers-self-contained start log=$out/headers.log
  selected "$name" || return 0
  start=$EPOCHREALTIME
  local ok=1
  : >"$log"
  # each compile through the compile cache (cc_cached): the same headers, flags and compiler
  # again are a hit; a header that fails to compile is compiled (and fails) every time
  for h in mscclppfifo.h mscclpp.h mscclpp_tools.h; do
    printf '#include <%s>\n#include <%s>\nint main(void) { return 0; }\n' "$h" "$h" >"$out/only-$h.c"
    cp "$out/only-$h.c" "$out/only-$h.cc"
    for std in c99 c11 c17; do
      if ! cc_cached $CC -std=$std -Wall -Wextra -Werror -pedantic-errors $cflags -c "$out/only-$h.c" -o "$out/only-$h-$std.o" >>"$log" 2>&1; then
        echo "$h alone does not compile as $std -pedantic-errors" >>"$log"
        ok=0
      fi
    done
    for std in c++11 c++14 c++17 c++20; do
      if ! cc_cached $CXX -std=$std -Wall -Wextra -Werror -pedantic-errors $cflags -c "$out/only-$h.cc" -o "$out/only-$h-$std.o" >>"$log" 2>&1; then
        echo "$h alone does not compile as $std -pedantic-errors" >>"$log"
        ok=0
      fi
    done
  done
  # mscclppdevconn.h is part of mscclpp.h: on its own it must stop with a message naming mscclpp.h.
  printf '#include <mscclppdevconn.h>\nint main(void) { return 0; }\n' >"$out/only-devconn.c"
  if $CC -std=c11 $cflags -c "$out/only-devconn.c" -o /dev/null >"$out/only-devconn.log" 2>&1 ||
    ! grep -q '#include <mscclpp.h> instead' "$out/only-devconn.log"; then
    cat "$out/only-devconn.log" >>"$log"
    echo "mscclppdevconn.h alone did not stop with a message naming mscclpp.h" >>"$log"
    ok=0
  fi
  if [ $ok = 1 ]; then pass "$name" "$start" "$log"; else fail "$name" "$start" "$log"; fi
}

cuda_case() {
  local name=check-cuda-compile start log=$out/check-cuda.log
  selected "$name" || return 0
  local nvcc
  nvcc=$(command -v nvcc 2>/dev/null || true)
  [ -z "$nvcc" ] && [ -x /usr/bin/nvcc ] && nvcc=/usr/bin/nvcc
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  if [ -z "$nvcc" ]; then
    skip "$name" "nvcc not found"
    return
  fi
  start=$EPOCHREALTIME
  local inc
  inc=$(pkg-config --variable=includedir mscclpp 2>/dev/null)
  [ -d "$inc" ] || inc=$build/include
  local t
  if ! t=$(time_left 300); then
    budget_spent "$name" "$start" "$log"
    return
  fi
  if PATH="$(dirname "$nvcc"):$PATH" timeout -k 5 "$t" "$here/check-cuda.sh" "$inc" >"$log" 2>&1 &&
    ! grep -q skipped "$log"; then
    pass "$name" "$start" "$log"
  else
    fail "$name" "$start" "$log"
  fi
}

# script_case NAME LIMIT SCRIPT [ARG...]: one of tests/gpu's scripts as a case, within LIMIT
# seconds of the budget; a script that says "skipped (nvcc not found)" and exits 0 is a skip
script_case() {
  local name=$1 limit=$2 start log=$out/$1.log t
  shift 2
  selected "$name" || return 0
  start=$EPOCHREALTIME
  if ! t=$(time_left "$limit"); then
    budget_spent "$name" "$start" "$log"
    return
  fi
  timeout -k 5 "$t" bash "$@" >"$log" 2>&1
  local rc=$?
  if [ $rc = 0 ] && grep -q "skipped (nvcc not found)" "$log"; then
    skip "$name" "nvcc not found"
  elif [ $rc = 0 ]; then
    pass "$name" "$start" "$log"
  else
    fail "$name" "$start" "$log"
  fi
}

# packaging.sh: make install as distributions use it (DESTDIR, multiarch
# LIBDIR, uninstall), and a .cu program built by nvcc from the .pc's flags
packaging_case() { # name what
  local name=$1 start log=$out/$1.log t
  selected "$name" || return 0
  start=$EPOCHREALTIME
  if ! t=$(time_left 120); then
    budget_spent "$name" "$start" "$log"
    return
  fi
  timeout -k 5 "$t" bash "$here/packaging.sh" "$build" "$2" >"$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && grep -q '^SKIP ' "$log"; then
    skip "$name" "$(sed -n 's/^SKIP //p' "$log" | head -n 1)"
  elif [ $rc -eq 0 ]; then
    pass "$name" "$start" "$log"
  else
    fail "$name" "$start" "$log"
  fi
}

headers_case
# tests/c/compile-cache-test.sh: the compile cache these builds go through (hits, misses on a
# changed header, flag or compiler, objects shared across clones, the link made every time, off)
script_case compile-cache 180 "$here/compile-cache-test.sh"
# tests/c/golib-cache-test.sh: the cache make builds the library through (a hit across copies of
# the tree, misses on a changed source, go.mod or Go environment, failures not kept, off)
script_case golib-cache 60 "$here/golib-cache-test.sh"
run_case abi_layout.c 1 15 abi_layout_c
for std in 11 14 17 20; do
  run_case "abi_layout.cc-c++$std" 1 15 "abi_layout_cc$std"
done
run_case error_strings 1 15 error_strings
for n in 1 2 4 8; do
  run_case "bootstrap-n$n" "$n" 40 bootstrap
done
# every rank its own "host": small collectives take the TCP path, not the node segment
case_lenv=("MSCCLPP_HOSTID=host{RANK}")
run_case bootstrap-n4-hosts 4 40 bootstrap
run_case connections-n2 2 30 connections
run_case connections-n3 3 30 connections
# a full all-to-all setup (16 ranks, 480 connections): every pair's data arrives
run_case alltoall-n16 16 60 alltoall
run_case datapath-n2 2 30 datapath
run_case datapath-n3 3 30 datapath
run_case datapath-eth-n2 2 30 datapath eth
run_case datapath-eth-n3 3 30 datapath eth
# Ethernet waits that read the socket themselves: ping-pong, ordering, a put no wait reads, a
# timed-out wait; a wait on a peer that exits
run_case ethwait 2 60 ethwait rounds
# a reading wait spins on the socket before it blocks (the communicator's spin budget): without
# the spin, and with a budget past its cap (half a reading period)
case_env=(MSCCLPP_WAIT_SPIN=0)
run_case ethwait-nospin 2 60 ethwait rounds
case_env=(MSCCLPP_WAIT_SPIN=4000000000)
run_case ethwait-longspin 2 60 ethwait rounds
case_expect_fail=0
run_case ethwait-deadpeer 2 60 ethwait deadpeer
run_case bad_input 2 30 bad_input
run_case timeouts-missing-rank 3 20 timeouts missing
# 3 s, not 1: a rank that registers with the root as it times out (a loaded machine) hears only
# "the root closed the connection", not which rank is missing
case_env=(MSCCLPP_BOOTSTRAP_TIMEOUT=3)
run_case timeouts-missing-rank-env 3 20 timeouts missing-env
case_expect_fail=2
run_case timeouts-killed-rank 3 30 timeouts killed
# the same with 1 MiB gathers (chunk rounds through the node segment), the victim dying mid-gather
case_expect_fail=2
run_case timeouts-killed-rank-large 3 30 timeouts killed-large
case_env=(MSCCLPP_DEBUG=WARN)
run_case stranger 2 30 stranger
case_env=(MSCCLPP_DEBUG=WARN)
case_lenv=("MSCCLPP_COMM_ID={ADDR+4}")
run_case stranger-comm-id 3 30 stranger commid
# a peer without the key: forged, replayed and oversized hellos while a real job forms
case_env=(MSCCLPP_DEBUG=WARN MSCCLPP_BOOTSTRAP_SECRET=conformance-suite-secret)
run_case adversary 3 30 adversary
# init fails fast and alike on every rank (HOME: the ranks create the cookie there)
case_lenv=("HOME={DIR}")
run_case init-nranks-mismatch 3 20 init_failures mismatch
case_lenv=("HOME={DIR}")
run_case init-nranks-mismatch-root 3 20 init_failures mismatch-root
case_lenv=("HOME={DIR}")
run_case init-ifname-root 3 20 init_failures ifname-root
case_lenv=("HOME={DIR}")
run_case init-ifname-rank 3 30 init_failures ifname-rank
case_env=(MSCCLPP_BOOTSTRAP_SECRET=the-job-secret)
run_case init-secret-differs 3 20 init_failures secret
case_env=(MSCCLPP_DEBUG=INFO MSCCLPP_DEBUG_SUBSYS=INIT)
case_lenv=("HOME={DIR}")
case_expect_fail=2
run_case init-rank-dies 3 20 init_failures dying
case_env=(MSCCLPP_DEBUG=INFO)
run_case logging-info 1 15 logging info
case_env=(MSCCLPP_DEBUG=warn)
run_case logging-warn 1 15 logging warn
case_env=(MSCCLPP_DEBUG=Info MSCCLPP_DEBUG_SUBSYS=^INIT,ENV,COLL)
run_case logging-subsys 1 15 logging subsys
run_case logging-off 1 15 logging off
# variables set with setenv(3) after the library was loaded count (upstream reads them with getenv)
run_case logging-setenv 1 15 logging setenv
run_case env-setenv-comm-id 1 15 logging commid
case_env=(MSCCLPP_DEBUG=TRACE MSCCLPP_DEBUG_SUBSYS=CALL,ALLOC)
run_case logging-trace-call 1 15 logging trace
case_env=(MSCCLPP_BOOTSTRAP_TIMEOUT=abc)
run_case logging-malformed-env 1 15 logging malformed
logdir="$out/logging-file.d"
rm -rf "$logdir" && mkdir -p "$logdir"
case_env=(MSCCLPP_DEBUG=INFO "MSCCLPP_DEBUG_FILE=$logdir/dbg-%h-%p-%%.log" "MSCCLPP_TEST_LOGDIR=$logdir")
run_case logging-file 1 15 logging file
linkdir="$out/logging-link.d"
rm -rf "$linkdir" && mkdir -p "$linkdir" && printf 'untouched\n' >"$linkdir/target" && ln -s "$linkdir/target" "$linkdir/dbg.log"
case_env=(MSCCLPP_DEBUG=INFO "MSCCLPP_DEBUG_FILE=$linkdir/dbg.log" "MSCCLPP_TEST_LINK_TARGET=$linkdir/target")
run_case logging-file-symlink 1 15 logging symlink
run_case fork 1 30 fork
run_case fork-datapath 2 30 fork datapath
case_env=(MSCCLPP_DEBUG=INFO "MSCCLPP_DEBUG_FILE=$out/fork-exec-debug.%p.log") # the log file is open too
run_case fork-exec 2 30 fork exec
run_case hardening-stale-devconn 2 30 hardening stale
run_case hardening-wait-overflow 2 30 hardening wait
run_case hardening-hostfree-registered 2 30 hardening hostfree
run_case hardening-push-before-setup 2 30 hardening push
run_case hardening-destroy-in-signal-handler 2 30 hardening signal
case_env=(MSCCLPP_MEMBARRIER=0) # host calls hold their context by counting, not by a thread record
run_case hardening-destroy-in-signal-handler-counting 2 30 hardening signal
run_case shm-eager-visible 2 30 eager visible
case_expect_fail=1
run_case shm-eager-killed 2 30 eager killed
case_env=(MSCCLPP_DEBUG=INFO MSCCLPP_DEVICE=)
run_case mode-auto-host 1 30 mode auto
case_env=(MSCCLPP_DEVICE=cuda)
run_case mode-forced-cuda 1 30 mode cuda
case_env=(MSCCLPP_DEBUG=INFO MSCCLPP_DEVICE=)
run_case mode-app-loaded-libcuda 1 30 mode preloaded
case_env=(MSCCLPP_DEVICE=cuda MSCCLPP_CUDA_LIBRARY=/nonexistent/libcuda.so.1)
run_case mode-forced-cuda-no-libcuda 1 30 mode cuda
run_case threads.cc 2 30 threads_cc
run_case readme-example-n2 2 30 readme_example
run_case readme-example-n3 3 30 readme_example
cuda_case
# tests/gpu/moved.sh: build/ carried to another path (a copy), the GPU checks built from it
# with nvcc alone, through its relocatable .pc and without pkg-config, linked to the copy
script_case gpu-build-moved 120 "$root/tests/gpu/moved.sh" "$build"
# tests/gpu/selftest.sh: run.sh's judgement on stand-ins, no GPU needed (no pass after a
# failure under MPS, a SKIP never a pass, GPUs counted through CUDA, a carried build/ used as it
# is, every case wired)
script_case gpu-script-judgement 180 "$root/tests/gpu/selftest.sh"
install_case
cmake_case
packaging_case install-destdir-multiarch destdir
packaging_case nvcc-pkg-config nvcc
perf_case

# the sub-suites: wait for each (started before the cases), print its lines and count its cases
for sub in transports tools launchers multinode; do
  finish_subsuite "$sub"
done

echo "# suite took $(elapsed "$suite_start") s, $(awk -v t="$(getconf CLK_TCK 2>/dev/null || echo 100)" \
  '{ printf "%.1f", ($14 + $15 + $16 + $17) / t }' /proc/$$/stat) s CPU (its sub-suites' included); logs in $out"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
