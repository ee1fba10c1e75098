#!/usr/bin/env bash
# run_multinode.sh [BUILD_DIR]: the multi-node tests, on simulated nodes.
#
# Every case runs a program as N ranks on a cluster of cluster.sh (K nodes, each its own
# network, mount and UTS namespaces with a private /dev/shm and /tmp, joined by veths to a
# bridge in a namespace of its own); the cases of one K that inject no fault share one cluster,
# one after another (shared_case below), the others build their own:
#   mn-bootstrap-2x2, mn-bootstrap-4x1   tests/c/bootstrap.c across nodes
#   mn-nodeshm-2x2, mn-nodeshm-3n5r      nodeshm.c: SHM allgather within each
#       node, SHM to another node refused (mscclppInvalidUsage + message),
#       /dev/shm and /tmp private to the node (3n5r: uneven 2+2+1, malloc)
#   mn-nodeshm-control                   the same privacy check with all ranks
#       on one real /dev/shm must FAIL (the check can see a shared /dev/shm)
#   mn-perf-1node                        perf inside one simulated node
#   mn-perf-2nodes, mn-perf-4nodes       `make run MULTINODE=2` and 4: perf
#       across nodes over the Ethernet transport, every byte checked
#   mn-eth-linkdown-2x2, mn-eth-sigstop-2x2   linkfault.cc: a link set down / a peer
#       SIGSTOPped mid-transfer: RemoteError naming the peer on every rank within the
#       bootstrap timeout + 1 s, mscclppCommDestroy within 1 s (host and proxy path,
#       bounded and unbounded waits)
#   mn-eth-devthreads-2x2                tests/devthreads/mnrank.cc: the header's device
#       methods on CPU threads ("kernels" in the stand-in driver) over Ethernet in CUDA mode,
#       each rank with its partner on the other node: 150 pushing threads, every byte checked
#   mn-ib-p2p-allgather-devthreads-2x2   tests/devthreads/mnallgather.cc: upstream's
#       multi-node allgather in CUDA mode, P2P inside a node (CUDA IPC between processes of
#       the stand-in driver) and IB between (the IB double, GPUDirect RDMA through the
#       driver's dma-bufs), device buffers, the kernel on CPU threads: every byte checked
#   mn-ib-sigstop-2x2                    the same for an IB peer (the IB double) that stops
#       answering: its heartbeats stop
#   mn-eth-sigcont-2x2, mn-eth-flap-2x1   a SIGCONT / link up within the timeout: every
#       round completes, every byte checked
#   mn-timeout-cleanup, mn-term-cleanup, mn-kill-cleanup   a rank that hangs
#       past the timeout; cluster.sh stopped by SIGTERM, and by SIGKILL:
#       everything must still go away
#   mn-nothing-left                      after all cases: no process in any
#       namespace a case made, `ip netns list`, the host's links and mounts
#       as before, no run directory left
# Prints PASS/FAIL/SKIP per case and last "N passed, M failed[, K skipped]".
# Where simulated nodes cannot be made (not root, no iproute2 or util-linux,
# no namespaces) it prints one line "SKIP multinode: <why>" instead.
# Environment: MN_CASES="name ..." runs only those cases; MN_VERBOSE=1 prints
# every case's output.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
suite_start=$EPOCHREALTIME

