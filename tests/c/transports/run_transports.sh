#!/usr/bin/env bash
# run_transports.sh [BUILD_DIR]: the data-path suite, run over every transport
#
# Builds every program of tests/c/transports (and the launcher tests/c/launch.c)
# against BUILD_DIR (default: build) through pkg-config only, runs each case
# as N local processes under the launcher, and prints one line per case:
#   PASS name (seconds) | FAIL name (seconds), then the case's log | SKIP name: why
# and at the end "N passed, M failed". Exit status: 0 when nothing failed.
#
# Environment: SHM_CASES="name ..." runs only those cases; SHM_KEEP=1 keeps
# the logs (their directory is printed).
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac

export PKG_CONFIG_PATH="$build/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if ! pc=$(pkg-config --cflags --libs mscclpp 2>&1); then
  echo "run_transports.sh: pkg-config cannot find mscclpp under $build/lib/pkgconfig: $pc"
  echo "0 passed, 1 failed"
  exit 1
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-transports.XXXXXX")
if [ "${SHM_KEEP:-0}" = 1 ]; then
  echo "logs in $out"
else
  trap 'rm -rf "$out"' EXIT
fi

passed=0
failed=0
skipped=0
declare -A built

# each program's compile (-c) through the compile cache, its link made every time, its status
# in $out/built-NAME (cc_test_program, tests/c/compile-cache.sh)
. "$here/../compile-cache.sh"

