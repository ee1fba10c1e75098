#!/usr/bin/env bash
# run_tools.sh [BUILD_DIR]: the tool-stack cases (mscclpp_tools.h).
#
# Builds the example tools (counter.c, tracer.c), the test tool (testtool.c,
# twice: testtool_a.so and testtool_b.so) and the program tools_app.c
# against BUILD_DIR (default: build) through pkg-config only, into
# BUILD_DIR/tests/c/tools, then runs each case and checks what the program
# asserts itself (its exit status) and the lines the tools print: order of
# layers, counts, trace lines, WARN lines. Prints "PASS name (seconds)",
# or "FAIL name (seconds)" and the case's log, per case, and last
# "N passed, M failed". Exit status 0 when nothing failed.
#
# Environment: TOOLS_CASES="name ..." runs only those cases.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac

export PKG_CONFIG_PATH="$build/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if ! pc=$(pkg-config --cflags --libs mscclpp 2>&1); then
  echo "run_tools.sh: pkg-config cannot find mscclpp under $build/lib/pkgconfig: $pc"
  echo "0 passed, 1 failed"
  exit 1
fi
unset MSCCLPP_TOOLS MSCCLPP_TRACER_FILE MSCCLPP_TRACE_FILE MSCCLPP_PROFILE_FILE MSCCLPP_COUNTER_FILE MSCCLPP_DEBUG MSCCLPP_DEBUG_FILE TOOLS_APP_CTOR \
  TOOLS_APP_LAYERS TESTTOOL_A TESTTOOL_B

out=$build/tests/c/tools
rm -rf "$out" && mkdir -p "$out" || exit 1
CC=${CC:-cc}
passed=0
failed=0

# ---- build ----
build_ok=1
compile() { # name cmd...
  local name=$1
  shift
  if ! "$@" >"$out/build-$name.log" 2>&1; then
    echo "FAIL build-$name"
    sed 's/^/    /' "$out/build-$name.log" | head -40
    failed=$((failed + 1))
    build_ok=0
  fi
}
flags=(-std=c11 -Wall -Wextra -Werror)
# each compile (-c) through the compile cache (tests/c/compile-cache.sh), each link every time
. "$here/../compile-cache.sh"
compile launch cc_program "$CC" "$out/launch" "${flags[@]}" "$here/../launch.c"
compile counter cc_program "$CC" "$out/libmscclpp_counter.so" "${flags[@]}" -shared -fPIC "$here/counter.c" $pc
compile tracer cc_program "$CC" "$out/libmscclpp_tracer.so" "${flags[@]}" -shared -fPIC "$here/tracer.c" $pc
compile testtool_a cc_program "$CC" "$out/testtool_a.so" "${flags[@]}" -shared -fPIC -DTOOL_TAG='"A"' "$here/testtool.c" $pc
compile testtool_b cc_program "$CC" "$out/testtool_b.so" "${flags[@]}" -shared -fPIC -DTOOL_TAG='"B"' "$here/testtool.c" $pc
compile tools_app cc_program "$CC" "$out/tools_app" "${flags[@]}" -I"$here/.." "$here/tools_app.c" $pc -pthread
if [ $build_ok = 0 ]; then
  echo "$passed passed, $failed failed"
  exit 1
fi
counter=$out/libmscclpp_counter.so
tracer=$out/libmscclpp_tracer.so
ta=$out/testtool_a.so
tb=$out/testtool_b.so
app=$out/tools_app

want_case() {
  [ -z "${TOOLS_CASES:-}" ] && return 0
  local c
  for c in $TOOLS_CASES; do [ "$c" = "$1" ] && return 0; done
  return 1
}