elapsed() { # START [END]: END (default now) less START, in seconds with one decimal; both are
  # $EPOCHREALTIME values (bash's own clock: no date and awk forked for every case)
  local a=${1/[.,]/} b=${2:-$EPOCHREALTIME} d
  b=${b/[.,]/}
  d=$(((10#$b - 10#$a + 50000) / 100000))
  printf '%d.%d' $((d / 10)) $((d % 10))
}

# iproute2 where it is missing, as tests/c/bench.sh installs Open MPI
if ! command -v ip >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "# multinode: installing iproute2 (apt-get install -y iproute2)"
  { apt-get install -y iproute2 || { apt-get update && apt-get install -y iproute2; }; } >/dev/null 2>&1
fi
if ! why=$(bash "$here/cluster.sh" --check); then
  echo "SKIP multinode: $why"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
. "$here/simnodes-lock.sh"
simnodes_lock multinode-lock "$0" "$@"
# checked above: each cluster.sh (and `make run MULTINODE`'s) need not check again
export MN_REQUIREMENTS_MET=1

export PKG_CONFIG_PATH="$build/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if ! pc=$(pkg-config --cflags --libs mscclpp 2>&1); then
  echo "FAIL multinode-build: pkg-config cannot find mscclpp under $build/lib/pkgconfig: $pc"
  echo "0 passed, 1 failed"
  exit 1
fi
unset MSCCLPP_DEBUG MSCCLPP_DEBUG_SUBSYS MSCCLPP_DEBUG_FILE MSCCLPP_COMM_ID MSCCLPP_SOCKET_IFNAME \
  MSCCLPP_SOCKET_FAMILY MSCCLPP_HOSTID MSCCLPP_TEST_RANK MSCCLPP_TEST_NRANKS MSCCLPP_TEST_ADDR MSCCLPP_TEST_DIR \
  MSCCLPP_PERF_TRANSPORT

out=$build/tests/multinode
mkdir -p "$out" || exit 1
(cd "$out" && rm -rf launch bootstrap nodeshm perf allgather fifo kill stop linkfault mnrank ./*.log ./*.state ./*.out ./*.rc ./*.jobs)

passed=0 failed=0 skipped=0
verbose=${MN_VERBOSE:-0}
want_case() {
  [ -z "${MN_CASES:-}" ] && return 0
  local c
  for c in $MN_CASES; do [ "$c" = "$1" ] && return 0; done
  return 1
}
pass() { # name start [log [end]]
  passed=$((passed + 1))
  echo "PASS $1  ($(elapsed "$2" "${4:-}") s)"
  if [ "$verbose" = 1 ] && [ -n "${3:-}" ]; then sed 's/^/    /' "$3"; fi
}
fail() { # name start log [end]
  failed=$((failed + 1))
  echo "FAIL $1  ($(elapsed "$2" "${4:-}") s)"
  [ -f "${3:-}" ] && grep -Ev '^\[rank [0-9]+\] ok   ' "$3" | tail -n 60 | sed 's/^/    /'
}
skip() { # name why
  skipped=$((skipped + 1))
  echo "SKIP $1: $2"
}

# ---- build ----
build_start=$EPOCHREALTIME
declare -A built=()
# each program's compile (-c) through the compile cache, its link made every time, its status
# in $out/built-NAME (cc_test_program, tests/c/compile-cache.sh: the transports suite builds the
# same programs the same way, and one of the two compiles them)
. "$root/tests/c/compile-cache.sh"
rm -f "$out"/built-*
# as many builds at once as there are CPUs; the compilers' identities asked once here, not in
# each background build
cache_tool_init gcc
cache_tool_init g++
(
  for job in "launch|$root/tests/c/launch.c" "bootstrap|$root/tests/c/bootstrap.c" "nodeshm|$here/nodeshm.c" \
    "perf|$root/tools/perf/perf.c" "allgather|$root/tests/c/transports/allgather.c" \
    "fifo|$root/tests/c/transports/fifo.cc" "kill|$root/tests/c/transports/kill.cc" \
    "stop|$root/tests/c/transports/stop.cc" "linkfault|$here/linkfault.cc" \
    "mnrank|$root/tests/devthreads/mnrank.cc" "mnallgather|$root/tests/devthreads/mnallgather.cc" devthreads; do
    compile_slot
    if [ "$job" = devthreads ]; then
      # the stand-in libcuda with the device-threads kernels linked in (as impl/devthreads_test.go builds it)
      { cc_cached gcc -c -fPIC -O1 -o "$out/fakecuda.o" "$root/cuda/testdata/fakecuda.c" &&
        cc_cached g++ -c -std=c++17 -fPIC -O1 -I"$root/include" -I"$root/tests/devthreads" -o "$out/kernels.o" "$root/tests/devthreads/kernels.cc" &&
        g++ -shared -o "$out/libfakecuda-devthreads.so" "$out/fakecuda.o" "$out/kernels.o" -lpthread &&
        : >"$out/built-devthreads"; } >"$out/build-devthreads.log" 2>&1 &
    else
      # shellcheck disable=SC2086
      cc_test_program "$out" "${job%%|*}" "${job#*|}" $pc &
    fi
  done
  wait
)
# the libibverbs test double (tests/ib/double): RC QPs between processes, here across nodes
if bash "$root/tests/ib/double/build.sh" "$out/ibdouble" >"$out/build-ibdouble.log" 2>&1; then
  : >"$out/built-ibdouble"
fi
for b in launch bootstrap nodeshm perf allgather fifo kill stop linkfault mnrank mnallgather devthreads ibdouble; do
  if [ -e "$out/built-$b" ]; then
    built[$b]=1
  else
    failed=$((failed + 1))
    echo "FAIL build-$b"
    sed 's/^/    /' "$out/build-$b.log" | head -30
  fi
done
rm -f "$out"/built-*
echo "# multinode: built the programs in $(elapsed "$build_start") s"

# ---- what the host looks like before ----
host_netns() { ip netns list 2>/dev/null | awk '{print $1}' | sort; }
host_links() { ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | sort; }
host_mounts() { # "mountpoint fstype source"
  awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { print $5, $(i + 1), $(i + 2); break } }' /proc/self/mountinfo | sort
}
netns_before=$(host_netns)
links_before=$(host_links)
mounts_before=$(host_mounts)
states=()

# what is left of the run recorded in a state file: one line per thing, none when clean
leftovers() { # STATEFILE
  local st=$1 ids= pids= rundir= id= k v
  [ -f "$st" ] || return 0
  # (read by the shell itself: mn-nothing-left reads every case's state file)
  while read -r k v; do
    case $k in
      id) id=${v%% *} ;;
      rundir) rundir=${v%% *} ;;
      pids) pids+=" $v" ;;
      namespaces) ids+=" $v" ;;
    esac
  done <"$st"
  local p n state link l
  # (a zombie holder has already left its namespaces: its new parent reaps it)
  for p in $pids; do
    state=
    while read -r k v; do [ "$k" = State: ] && state=${v%% *} && break; done 2>/dev/null <"/proc/$p/status"
    [ "$state" = Z ] && continue
    [ -d "/proc/$p" ] && echo "holder process $p still running"
  done
  local -A ns=()
  for n in $ids; do ns[$n]=1; done
  # (the lines picked by this shell, not grep and sed: this runs after every case, and for every
  # case's state at the end)
  if [ ${#ns[@]} -gt 0 ]; then
    # (namespace ids are reused once a namespace is gone: only a holder or
    # a process with the run's MSCCLPP_HOSTID is ours, as in cluster.sh)
    ns_links | while read -r link; do
      n=${link##* -> }
      [ -n "${ns[$n]:-}" ] || continue
      p=${link#*/proc/} p=${p%%/*}
      case " $pids " in *" $p "*) ;; *) tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q "^MSCCLPP_HOSTID=mn$id-node" || continue ;; esac
      echo "process $p still in namespace $n"
    done
  fi
  link_lines | while IFS= read -r l; do [[ $l == *"mn$id"* ]] && echo "host link: $l"; done
  while IFS= read -r l; do [[ $l == *"mn$id-"* ]] && echo "host mount: $l"; done </proc/self/mountinfo
  [ -n "$rundir" ] && [ -e "$rundir" ] && echo "run directory $rundir still there"
  return 0
}
# every process's namespace links ("... /proc/PID/ns/net -> net:[...]") and the host's links:
# read now, or the snapshot in ns_snap / link_snap where one was taken (mn-nothing-left)
ns_snap= link_snap=
ns_links() {
  if [ -n "$ns_snap" ]; then printf '%s\n' "$ns_snap"; else
    ls -l /proc/[0-9]*/ns/net /proc/[0-9]*/ns/mnt /proc/[0-9]*/ns/uts 2>/dev/null
  fi
}
link_lines() { if [ -n "$link_snap" ]; then printf '%s\n' "$link_snap"; else ip -o link show 2>/dev/null; fi; }

# wait (up to SECONDS) until nothing of STATEFILE is left; print what is
settle() { # STATEFILE SECONDS
  local i left
  for ((i = 0; i < $2 * 20; i++)); do
    left=$(leftovers "$1")
    [ -z "$left" ] && return 0
    sleep 0.05
  done
  echo "$left"
  return 1
}

# run_cluster NAME TIMEOUT CLUSTER_ARGS... -- PROG ARGS: runs cluster.sh with
# a state file; sets rc and log
run_cluster() {
  local name=$1 t=$2
  shift 2
  log=$out/$name.log
  local st=$out/$name.state
  states+=("$st")
  timeout -k 5 $((t + 10)) bash "$here/cluster.sh" --launch "$out/launch" --state "$st" -t "$t" "$@" >"$log" 2>&1
  rc=$?
  echo "# cluster.sh exit $rc" >>"$log"
}

# a case that passes when every rank exits 0 and nothing is left behind
ranks_case() { # NAME TIMEOUT BIN CLUSTER_ARGS... -- PROG ARGS
  local name=$1 t=$2 bin=$3
  shift 3
  want_case "$name" || return 0
  local start
  start=$EPOCHREALTIME
  if [ "${built[$bin]:-0}" != 1 ]; then
    skip "$name" "$bin did not build"
    return
  fi
  run_cluster "$name" "$t" "$@"
  local left
  left=$(settle "$out/$name.state" 3) || echo "LEFT BEHIND: $left" >>"$log"
  if [ $rc -eq 0 ] && [ -z "$left" ]; then pass "$name" "$start" "$log"; else fail "$name" "$start" "$log"; fi
}

# The cases of one topology that inject no fault share one cluster (cluster.sh --jobs: one
# after another, each once nothing of the one before is left in the nodes), for setting up and
# tearing down a cluster costs about 1 s of CPU, a tenth of this suite's: shared_case queues a
# case on the cluster of its -k nodes, run_shared K runs that cluster's queue and judges each
# case as ranks_case does (its ranks' status, and nothing of the cluster left behind). A case
# that takes a link down, stops a rank or tests the cleanup keeps a cluster of its own.
declare -A shared_jobs=() shared_names=() shared_secs=()
shared_case() { # NAME TIMEOUT BIN -k K CLUSTER_ARGS... -- PROG ARGS
  local name=$1 t=$2 bin=$3 k
  shift 3
  want_case "$name" || return 0
  if [ "${built[$bin]:-0}" != 1 ]; then
    skip "$name" "$bin did not build"
    return
  fi
  if [ "$1" != -k ]; then
    echo "FAIL $name (run_multinode.sh: shared_case wants -k K first)"
    failed=$((failed + 1))
    return
  fi
  k=$2
  shift 2
  rm -f "$out/$name.log.rc" # (cluster.sh writes it once the case ran)
  shared_jobs[$k]+="$(printf '%q ' "$out/$name.log" -t "$t" "$@")"$'\n'
  shared_names[$k]+=" $name"
  shared_secs[$k]=$((${shared_secs[$k]:-0} + t + 5))
}
run_shared() { # K
  local k=$1 st=$out/mn-shared-k$1.state jobs=$out/mn-shared-k$1.jobs clog=$out/mn-shared-k$1.log
  local name crc left jrc jstart jend
  [ -n "${shared_names[$k]:-}" ] || return 0
  printf '%s' "${shared_jobs[$k]}" >"$jobs"
  states+=("$st")
  timeout -k 5 $((shared_secs[$k] + 10)) bash "$here/cluster.sh" --launch "$out/launch" --state "$st" -k "$k" --jobs "$jobs" >"$clog" 2>&1
  crc=$?
  echo "# cluster.sh exit $crc" >>"$clog"
  left=$(settle "$st" 3) || echo "LEFT BEHIND: $left" >>"$clog"
  for name in ${shared_names[$k]}; do
    log=$out/$name.log
    jrc= jstart= jend=
    read -r jrc jstart jend 2>/dev/null <"$log.rc"
    { echo "# on the shared cluster of $k nodes (cluster.sh --jobs $jobs): status ${jrc:-none, not run}"; } >>"$log"
    if [ "$jrc" = 0 ] && [ $crc -eq 0 ] && [ -z "$left" ]; then
      pass "$name" "$jstart" "$log" "$jend"
    else
      { echo "-- the shared cluster's own output:"; cat "$clog"; } >>"$log"
      fail "$name" "${jstart:-$EPOCHREALTIME}" "$log" "$jend"
    fi
  done
}

# ---- (1) bootstrap across nodes ----
shared_case mn-bootstrap-2x2 30 bootstrap -k 2 -n 4 -- "$out/bootstrap"
shared_case mn-bootstrap-4x1 30 bootstrap -k 4 -n 4 -- "$out/bootstrap"

# ---- (2) + (3) SHM within a node, refused across, private /dev/shm and /tmp ----
shared_case mn-nodeshm-2x2 30 nodeshm -k 2 -n 4 -- "$out/nodeshm"
ranks_case mn-nodeshm-3n5r 30 nodeshm -k 3 -n 5 -- "$out/nodeshm" --malloc --rounds 10 --chunk 100000

# the control: two "nodes" that share the machine's /dev/shm and /tmp (plain
# launch, distinct host ids): nodeshm must notice the other node's markers
if want_case mn-nodeshm-control; then
  name=mn-nodeshm-control
  start=$EPOCHREALTIME
  if [ "${built[nodeshm]:-0}" = 1 ]; then
    log=$out/$name.log
    timeout -k 5 40 "$out/launch" -n 2 -t 30 -e "MSCCLPP_TEST_PLACEMENT=0,1" -e "MSCCLPP_TEST_NODE={RANK}" \
      -e "MSCCLPP_HOSTID=mnctl$$-node{RANK}" -- "$out/nodeshm" --rounds 1 --chunk 64 >"$log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && grep -q 'sees /dev/shm/mscclpp-mnmark' "$log" && grep -q 'sees /tmp/mscclpp-mnmark' "$log"; then
      pass "$name" "$start" "$log"
    else
      echo "-- want a failure naming the other node's markers in /dev/shm and /tmp (launch exit $rc)" >>"$log"
      fail "$name" "$start" "$log"
    fi
    rm -f /dev/shm/mscclpp-mnmark.mnctl$$.* /tmp/mscclpp-mnmark.mnctl$$.*
  else
    skip "$name" "nodeshm did not build"
  fi
fi

# ---- perf on simulated nodes ----
ranks_case mn-perf-1node 30 perf -k 1 -n 2 -- "$out/perf" -b 8 -e 64K -f 8 -n 2 -w 1 -c 1

# make_run_case NAME K ARGS: `make run MULTINODE=K NRANKS=4 ARGS=...` must check every byte
make_run_case() {
  local name=$1 k=$2 args=$3 start rc
  want_case "$name" || return 0
  start=$EPOCHREALTIME
  log=$out/$name.log
  timeout -k 5 120 make -s -C "$root" run BUILD="$build" MULTINODE="$k" NRANKS=4 ARGS="$args" >"$log" 2>&1
  rc=$?
  echo "# make run exit $rc" >>"$log"
  if [ $rc -eq 0 ] && grep -q '^# Out of bounds values : 0 OK$' "$log"; then
    pass "$name" "$start" "$log"
  else
    fail "$name" "$start" "$log"
  fi
}
make_run_case mn-perf-2nodes 2 "-b 8 -e 64K -f 8 -n 2 -w 1 -c 1"
# perf across 4 nodes (one rank each), over the Ethernet transport
make_run_case mn-perf-4nodes 4 "-b 8 -e 1M -f 8 -n 2 -w 1 -c 1"

# ---- the data-path suite's programs across nodes, over the Ethernet transport ----
eth=(-e MSCCLPP_TEST_TRANSPORT=ethernet)
shared_case mn-eth-allgather-2x2 60 allgather -k 2 -n 4 "${eth[@]}" -- "$out/allgather" --iters 100 --chunk 1000 --big-iters 2 --big-chunk $((4 << 20))
shared_case mn-eth-allgather-4x1 60 allgather -k 4 -n 4 "${eth[@]}" -- "$out/allgather" --malloc --iters 100 --chunk 1000 --big-iters 2 --big-chunk $((2 << 20))
shared_case mn-eth-fifo-wrap-2x1 60 fifo -k 2 -n 2 "${eth[@]}" -- "$out/fifo" wrap
shared_case mn-eth-fifo-flagorder-2x1 60 fifo -k 2 -n 2 "${eth[@]}" -- "$out/fifo" flagorder
shared_case mn-eth-stop-4x1 60 stop -k 4 -n 4 "${eth[@]}" -- "$out/stop"
# a lost link and a stopped peer (linkfault.cc; bootstrap timeout 4 s): every rank fails with
# mscclppRemoteError naming an unreachable rank (or a survivor that failed before it) within
# 5.5 s of the fault and destroys within 1 s,
# over the four combinations of puts on the calling thread or the proxy and bounded or
# unbounded waits, 16 MiB puts and 4 KiB ones (where only the receive side can notice);
# a SIGCONT or link up within the timeout loses nothing. The timeout is also how long a peer
# may stay silent before it counts as lost: at 2 s, a loaded machine (CI beside other jobs)
# once kept a live peer silent that long before the fault (a false alarm).
lf=(--timeout 4 --host 0,3 --bounded 0,2 --small 2,3)
ranks_case mn-eth-linkdown-2x2 40 linkfault -k 2 -n 4 -- "$out/linkfault" link "${lf[@]}"
ranks_case mn-eth-sigstop-2x2 40 linkfault -k 2 -n 4 --expect-fail 3 -- "$out/linkfault" stop "${lf[@]}"
ranks_case mn-eth-sigcont-2x2 40 linkfault -k 2 -n 4 -- "$out/linkfault" stopcont --pause 1000 "${lf[@]}"
ranks_case mn-eth-flap-2x1 40 linkfault -k 2 -n 2 -- "$out/linkfault" flap --timeout 8 --pause 1500 --host 0 --bounded 1
# device code on CPU threads over Ethernet in CUDA mode, across nodes (the stand-in driver)
if [ "${built[devthreads]:-0}" = 1 ]; then
  shared_case mn-eth-devthreads-2x2 90 mnrank -k 2 -n 4 -e "MSCCLPP_CUDA_LIBRARY=$out/libfakecuda-devthreads.so" -- "$out/mnrank"
fi

# ---- the same over the IB transport, against the libibverbs test double ----
ibenv=(-e MSCCLPP_TEST_TRANSPORT=ib -e MSCCLPP_TEST_IB_DEV=double_0 -e "MSCCLPP_IBV_SO=$out/ibdouble/libibverbs.so.1"
  -e "MSCCLPP_IBV_DOUBLE_DIR={DIR}" -e MSCCLPP_PERF_TRANSPORT=ib -e MSCCLPP_PERF_IB_DEV=double_0)
if [ "${built[ibdouble]:-0}" = 1 ]; then
  built[perf_ib]=1
  shared_case mn-ib-perf-2x2 60 perf -k 2 -n 4 "${ibenv[@]}" -- "$out/perf" -b 8 -e 1M -f 8 -n 2 -w 1 -c 1
  shared_case mn-ib-perf-4x1 60 perf -k 4 -n 4 "${ibenv[@]}" -- "$out/perf" -b 8 -e 1M -f 8 -n 2 -w 1 -c 1
  shared_case mn-ib-allgather-2x2 60 allgather -k 2 -n 4 "${ibenv[@]}" -- "$out/allgather" --iters 100 --chunk 1000 --big-iters 2 --big-chunk $((4 << 20))
  shared_case mn-ib-allgather-4x1 60 allgather -k 4 -n 4 "${ibenv[@]}" -- "$out/allgather" --malloc --iters 100 --chunk 1000 --big-iters 2 --big-chunk $((2 << 20))
  shared_case mn-ib-fifo-wrap-2x1 60 fifo -k 2 -n 2 "${ibenv[@]}" -- "$out/fifo" wrap
  shared_case mn-ib-stop-4x1 60 stop -k 4 -n 4 "${ibenv[@]}" -- "$out/stop"
  # an IB peer that stops answering (SIGSTOP: the double, like a NIC, still takes writes into
  # it, but its heartbeats stop): the same bound as over Ethernet
  ranks_case mn-ib-sigstop-2x2 40 linkfault -k 2 -n 4 --expect-fail 3 "${ibenv[@]}" -- "$out/linkfault" stop "${lf[@]}"
  # upstream's multi-node pattern: P2P inside a node, IB between, device buffers, kernels on CPU threads
  if [ "${built[devthreads]:-0}" = 1 ]; then
    shared_case mn-ib-p2p-allgather-devthreads-2x2 90 mnallgather -k 2 -n 4 "${ibenv[@]}" \
      -e "MSCCLPP_CUDA_LIBRARY=$out/libfakecuda-devthreads.so" -- "$out/mnallgather"
  fi
fi

# a rank SIGKILLed mid-transfer: last on its shared cluster (what a killed rank could not clean
# up, in its node's /dev/shm, then meets no other case)
shared_case mn-eth-kill-2x2 60 kill -k 2 -n 4 --expect-fail 3 "${eth[@]}" -- "$out/kill" 3 timeout
run_shared 2
run_shared 4

# ---- cleanup after a timeout, SIGTERM and SIGKILL ----
if want_case mn-timeout-cleanup; then
  name=mn-timeout-cleanup
  start=$EPOCHREALTIME
  run_cluster "$name" 1 -k 2 -n 2 -- sleep 30
  left=$(settle "$out/$name.state" 3) || echo "LEFT BEHIND: $left" >>"$log"
  if [ $rc -eq 124 ] && grep -q 'TIMEOUT' "$log" && [ -z "$left" ]; then
    pass "$name" "$start" "$log"
  else
    echo "-- want launch's TIMEOUT (exit 124) and nothing left behind; cluster.sh exit $rc" >>"$log"
    fail "$name" "$start" "$log"
  fi
fi

# stop cluster.sh with SIG once its ranks run, then nothing may be left
signal_case() { # NAME SIG
  local name=$1 sig=$2 start st log cpid i left
  want_case "$name" || return 0
  start=$EPOCHREALTIME
  st=$out/$name.state
  log=$out/$name.log
  states+=("$st")
  bash "$here/cluster.sh" --launch "$out/launch" --state "$st" -t 30 -k 2 -n 2 -- sleep 30 >"$log" 2>&1 &
  cpid=$!
  # until the 3 holders and the 2 ranks are in the cluster's namespaces
  local before=0
  for ((i = 0; i < 300; i++)); do
    before=$(leftovers "$st" | awk '/still in namespace/ {print $2}' | sort -u | wc -l)
    [ "$before" -ge 5 ] && break
    sleep 0.02
  done
  kill "-$sig" "$cpid"
  { wait "$cpid"; } 2>/dev/null # no "Killed" line from the shell
  local rc=$?
  left=$(settle "$st" 5)
  # after launch's last words (an orphaned launch writes at its own offset)
  echo "# cluster.sh exit $rc after SIG$sig; $before processes were in its namespaces" >>"$log"
  [ -n "$left" ] && echo "LEFT BEHIND: $left" >>"$log"
  if [ "$before" -ge 5 ] && [ -z "$left" ]; then
    pass "$name" "$start" "$log"
  else
    echo "-- want the ranks running in the nodes before SIG$sig, and nothing left after it" >>"$log"
    fail "$name" "$start" "$log"
  fi
}
signal_case mn-term-cleanup TERM
if setpriv --help 2>/dev/null | grep -q -- --pdeathsig; then
  signal_case mn-kill-cleanup KILL
else
  want_case mn-kill-cleanup && skip mn-kill-cleanup "no setpriv --pdeathsig: the holders do not die with a killed runner"
fi

# ---- (4) nothing left behind ----
if want_case mn-nothing-left; then
  name=mn-nothing-left
  start=$EPOCHREALTIME
  log=$out/$name.log
  : >"$log"
  # every case is over: one snapshot of the processes' namespaces and the host's links serves
  # all the state files; a state it shows unclean is looked at again (settle) before it counts
  ns_snap=$(ns_links)
  link_snap=$(link_lines)
  unclean=()
  for st in ${states[@]+"${states[@]}"}; do
    [ -z "$(leftovers "$st")" ] || unclean+=("$st")
  done
  ns_snap= link_snap=
  for st in ${unclean[@]+"${unclean[@]}"}; do
    left=$(settle "$st" 2) || echo "$(basename "$st" .state): $left" >>"$log"
  done
  # what appeared on the host since the suite began: ours (an mn<ID> name,
  # a new mount on /dev/shm or /tmp themselves) is a failure; anything else
  # is noted only (this machine may be shared)
  ours='(^|[^a-z])mn[0-9]+|^/dev/shm |^/tmp '
  new_netns=$(comm -13 <(echo "$netns_before") <(host_netns))
  new_links=$(comm -13 <(echo "$links_before") <(host_links))
  new_mounts=$(comm -13 <(echo "$mounts_before") <(host_mounts))
  for what in netns links mounts; do
    v=new_$what
    [ -n "${!v}" ] || continue
    if echo "${!v}" | grep -Eq "$ours"; then
      echo "new on the host ($what): $(echo "${!v}" | grep -E "$ours" | tr '\n' ' ')" >>"$log"
    fi
    if echo "${!v}" | grep -Evq "$ours"; then
      echo "note: new on the host ($what), not from this suite: $(echo "${!v}" | grep -Ev "$ours" | tr '\n' ' ')"
    fi
  done
  if [ ${#states[@]} -gt 0 ] && [ ! -s "$log" ]; then
    pass "$name" "$start" "$log"
  else
    [ ${#states[@]} -eq 0 ] && echo "no cluster ran" >>"$log"
    fail "$name" "$start" "$log"
  fi
fi

echo "# multinode suite took $(elapsed "$suite_start") s; logs in $out"
if [ $skipped -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ $failed -eq 0 ]