# the programs build in parallel (as many at once as there are CPUs), then report in order; the
# compilers' identities asked once here, not in each background build
cache_tool_init gcc
cache_tool_init g++
(
  for src in "$here/../launch.c" "$here"/*.c "$here"/*.cc; do
    [ -e "$src" ] || continue
    compile_slot
    name=$(basename "$src")
    # shellcheck disable=SC2086
    cc_test_program "$out" "${name%.*}" "$src" $pc &
  done
  wait
)
for src in "$here/../launch.c" "$here"/*.c "$here"/*.cc; do
  [ -e "$src" ] || continue
  name=$(basename "$src")
  name=${name%.*}
  if [ -e "$out/built-$name" ]; then
    built[$name]=1
    if [ -s "$out/build-$name.log" ]; then
      echo "note: warnings building $name:"
      sed 's/^/    /' "$out/build-$name.log" | head -20
    fi
  else
    echo "FAIL build-$name"
    sed 's/^/    /' "$out/build-$name.log" | head -40
    failed=$((failed + 1))
  fi
done

elapsed() { # START [END]: END (default now) less START, in seconds with one decimal; both are
  # $EPOCHREALTIME values (bash's own clock: no date and awk forked for every case)
  local a=${1/[.,]/} b=${2:-$EPOCHREALTIME} d
  b=${b/[.,]/}
  d=$(((10#$b - 10#$a + 50000) / 100000))
  printf '%d.%d' $((d / 10)) $((d % 10))
}

want_case() {
  [ -z "${SHM_CASES:-}" ] && return 0
  local c
  for c in $SHM_CASES; do [ "$c" = "$1" ] && return 0; done
  return 1
}

# run_case NAME NRANKS TIMEOUT EXPECT_FAIL PROG [ARGS...]   (EXPECT_FAIL: "-" or a rank list)
# case_lenv=(VAR=VALUE ...) before a run_case sets launcher variables for that case only.
case_lenv=()
run_case() {
  local name=$1 n=$2 t=$3 ef=$4 prog=$5 lenv=("${case_lenv[@]}")
  shift 5
  case_lenv=()
  want_case "$name" || return 0
  if [ -z "${built[launch]:-}" ]; then
    echo "SKIP $name: the launcher did not build"
    skipped=$((skipped + 1))
    return 0
  fi
  if [ -z "${built[$prog]:-}" ]; then
    echo "SKIP $name: $prog did not build"
    skipped=$((skipped + 1))
    return 0
  fi
  local efargs=() e
  [ "$ef" != "-" ] && efargs=(--expect-fail "$ef")
  for e in "${lenv[@]}"; do efargs+=(-e "$e"); done
  local log="$out/$name.log" t0 t1 rc
  t0=$EPOCHREALTIME
  "$out/launch" -n "$n" -t "$t" "${efargs[@]}" "$out/$prog" "$@" >"$log" 2>&1
  rc=$?
  t1=$EPOCHREALTIME
  local dt
  dt=$(elapsed "$t0" "$t1")
  if [ $rc -eq 0 ]; then
    echo "PASS $name (${dt}s)"
    passed=$((passed + 1))
  else
    echo "FAIL $name (${dt}s, launch exit $rc): $prog $*"
    local shown
    shown=$(grep -v '^\[rank [0-9]*\] .* rank [0-9]*: OK (' "$log" 2>&1 | tail -40)
    if [ -z "$shown" ]; then # nothing but OK lines, or no log: say so, with the log's last lines
      shown="(the log, $(wc -l <"$log" 2>&1) line(s), holds nothing but the ranks' OK lines; its end:)"$'\n'$(tail -5 "$log" 2>&1)
    fi
    printf '%s\n' "$shown" | sed 's/^/    /'
    failed=$((failed + 1))
  fi
}

MB=$((1 << 20))

# allgather: 200 small rounds (1000 B per rank) + a few large ones, HostAlloc and malloc
for n in 2 3 4 8; do
  case $n in 2) big=$((16 * MB)) ;; 3 | 4) big=$((8 * MB)) ;; *) big=$((2 * MB)) ;; esac
  run_case "allgather_hostalloc_n$n" "$n" 60 - allgather --iters 200 --chunk 1000 --big-iters 3 --big-chunk $big
  run_case "allgather_malloc_n$n" "$n" 60 - allgather --malloc --iters 200 --chunk 1000 --big-iters 3 --big-chunk $big
done
# several registered buffers per connection, mscclppConnPutHandle at odd offsets
run_case handles_n2 2 60 - handles
run_case handles_n3 3 60 - handles
# FIFO: wrap-around with a full FIFO, fifo.sync, flush(), exact signal counts
run_case fifo_wrap_hostalloc_n2 2 60 - fifo wrap
run_case fifo_wrap_malloc_n2 2 60 - fifo wrap --malloc
run_case fifo_wrap_ring_n3 3 60 - fifo wrap
# FIFO: several threads pushing to one connection (and to two sharing a FIFO)
run_case fifo_concurrent_n2 2 60 - fifo concurrent
run_case fifo_concurrent_n3 3 60 - fifo concurrent
# host flush()/signal() ordered after earlier fifo.push triggers
run_case fifo_order_hostalloc_n2 2 60 - fifo order
run_case fifo_order_malloc_n2 2 60 - fifo order --malloc
run_case fifo_flagorder_hostalloc_n2 2 60 - fifo flagorder
run_case fifo_flagorder_malloc_n2 2 60 - fifo flagorder --malloc
# 1-byte and 16 MiB puts (above the 8 MiB where puts into HostAlloc memory may stream: sizes.cc)
run_case sizes_hostalloc_n2 2 90 - sizes
run_case sizes_malloc_n2 2 90 - sizes --malloc
# out-of-range triggers rejected, canary intact, later operations work
run_case bounds_hostalloc_n2 2 60 - bounds
run_case bounds_malloc_n2 2 60 - bounds --malloc
# a peer SIGKILLed mid-transfer
run_case kill_waittimeout_n2 2 60 1 kill 1 timeout
run_case kill_wait_malloc_n3 3 60 2 kill 2 wait --malloc
run_case kill_root_n3 3 60 0 kill 0 timeout
# bounded waits under CPU hogs, misuse, destroy under concurrent calls, threaded collectives
run_case robust_hogs_n2 2 60 1 robust hogs
run_case robust_misuse_n2 2 60 - robust misuse
run_case robust_destroy_n2 2 60 - robust destroy
case_lenv=(MSCCLPP_MEMBARRIER=0) # the same with the live-context table counting callers (no membarrier)
run_case robust_destroy_counting_n2 2 60 - robust destroy
run_case robust_collthreads_n2 2 60 - robust collthreads
case_lenv=("MSCCLPP_HOSTID=host{RANK}") # every rank its own host: collectives over TCP
run_case robust_collthreads_tcp_n2 2 60 - robust collthreads
# mscclppRegisterBuffer + mscclppRegisteredBufferWrite
run_case regbuf_n2 2 60 - regbuf
run_case regbuf_n3 3 60 - regbuf
# call sequences upstream accepts: its Python test's sequence, incremental setup,
# mscclppRegisterBuffer before setup; P2P in host mode is carried like SHM
p2p() { case_lenv=(MSCCLPP_TEST_TRANSPORT=p2p MSCCLPP_DEVICE=host "${case_lenv[@]}"); run_case "$@"; }
p2p dropin_pyseq_p2p_n2 2 60 - dropin pyseq
p2p dropin_pyseq_p2p_n3 3 60 - dropin pyseq
case_lenv=(MSCCLPP_TEST_TRANSPORT=p2p) # auto: the program loaded no CUDA driver, so host mode
run_case dropin_pyseq_p2p_auto_n2 2 60 - dropin pyseq
run_case dropin_incremental_n2 2 60 - dropin incremental
run_case dropin_incremental_n3 3 60 - dropin incremental
p2p dropin_incremental_p2p_n3 3 60 - dropin incremental
run_case dropin_incremental_mixed_n3 3 60 - dropin incremental mixed
run_case regbuf_before_n3 3 60 - regbuf before
p2p regbuf_before_p2p_n3 3 60 - regbuf before
p2p p2p_allgather_hostalloc_n3 3 60 - allgather --iters 50 --chunk 1000 --big-iters 2 --big-chunk $((4 * MB))
p2p p2p_regbuf_n2 2 60 - regbuf
# ProxyStop / Destroy with proxies running and a backlog, repeated; no leaks
run_case stop_n2 2 60 - stop
run_case stop_n4 4 60 - stop
# Destroy is local: it returns at once with a busy or a stopped peer and 64 MiB of puts queued
# to it (a 5 s bootstrap timeout: a destroy that waited for the peer took that long)
case_lenv=(MSCCLPP_BOOTSTRAP_TIMEOUT=5)
run_case destroy_busy_n2 2 60 - destroy busy
case_lenv=(MSCCLPP_BOOTSTRAP_TIMEOUT=5)
run_case destroy_stopped_n2 2 60 - destroy stopped
# the same data-path checks over the Ethernet transport (TCP between ranks of this node)
eth() { case_lenv=(MSCCLPP_TEST_TRANSPORT=ethernet); run_case "$@"; }
eth eth_allgather_hostalloc_n2 2 60 - allgather --iters 200 --chunk 1000 --big-iters 3 --big-chunk $((16 * MB))
eth eth_allgather_malloc_n3 3 60 - allgather --malloc --iters 200 --chunk 1000 --big-iters 3 --big-chunk $((4 * MB))
eth eth_handles_n2 2 60 - handles
eth eth_fifo_wrap_n2 2 60 - fifo wrap
eth eth_fifo_concurrent_n3 3 60 - fifo concurrent
eth eth_fifo_order_n2 2 60 - fifo order
eth eth_fifo_flagorder_n2 2 60 - fifo flagorder
eth eth_sizes_n2 2 90 - sizes
eth eth_bounds_n2 2 60 - bounds
eth eth_kill_waittimeout_n2 2 60 1 kill 1 timeout
eth eth_kill_wait_n3 3 60 2 kill 2 wait --malloc
eth eth_stop_n2 2 60 - stop
case_lenv=(MSCCLPP_TEST_TRANSPORT=ethernet MSCCLPP_BOOTSTRAP_TIMEOUT=5)
run_case eth_destroy_busy_n2 2 60 - destroy busy
case_lenv=(MSCCLPP_TEST_TRANSPORT=ethernet MSCCLPP_BOOTSTRAP_TIMEOUT=5)
run_case eth_destroy_stopped_n2 2 60 - destroy stopped
case_lenv=(MSCCLPP_TEST_TRANSPORT=ethernet MSCCLPP_BOOTSTRAP_TIMEOUT=2)
run_case eth_destroy_proxystop_n2 2 60 - destroy proxystop
eth eth_destroy_goodbye_n2 2 60 - destroy goodbye
eth eth_dropin_incremental_n3 3 60 - dropin incremental
eth eth_regbuf_n2 2 60 - regbuf
eth eth_regbuf_before_n3 3 60 - regbuf before
# ... and over the IB transport, against the libibverbs test double (tests/ib/double: RC QPs
# between processes of this machine, no hardware)
dbl="$out/ibdouble/libibverbs.so.1"
if bash "$root/tests/ib/double/build.sh" "$out/ibdouble" >"$out/build-ibdouble.log" 2>&1; then
  ib() {
    case_lenv=(MSCCLPP_TEST_TRANSPORT=ib MSCCLPP_TEST_IB_DEV=double_0 "MSCCLPP_IBV_SO=$dbl" "MSCCLPP_IBV_DOUBLE_DIR={DIR}")
    run_case "$@"
  }
  ib ib_allgather_hostalloc_n2 2 60 - allgather --iters 200 --chunk 1000 --big-iters 3 --big-chunk $((16 * MB))
  ib ib_allgather_malloc_n3 3 60 - allgather --malloc --iters 200 --chunk 1000 --big-iters 3 --big-chunk $((4 * MB))
  ib ib_handles_n2 2 60 - handles
  ib ib_fifo_wrap_n2 2 60 - fifo wrap
  ib ib_fifo_concurrent_n3 3 60 - fifo concurrent
  ib ib_fifo_order_n2 2 60 - fifo order
  ib ib_fifo_flagorder_n2 2 60 - fifo flagorder
  ib ib_sizes_n2 2 90 - sizes
  ib ib_bounds_n2 2 60 - bounds
  ib ib_stop_n2 2 60 - stop
  ib ib_kill_waittimeout_n2 2 60 1 kill 1 timeout
  ib ib_destroy_goodbye_n2 2 60 - destroy goodbye
  ib ib_regbuf_n2 2 60 - regbuf
  ib ib_regbuf_n3 3 60 - regbuf
  ib ib_dropin_incremental_n3 3 60 - dropin incremental
  ib ib_regbuf_before_n3 3 60 - regbuf before
  case_lenv=(MSCCLPP_TEST_TRANSPORT=ib MSCCLPP_TEST_IB_DEV=double_0 "MSCCLPP_IBV_SO=$dbl" "MSCCLPP_IBV_DOUBLE_DIR={DIR}" MSCCLPP_BOOTSTRAP_TIMEOUT=5)
  run_case ib_destroy_busy_n2 2 60 - destroy busy
  case_lenv=(MSCCLPP_TEST_TRANSPORT=ib MSCCLPP_TEST_IB_DEV=double_0 "MSCCLPP_IBV_SO=$dbl" "MSCCLPP_IBV_DOUBLE_DIR={DIR}" MSCCLPP_BOOTSTRAP_TIMEOUT=5)
  run_case ib_destroy_stopped_n2 2 60 - destroy stopped
  case_lenv=(MSCCLPP_TEST_TRANSPORT=ib MSCCLPP_TEST_IB_DEV=double_0 "MSCCLPP_IBV_SO=$dbl" "MSCCLPP_IBV_DOUBLE_DIR={DIR}" MSCCLPP_BOOTSTRAP_TIMEOUT=2)
  run_case ib_destroy_proxystop_n2 2 60 - destroy proxystop
else
  echo "FAIL build-ibdouble"
  sed 's/^/    /' "$out/build-ibdouble.log" | head -20
  failed=$((failed + 1))
fi
# oversubscribed (4 ranks, more than this machine's CPUs): 1000 rounds of an 8-byte allgather
# arrive whole; their speed is make bench's row, measured against MPI_Allgather in the same run
run_case oversub_allgather_n4 4 60 - allgather --iters 1000 --chunk 8 --big-iters 0
if want_case oversub_allgather_n4 && [ -f "$out/oversub_allgather_n4.log" ]; then
  grep -o 'rank 0: n=4 .*' "$out/oversub_allgather_n4.log" | sed 's/^/    /'
fi

if [ $skipped -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ $failed -eq 0 ]