# Checks, each appending a line to $problems when it fails. $log is the case's output.
problems=""
problem() { problems+="$*"$'\n'; }
has() { grep -Eq -- "$1" "$log" || problem "no line matches /$1/"; }
hasnt() { ! grep -Eq -- "$1" "$log" || problem "a line matches /$1/ and should not: $(grep -Em1 -- "$1" "$log")"; }
count_is() { # regex want [file]
  local n
  n=$(grep -Ec -- "$1" "${3:-$log}")
  [ "$n" = "$2" ] || problem "$n lines match /$1/ in $(basename "${3:-$log}"), expected $2"
}
# the lines matching regex, in order, must be exactly the remaining arguments
sequence_is() {
  local re=$1 got want
  shift
  got=$(grep -E -- "$re" "$log")
  want=$(printf '%s\n' "$@")
  [ "$got" = "$want" ] || problem "lines /$re/ are:"$'\n'"$got"$'\n'"expected:"$'\n'"$want"
}
# every tracer line in file is whole and well-formed
trace_lines_ok() {
  local bad
  bad=$(grep '^mscclpp-trace' "$1" | grep -Evc '^mscclpp-trace [0-9]+:[0-9]+ mscclpp[A-Za-z]+\(.*\) -> [^ ].* [0-9]+\.[0-9]{3} us$')
  [ "$bad" = 0 ] || problem "$bad malformed trace lines in $(basename "$1")"
}

# run_case NAME TIMEOUT CHECKFN env... -- cmd...: runs cmd (stdout and stderr to
# the log), then CHECKFN; passes when cmd exits 0 and no check failed.
run_case() {
  local name=$1 t=$2 check=$3
  shift 3
  want_case "$name" || return 0
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  log=$out/$name.log
  problems=""
  local t0 rc
  t0=$(date +%s.%N)
  env ${envs[@]+"${envs[@]}"} timeout -k 5 "$t" "$@" >"$log" 2>&1
  rc=$?
  [ $rc = 0 ] || problem "exit status $rc"
  "$check"
  local dt
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [ -z "$problems" ]; then
    echo "PASS $name (${dt}s)"
    passed=$((passed + 1))
  else
    echo "FAIL $name (${dt}s)"
    printf '%s' "$problems" | sed 's/^/    /'
    echo "    --- output ($log):"
    tail -n 40 "$log" | sed 's/^/    /'
    failed=$((failed + 1))
  fi
}

# ---- cases ----

# the registration interface, with no MSCCLPP_TOOLS
check_api() { has 'tools_app rank 0: all [0-9]+ checks passed'; }
run_case tools-api 30 check_api -- "$app" api

# two tools and a layer the program registers from its constructor: the
# first listed is the outermost, the program's layer is below them, fini runs innermost first
check_order_ab() {
  sequence_is '^(testtool [AB]|app) (enter|exit) mscclppGetVersion' \
    "testtool A enter mscclppGetVersion layer=1 below=2" "testtool B enter mscclppGetVersion layer=2 below=3" \
    "app enter mscclppGetVersion layer=3 below=0" "app exit mscclppGetVersion" \
    "testtool B exit mscclppGetVersion" "testtool A exit mscclppGetVersion"
  # the program's layer does not intercept mscclppCommRank: B's next is the library
  sequence_is '^testtool [AB] (enter|exit) mscclppCommRank' \
    "testtool A enter mscclppCommRank layer=1 below=2" "testtool B enter mscclppCommRank layer=2 below=0" \
    "testtool B exit mscclppCommRank" "testtool A exit mscclppCommRank"
  sequence_is '^testtool [AB] fini' "testtool B fini calls=4 ctx=ok" "testtool A fini calls=4 ctx=ok"
}
run_case tools-order-ab 30 check_order_ab MSCCLPP_TOOLS="$ta:$tb" TOOLS_APP_CTOR=1 -- "$app" calls
check_order_ba() {
  sequence_is '^testtool [AB] (enter|exit) mscclppGetVersion' \
    "testtool B enter mscclppGetVersion layer=1 below=2" "testtool A enter mscclppGetVersion layer=2 below=0" \
    "testtool A exit mscclppGetVersion" "testtool B exit mscclppGetVersion"
}
run_case tools-order-ba 30 check_order_ba MSCCLPP_TOOLS="$tb:$ta" -- "$app" calls

# both example tools: the counter (outer) counts exactly the calls the tracer (inner) traces
check_counter_tracer() {
  has '^mscclpp-trace [0-9]+:[0-9]+ mscclppGetVersion\(version=0x[0-9a-f]+->100\) -> mscclppSuccess [0-9.]+ us$'
  has '^mscclpp-trace [0-9]+:[0-9]+ mscclppCommRank\(comm=\(nil\), rank=0x[0-9a-f]+->-1\) -> mscclppInvalidUsage '
  has '^mscclpp-trace [0-9]+:[0-9]+ mscclppGetErrorString\(result=0\) -> "no error" '
  trace_lines_ok "$log"
  has '^mscclpp-counter: mscclppGetVersion 1$'
  has '^mscclpp-counter: mscclppCommRank 1$'
  # per function, as many calls counted as traced
  local n fn
  while read -r n fn; do
    has "^mscclpp-counter: $fn $n\$"
  done < <(grep -Eo '^mscclpp-trace [0-9]+:[0-9]+ mscclpp[A-Za-z]+' "$log" | awk '{ print $3 }' | sort | uniq -c)
  has "^mscclpp-counter: total $(grep -c '^mscclpp-trace ' "$log")\$"
}
run_case tools-counter-tracer 30 check_counter_tracer MSCCLPP_TOOLS="$counter:$tracer" -- "$app" calls

# a tool that calls the next layer twice: the tracer above it sees one call, the counter below two
check_twice() {
  count_is '^testtool A calls mscclppGetVersion again$' 1
  count_is '^mscclpp-trace .* mscclppGetVersion\(' 1
  has '^mscclpp-counter: mscclppGetVersion 2$'
}
run_case tools-twice 30 check_twice MSCCLPP_TOOLS="$tracer:$ta:$counter" TESTTOOL_A=twice -- "$app" calls

# a tool that answers without calling the library: nothing below it sees the call
check_short() {
  has '^testtool A short-circuits mscclppCommRank$'
  hasnt '^mscclpp-counter: mscclppCommRank '
  has '^mscclpp-counter: total '
}
run_case tools-short-circuit 30 check_short MSCCLPP_TOOLS="$ta:$counter" TESTTOOL_A=short -- "$app" short

# changed arguments reach the layers below; changed results reach the program
check_change() {
  has '^mscclpp-trace .* mscclppGetErrorString\(result=4\) -> "invalid argument" '
  hasnt '^mscclpp-trace .* mscclppGetErrorString\(result=0\)'
  has '^mscclpp-trace .* mscclppGetVersion\(version=0x[0-9a-f]+->100\) -> mscclppSuccess '
  has '^mscclpp-trace .* mscclppCommSize\(comm=\(nil\), .*\) -> mscclppInvalidUsage '
  has '^tools_app rank 0: all [0-9]+ checks passed'
}
run_case tools-change 30 check_change MSCCLPP_TOOLS="$tb:$tracer" TESTTOOL_B=change -- "$app" change

# a path that does not load and a library that registers nothing (libanl: a
# glibc library no program here loads): skipped with WARN, the rest works
check_bad_path() {
  has '^[^ ]+:[0-9]+:[0-9]+ \[-1\] tools\.c:[0-9]+ MSCCLPP WARN MSCCLPP_TOOLS: cannot load /nonexistent/libnope\.so: .*; skipped$'
  has '^[^ ]+:[0-9]+:[0-9]+ \[-1\] tools\.c:[0-9]+ MSCCLPP WARN MSCCLPP_TOOLS: libanl\.so\.1 loaded but registered no layer .*; skipped$'
  has '^mscclpp-counter: mscclppGetVersion 1$'
  has '^tools_app rank 0: all [0-9]+ checks passed'
}
run_case tools-bad-path 30 check_bad_path MSCCLPP_TOOLS="/nonexistent/libnope.so:$counter::libanl.so.1" \
  TOOLS_APP_LAYERS=1 -- "$app" badpath

# a tool listed twice: loaded and registered once, and the WARN says so
check_listed_twice() {
  has '^[^ ]+:[0-9]+:[0-9]+ \[-1\] tools\.c:[0-9]+ MSCCLPP WARN MSCCLPP_TOOLS: [^ ]*libmscclpp_counter\.so was already loaded \(listed twice, or loaded by the program\); .*skipped$'
  hasnt 'registered no layer'
  has '^mscclpp-counter: mscclppGetVersion 1$'
  has '^tools_app rank 0: all [0-9]+ checks passed'
}
run_case tools-listed-twice 30 check_listed_twice MSCCLPP_TOOLS="$counter:$counter" TOOLS_APP_LAYERS=1 -- "$app" badpath

# 8 threads x 2000 iterations through both tools while main registers a layer
# below them: exact counts, one whole trace line per call
check_threads() {
  local tf=$out/threads-trace.log
  has '^threads: 8 threads x 2000 iterations done$'
  has '^mscclpp-counter: mscclppGetVersion 16001$'
  has '^mscclpp-counter: mscclppCommRank 16000$'
  has '^mscclpp-counter: mscclppGetErrorString 16000$'
  count_is '^mscclpp-trace [0-9]+:[0-9]+ mscclppGetVersion\(version=0x[0-9a-f]+->10[01]\) -> mscclppSuccess ' 16001 "$tf"
  count_is '^mscclpp-trace .* mscclppCommRank\(comm=\(nil\), .*\) -> mscclppInvalidUsage ' 16000 "$tf"
  trace_lines_ok "$tf"
  local tids
  tids=$(grep -Eo '^mscclpp-trace [0-9]+:[0-9]+' "$tf" | sort -u | wc -l)
  [ "$tids" -ge 9 ] || problem "trace lines from $tids threads, expected 9 (8 and main)"
}
rm -f "$out/threads-trace.log"
run_case tools-threads 60 check_threads MSCCLPP_TOOLS="$counter:$tracer" MSCCLPP_TRACER_FILE="$out/threads-trace.log" \
  -- "$app" threads

# a real communicator on 2 ranks, each tracing to its own file (%p)
check_comm() {
  local f n=0
  for f in "$out"/comm-trace-*.log; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    count_is '^mscclpp-trace .* mscclppCommInitRank\(.*nranks=2, ipPortPair="127\.0\.0\.1:[0-9]+", rank=[01]\) -> mscclppSuccess ' 1 "$f"
    count_is '^mscclpp-trace .* mscclppBootstrapAllGather\(.*size=4\) -> mscclppSuccess ' 1 "$f"
    count_is '^mscclpp-trace .* mscclppBootstrapBarrier\(.*\) -> mscclppSuccess ' 1 "$f"
    count_is '^mscclpp-trace .* mscclppCommDestroy\(.*\) -> mscclppSuccess ' 1 "$f"
    trace_lines_ok "$f"
  done
  [ $n = 2 ] || problem "$n trace files, expected 2"
  has '^\[rank 0\] mscclpp-counter: mscclppCommInitRank 1$'
  has '^\[rank 1\] mscclpp-counter: mscclppCommInitRank 1$'
  has '^\[rank 1\] mscclpp-counter: mscclppBootstrapBarrier 1$'
  # mscclppCommReport: not intercepted (no trace line), its table on stdout
  has '^\[rank 0\] mscclpp report: rank 0 of 2$'
  has '^\[rank 1\] mscclpp report: connections set up: 0 \(declared: 0\);'
  has '^\[rank 1\] mscclpp report: last error: mscclppCommReport: f is NULL$'
  hasnt 'mscclpp-trace .*mscclppCommReport'
}
rm -f "$out"/comm-trace-*.log
run_case tools-comm-n2 60 check_comm MSCCLPP_TOOLS="$counter:$tracer" MSCCLPP_TRACER_FILE="$out/comm-trace-%p.log" \
  -- "$out/launch" -n 2 -t 50 -- "$app" comm

# in a child forked after loading, calls fail before any tool, and no fini runs there
check_fork() {
  hasnt 'testtool A enter'
  count_is '^testtool A fini calls=0 ctx=ok$' 1
  has '^tools_app rank 0: all [0-9]+ checks passed'
}
# a tool that registers no layer but hooks another's: refused, skipped, and the other tool still works
check_hijack() {
  has '^testtool B hijack mscclppToolRegisterFunction: invalid usage: .*layer 1 \("testtool A"\) belongs to another tool'
  has '^testtool B hijack mscclppToolSetContext: invalid usage: .*layer 1 \("testtool A"\) belongs to another tool'
  has "WARN MSCCLPP_TOOLS: $tb loaded but registered no layer"
  sequence_is '^testtool [AB] (enter|exit) mscclppGetVersion' \
    "testtool A enter mscclppGetVersion layer=1 below=0" "testtool A exit mscclppGetVersion"
  has '^testtool A fini calls=[0-9]+ ctx=ok$'
}
run_case tools-hijack 30 check_hijack MSCCLPP_TOOLS="$ta:$tb" TESTTOOL_B=hijack -- "$app" calls
run_case tools-fork 30 check_fork MSCCLPP_TOOLS="$ta" -- "$app" fork

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
