#!/bin/bash
# bench.sh: benchmarks of libmscclpp beside references measured in the same run.
#
#   bash tests/c/bench.sh [BUILD]      (make bench; BUILD defaults to build)
#
# Builds the programs of tests/c/bench against BUILD (through pkg-config
# only) into BUILD/bench, runs each figure and its reference alternately
# BENCH_REPS times (default 3; every figure is the median over the reps) and
# prints two tables, each figure beside its reference, the ratio, the goal
# and whether it is met. Times are medians over iterations (see the
# programs); the machine is shared, so only the ratios mean much. Rows
# marked (diagnostic) rerun a figure under a changed setting (an
# environment knob, another reference) to show where time goes; they carry
# no goal. Goals with an absolute bound (bootstrap) are checked against
# the figure itself; all others against the ratio.
#
# The init rows are diagnostics (their goal of 3 x the C ring is retired):
# each has beside it boot_gofloor.c, the C ring's exchange written in Go as
# cheaply as Go allows (gofloor/gofloor.go), the floor under any Go
# bootstrap, and on one host the library's init protocol written in C
# (boot_tcp.c proto).
#
# Section 2d (ucx) times UCX, the UCP one-sided puts a user without a GPU
# would pick instead (ucx_ref.c): an 8-byte put + a flag the receiver polls,
# one way, and its bandwidth at 64 KiB .. 256 MiB, over shared memory
# (UCX_TLS=sm,self; beside ours on HostAlloc and on malloc buffers) and over
# TCP (UCX_TLS=tcp; beside ours over Ethernet), UCX and ours interleaved
# block by block in the same 2 processes; where UCX wins a row, a diagnostic
# row names its transport and protocol. Beside the malloc rows, a raw
# process_vm_writev of the same buffers (one copy on the sender's CPU): where
# it does not reach UCX either, the row is at a measured limit.
#
# Section 2c (proxy) times the trigger FIFO and the proxy thread in host mode
# (proxy_mscclpp.c): a Sync trigger's round trip and the triggers served per
# second beside a raw ring of 16-byte entries with a polling consumer thread
# and beside that ring with the FIFO protocol (proxy_ref.h), interleaved in
# the same process (round trips timed 8 at a time; the proxy alone: the
# same trigger through the FIFO's fields, as a kernel pushes it); with 1, 2 and 4 connections on one proxy and with 2
# proxies (SHM + Ethernet); the CPU an idle proxy uses and its wake-up after
# idling; and putWithSignal one way through the proxy beside the host path
# (no proxy) and a raw proxy thread (a ring, memcpy and signal, a futex
# doorbell), in the same 2 processes.
#
# Section 3 times the tool dispatch (mscclpp_tools.h): mscclppGetErrorString
# with no tool, one and two pass-through tools (MSCCLPP_TOOLS), beside a
# plain function call and the same function in another shared library,
# measured in the same process; then the shipped profile and trace tools
# (tools/), each against the run with no tool.
#
# Section 4 (scale) times, at N = 16, 32, 64, 128 and 256 local ranks
# (scale.c): init, the 4-byte mscclppBootstrapAllGather and a full
# all-to-all mscclppConnectionSetup, init and allgather beside boot_tcp.c,
# and per rank the descriptors and resident memory after init and after the
# setup and the CPU time of each phase; then the same over 4 simulated nodes
# x 4 ranks (5 runs) and 8 x 16 (tests/multinode/cluster.sh: SHM inside a
# node, Ethernet between nodes; n/a, saying why, where nodes cannot be
# simulated), and how each figure grows per added rank.
#
# Section 5 (perf) runs the shipped perf tool (tools/perf/perf.c, nccl-tests'
# all_gather_perf) on 2 local ranks over SHM and over Ethernet (each rank its
# own MSCCLPP_HOSTID, so the two look like two nodes): busbw at 32 MiB beside
# the raw memcpy (b) and raw TCP bandwidth of sections 2 and 2b at 16 MiB,
# each rank's chunk.
#
# Results file: besides the tables on stdout, every row goes to
# BUILD/bench/results.tsv (tab-separated; '#' lines first: date, commit,
# machine, load; then a header line and one line per row: section, row,
# figure, unit, reference, ratio, goal, met, table). figure and reference are
# in unit (ns, GB/s, /s, count or KiB), empty when not measured; table is 1 for the rows
# docs/PERFORMANCE.md's table shows (tests/c/bench/render.sh renders them).
#
# Environment: BENCH_REPS (3), BENCH_INIT_REPS (6: init-only runs added to
# section 1's init figures), BENCH_BUDGET_S (0.3 s per figure and run),
# BENCH_NS ("2 4 8 16": bootstrap sizes), BENCH_SKIP_MPI=1 (no Open MPI
# references), BENCH_SECTIONS ("boot host eth ucx proxy tools scale perf": the sections
# to run), BENCH_SCALE_NS ("16 32 64 128 256": the scale section's sizes),
# BENCH_SCALE_8X16 (1; 0: no 8 x 16 simulated nodes), BENCH_PROXY_REPS (5:
# runs of the proxy section), BENCH_MN_REPS (5: runs of 4 x 4 simulated nodes).
# Open MPI and UCX are installed with apt-get when missing and we are root.
set -u -o pipefail

BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=$BUILD/bench
SRC=$HERE/bench
REPS=${BENCH_REPS:-3}
# the proxy section and the simulated nodes' runs: 5 runs each, so that the rows that sit near
# their goals are read as the median of 5 with its spread (one lucky run proves nothing)
PREPS=${BENCH_PROXY_REPS:-5}
MNREPS=${BENCH_MN_REPS:-5}
NS=${BENCH_NS:-"2 4 8 16"}
INIT_REPS=${BENCH_INIT_REPS:-6}
export BENCH_BUDGET_S=${BENCH_BUDGET_S:-0.3}
RES=$OUT/results.txt
INFO=$OUT/info.txt
TSV=$OUT/results.tsv
LOG=$OUT/bench.log
T_START=$(date +%s)
SECTIONS=${BENCH_SECTIONS:-"boot host eth ucx proxy tools scale perf"}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

die() { echo "bench: $*" >&2; exit 1; }

[ -f "$BUILD/lib/pkgconfig/mscclpp.pc" ] || die "no $BUILD/lib/pkgconfig/mscclpp.pc: run make first"
mkdir -p "$OUT"
: >"$RES"
: >"$INFO"
: >"$LOG"

# ---- Open MPI (references only) ----
MPI=1
if [ "${BENCH_SKIP_MPI:-0}" = 1 ] || ! want host; then
  MPI=0
elif ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bench: installing Open MPI (apt-get install -y openmpi-bin libopenmpi-dev)"
    { apt-get install -y openmpi-bin libopenmpi-dev || { apt-get update && apt-get install -y openmpi-bin libopenmpi-dev; }; } >>"$LOG" 2>&1
  fi
  command -v mpicc >/dev/null && command -v mpirun >/dev/null || { echo "bench: no Open MPI; its references are n/a"; MPI=0; }
fi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

# ---- UCX (references only) ----
UCX=1
if ! want ucx; then
  UCX=0
elif ! pkg-config --exists ucx 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bench: installing UCX (apt-get install -y libucx-dev ucx-utils)"
    { apt-get install -y libucx-dev ucx-utils || { apt-get update && apt-get install -y libucx-dev ucx-utils; }; } >>"$LOG" 2>&1
  fi
  pkg-config --exists ucx 2>/dev/null || { echo "bench: no UCX (libucx-dev); its references are n/a"; UCX=0; }
fi

# ---- build ----
PC=$(PKG_CONFIG_PATH=$BUILD/lib/pkgconfig pkg-config --cflags --libs mscclpp) || die "pkg-config mscclpp failed"
CC=${CC:-cc}
CFLAGS="-O2 -Wall -Wextra -std=gnu11"
build() { # out src [libs]
  local out=$1 src=$2; shift 2
  "$CC" $CFLAGS -o "$OUT/$out" "$SRC/$src" "$@" >>"$LOG" 2>&1 || { cat "$LOG" >&2; die "building $out failed"; }
}
build launch launch.c
build boot_tcp boot_tcp.c
build boot_mscclpp boot_mscclpp.c $PC
build host_ref host_ref.c
# reference (e) of the 8-byte host rows: protocol (b) behind checked calls into a library of its own
build libchecked_ref.so checked_ref.c -shared -fPIC
CHK="-L$OUT -Wl,-rpath,$OUT -lchecked_ref"
build host_mscclpp host_mscclpp.c $CHK $PC
build eth_bw eth_bw.c $PC
build proxy_mscclpp proxy_mscclpp.c $PC -lpthread
# the tool dispatch: a reference library, a pass-through tool built twice, the program
build libtools_ref.so tools_ref.c -shared -fPIC
build tools_pass1.so tools_pass.c -shared -fPIC -DPASS_NAME='"pass1"' $PC
build tools_pass2.so tools_pass.c -shared -fPIC -DPASS_NAME='"pass2"' $PC
build tools_bench tools_bench.c -L"$OUT" -Wl,-rpath,"$OUT" -ltools_ref $PC
build scale scale.c $PC
build perf ../../../tools/perf/perf.c $PC -pthread
# the Go floor of init: boot_tcp.c's exchange in a Go c-shared library (gofloor/gofloor.go)
(cd "$ROOT" && go build -buildmode=c-shared -o "$OUT/libgofloor.so" ./tests/c/bench/gofloor) >>"$LOG" 2>&1 ||
  { cat "$LOG" >&2; die "building libgofloor.so failed"; }
build boot_gofloor boot_gofloor.c -I"$OUT" -L"$OUT" -Wl,-rpath,"$OUT" -lgofloor
if [ $UCX = 1 ]; then
  "$CC" $CFLAGS -o "$OUT/ucx_ref" "$SRC/ucx_ref.c" $PC $(pkg-config --cflags --libs ucx) >>"$LOG" 2>&1 ||
    { echo "bench: building ucx_ref failed (see $LOG); the UCX rows are n/a"; UCX=0; }
fi
if [ $MPI = 1 ]; then
  { mpicc $CFLAGS -o "$OUT/mpi_ref" "$SRC/mpi_ref.c" &&
    mpicc $CFLAGS -DBENCH_MPI -o "$OUT/host_mpi" "$SRC/host_mscclpp.c" $CHK $PC; } >>"$LOG" 2>&1 ||
    { echo "bench: building the MPI programs failed (see $LOG); MPI references are n/a"; MPI=0; }
fi

# run PREFIX cmd...: run a benchmark (killed after RUN_T seconds, default 180), keep its RESULT/LAUNCH lines as "PREFIX.key value".
FAILED=0
run() {
  local prefix=$1; shift
  local out t0=$SECONDS
  if ! out=$(timeout "${RUN_T:-180}" "$@" 2>>"$LOG"); then
    echo "bench: FAILED: $*" | tee -a "$LOG" >&2
    FAILED=$((FAILED + 1))
  fi
  echo "bench: $((SECONDS - t0)) s: $prefix: $*" >>"$LOG"
  echo "$out" | awk -v p="$prefix" '$1=="RESULT"||$1=="LAUNCH"{print p "." $2, $3}' >>"$RES"
  # INFO key text...: words about the run (a version, a transport), kept as "PREFIX.key<TAB>text"
  echo "$out" | awk -v p="$prefix" '$1=="INFO"{k=$2; $1=""; $2=""; sub(/^ +/, ""); print p "." k "\t" $0}' >>"$INFO"
}

# lap NAME: NAME's section ran since the last lap (or the start): its seconds join DURS, printed
# at the end and kept in the results file's #durations line
DURS=
LAP=0
lap() {
  DURS="${DURS:+$DURS, }$1 $((SECONDS - LAP)) s"
  LAP=$SECONDS
}

# info KEY: the last text recorded under KEY (empty when none)
info() { awk -F'\t' -v k="$1" '$1==k{v=$2} END{print v}' "$INFO"; }

# get KEY: the median of every value recorded under KEY (empty when none); once the runs are
# over (medians), from a table of every key's median made once, not a pass over RES per call
declare -A MED=()
MED_READY=0
medians() {
  while read -r k v; do MED[$k]=$v; done < <(sort -k1,1 -k2,2g "$RES" |
    awk 'function out() { if (n) printf "%s %.6g\n", k, v[int((n + 1) / 2)] } $1 != k { out(); k = $1; n = 0 } NF >= 2 { v[++n] = $2 } END { out() }')
  MED_READY=1
}
get() {
  if [ "$MED_READY" = 1 ]; then
    printf '%s' "${MED[$1]:-}"
    return
  fi
  awk -v k="$1" '$1==k{print $2}' "$RES" | sort -g | awk '{v[NR]=$1} END{if(NR) printf "%.6g", v[int((NR+1)/2)]}'
}

# ---- machine ----
B_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
B_MACHINE="$(nproc) CPUs, $(lscpu | awk -F: '/Model name/{gsub(/^ +/,"",$2); print $2; exit}'), $(uname -r)"
B_COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && B_COMMIT="$B_COMMIT (with local changes)"
B_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== libmscclpp bench ($B_DATE)"
echo "machine: $B_MACHINE"
echo "load average at start: $B_LOAD   reps: $REPS   budget: ${BENCH_BUDGET_S}s per figure and run"
printf '#date\t%s\n#commit\t%s\n#machine\t%s\n#load\t%s\n#sections\t%s\n#reps\t%s\n' \
  "$B_DATE" "$B_COMMIT" "$B_MACHINE" "$B_LOAD" "$SECTIONS" "$REPS" >"$TSV"
printf 'section\trow\tfigure\tunit\treference\tratio\tgoal\tmet\ttable\n' >>"$TSV"
[ $MPI = 1 ] && echo "Open MPI: $(mpirun --version 2>/dev/null | head -1)"
echo

lap build
# ---- 1. bootstrap ----
want boot && echo "running the bootstrap benchmarks (N = $NS) ..."
want boot && for n in $NS; do
  for rep in $(seq "$REPS"); do
    run "tcp.$n" "$OUT/launch" "$n" "$OUT/boot_tcp"
    run "ours.$n" "$OUT/launch" "$n" "$OUT/boot_mscclpp"
    # diagnostic: a C star (what the library does for small messages)
    run "star.$n" env BENCH_TOPO=star BENCH_ONLY=ag4,barrier "$OUT/launch" "$n" "$OUT/boot_tcp"
    run "gofloor.$n" "$OUT/launch" "$n" "$OUT/boot_gofloor"
    run "cproto.$n" "$OUT/launch" "$n" "$OUT/boot_tcp" proto
  done
  # more init samples each (BENCH_INIT_REPS, 6: init is over in milliseconds and moves
  # with the machine's load, so its medians need more samples than the collectives');
  # init with the Go runtime's start; init without the CUDA probe
  for rep in $(seq "$INIT_REPS"); do
    run "tcp.$n" "$OUT/launch" "$n" "$OUT/boot_tcp" init
    run "ours.$n" "$OUT/launch" "$n" "$OUT/boot_mscclpp" init
    run "cold.$n" "$OUT/launch" "$n" "$OUT/boot_mscclpp" cold
    run "hostmode.$n" env MSCCLPP_DEVICE=host "$OUT/launch" "$n" "$OUT/boot_mscclpp" init
    run "gofloor.$n" "$OUT/launch" "$n" "$OUT/boot_gofloor"
    run "cproto.$n" "$OUT/launch" "$n" "$OUT/boot_tcp" proto
  done
done

want boot && lap boot
# ---- 2. host data path ----
# The figures and their references run interleaved in the same processes
# (host_mscclpp.c); with Open MPI the processes are MPI ranks (host_mpi)
# and the MPI references join in. The standalone reference programs
# (host_ref, mpi_ref) run once more at the end, for the record.
if want host; then
echo "running the host data-path benchmarks ..."
if [ $MPI = 1 ]; then
  PAIR=("${MPIRUN[@]}" -np 2 --bind-to core "$OUT/host_mpi")
  FOUR=("${MPIRUN[@]}" -np 4 --bind-to none "$OUT/host_mpi")
else
  PAIR=("$OUT/launch" -p 2 "$OUT/host_mscclpp")
  FOUR=("$OUT/launch" 4 "$OUT/host_mscclpp")
fi
for rep in $(seq "$REPS"); do
  run h "${PAIR[@]}" pair hostalloc
  run h "${PAIR[@]}" pair malloc
  run h4 "${FOUR[@]}" ag
done
# diagnostics: the 8-byte malloc case with the spin phase the library picks for unpinned
# ranks; HostAlloc up to 16 MiB with waits that never reach the sleeping phase
for rep in $(seq "$REPS"); do
  run diag env MSCCLPP_WAIT_SPIN=4000 "${PAIR[@]}" pair malloc 8
  run diag env MSCCLPP_WAIT_YIELD=100000000 "${PAIR[@]}" pair hostalloc $((16 << 20))
done
run s "$OUT/host_ref" line
run s "$OUT/host_ref" memcpy
run s "$OUT/host_ref" vmwrite
if [ $MPI = 1 ]; then
  run s "${MPIRUN[@]}" -np 2 --bind-to core "$OUT/mpi_ref" p2p
  run s4 "${MPIRUN[@]}" -np 4 --bind-to none "$OUT/mpi_ref" ag
fi
lap host
fi

# ---- 2b. Ethernet transport ----
if want eth; then
  echo "running the Ethernet transport benchmarks ..."
  for rep in $(seq "$REPS"); do
    run e "$OUT/launch" -p 2 "$OUT/eth_bw"
  done
  lap eth
fi

# ---- 2d. UCX ----
if want ucx && [ $UCX = 1 ]; then
  echo "running the UCX benchmarks ..."
  # each run maps 5 buffers of 256 MiB per process and moves 256 MiB messages 4 ways: under
  # load a run takes minutes, past launch's default 120 s
  for rep in $(seq "$REPS"); do
    RUN_T=330 run u env UCX_TLS=sm,self "$OUT/launch" -t 300 -p 2 "$OUT/ucx_ref" shm
    RUN_T=330 run u env UCX_TLS=tcp "$OUT/launch" -t 300 -p 2 "$OUT/ucx_ref" tcp
  done
  lap ucx
fi

# ---- 2c. proxy ----
# trig: rank 0 pins itself to CPU 0 and its proxies and the raw ring's consumer to CPU 1 (rank 1
# only holds the connections' other end, asleep); pair: rank r and its proxy on CPU r (launch -p);
# the diagnostic pair run: waits yield at once and the idle proxy does not spin first
if want proxy; then
  echo "running the proxy benchmarks ($PREPS runs) ..."
  for rep in $(seq "$PREPS"); do
    run p "$OUT/launch" 2 "$OUT/proxy_mscclpp" trig
    run pp "$OUT/launch" -p 2 "$OUT/proxy_mscclpp" pair
  done
  lap proxy
fi

# ---- 3. tool dispatch ----
if want tools; then
  echo "running the tool-dispatch benchmarks ..."
  for rep in $(seq "$REPS"); do
    run t0 env -u MSCCLPP_TOOLS "$OUT/tools_bench"
    run t1 env MSCCLPP_TOOLS="$OUT/tools_pass1.so" "$OUT/tools_bench"
    run t2 env MSCCLPP_TOOLS="$OUT/tools_pass1.so:$OUT/tools_pass2.so" "$OUT/tools_bench"
    # the shipped tools; the trace keeps every call in memory, so its run is
    # the 16-block minimum (under 1M calls), written at exit to a file of its own (the
    # tool refuses one that exists, or one that is not a regular file), removed after
    run tp env MSCCLPP_TOOLS="$BUILD/lib/mscclpp/libmscclpp_profile.so" "$OUT/tools_bench"
    rm -f "$OUT/trace.json"
    run tt env MSCCLPP_TOOLS="$BUILD/lib/mscclpp/libmscclpp_trace.so" MSCCLPP_TRACE_FILE="$OUT/trace.json" \
      MSCCLPP_TRACE_MAX_EVENTS=2000000 BENCH_BUDGET_S=0 "$OUT/tools_bench"
    rm -f "$OUT/trace.json"
  done
  lap tools
fi

# ---- 4. scale ----
# At most 3 reps of the sizes up to 64 (each N=64 run starts 64 processes on this machine), and
# no new rep once the section ran 120 s; the sizes above 64 (128 and 256: minutes each on 2 CPUs)
# and 8 simulated nodes x 16 ranks run once; 4 nodes x 4 ranks runs MNREPS (5) times, its
# allgather row read as the median of those runs.
SCALE_NS=${BENCH_SCALE_NS:-"16 32 64 128 256"}
MN8=${BENCH_SCALE_8X16:-1}
SREPS=$((REPS < 3 ? REPS : 3))
# in_boot N: section 1 ran at N local ranks (its C ring, Go floor and C protocol runs are the
# scale section's references there)
in_boot() { want boot && [[ " $NS " == *" $1 "* ]]; }
# sref N KIND: the prefix of the scale section's reference KIND (tcp, gf, cp) at N local ranks
sref() {
  if in_boot "$1"; then
    case $2 in tcp) echo "tcp.$1" ;; gf) echo "gofloor.$1" ;; cp) echo "cproto.$1" ;; esac
  else
    echo "sc$2.$1"
  fi
}
MN_WHY=
if want scale; then
  echo "running the scale benchmarks (N = $SCALE_NS local; 4 simulated nodes x 4 ranks, 8 x 16) ..."
  S_START=$(date +%s)
  MN_WHY=$(bash "$ROOT/tests/multinode/cluster.sh" --check)
  # boot_t N: the bootstrap timeout (s) of a run of N ranks. Every wait of the library is bounded
  # by it (MSCCLPP_BOOTSTRAP_TIMEOUT, default 30 s), the closing barrier of mscclppConnectionSetup
  # and of scale.c's check too: there the first rank in waits for the last one, and with N ranks
  # on few CPUs the last one needs about N x (its CPU time) / CPUs more (8 x 16 on 2 CPUs: the setup
  # takes 25-35 s, its barrier's first rank waits 15-30 s). So 2 s per rank and CPU, at least 30 s;
  # one set in the environment is kept.
  boot_t() {
    local t=$((2 * $1 / $(nproc)))
    [ "$t" -lt 30 ] && t=30
    echo "${MSCCLPP_BOOTSTRAP_TIMEOUT:-$t}"
  }
  cluster() { # PREFIX NODES RANKS PROG [ARGS]: RANKS ranks over NODES simulated nodes
    local prefix=$1 k=$2 n=$3 bt
    shift 3
    bt=$(boot_t "$n")
    echo "$prefix.boot_timeout_ns ${bt}000000000" >>"$RES"
    RUN_T=600 run "$prefix" env MSCCLPP_BOOTSTRAP_TIMEOUT="$bt" BENCH_LAUNCH="$OUT/launch" bash "$ROOT/tests/multinode/cluster.sh" -k "$k" -n "$n" \
      -t $((n > 64 ? 500 : 60)) --launch "$SRC/cluster_launch.sh" -e 'BENCH_ADDR={ADDR}' -- "$@"
  }
  scale_n() { # PREFIXSUFFIX N: one run of each program at N local ranks (the references: not at
    # a size of section 1, which ran them there more often: its figures are the rows' references)
    local n=$2 t=$(($2 > 64 ? 500 : 60)) bt
    bt=$(boot_t "$n")
    echo "sc.$n.boot_timeout_ns ${bt}000000000" >>"$RES"
    RUN_T=600 run "sc.$n" env MSCCLPP_BOOTSTRAP_TIMEOUT="$bt" "$OUT/launch" -t $t "$n" "$OUT/scale"
    in_boot "$n" && return
    RUN_T=600 run "sctcp.$n" env BENCH_ONLY=ag4 "$OUT/launch" -t $t "$n" "$OUT/boot_tcp"
    RUN_T=600 run "scgf.$n" "$OUT/launch" -t $t "$n" "$OUT/boot_gofloor"
    RUN_T=600 run "sccp.$n" "$OUT/launch" -t $t "$n" "$OUT/boot_tcp" proto
  }
  for rep in $(seq "$SREPS"); do
    [ "$rep" -gt 1 ] && [ $(($(date +%s) - S_START)) -gt 120 ] && { echo "bench: scale: rep $rep skipped (the section ran 120 s)"; break; }
    for n in $SCALE_NS; do
      [ "$n" -le 64 ] && scale_n x "$n"
    done
  done
  for n in $SCALE_NS; do
    [ "$n" -gt 64 ] && scale_n x "$n"
  done
  if [ -z "$MN_WHY" ]; then
    for rep in $(seq "$MNREPS"); do
      cluster mn 4 16 "$OUT/scale"
      cluster mntcp 4 16 env BENCH_ONLY=ag4 "$OUT/boot_tcp"
      [ "$rep" -le "$SREPS" ] && cluster mngf 4 16 "$OUT/boot_gofloor"
    done
    if [ "$MN8" = 1 ]; then
      cluster mn8 8 128 "$OUT/scale"
      cluster mn8tcp 8 128 env BENCH_ONLY=ag4 "$OUT/boot_tcp"
      cluster mn8gf 8 128 "$OUT/boot_gofloor"
    fi
  fi
  S_SECS=$(($(date +%s) - S_START))
  lap scale
fi

# ---- 5. the perf tool ----
# perf_busbw shm|eth HEADER: one 2-rank run of the perf tool at PERF_SIZE bytes, as RESULT lines
# (busbw of the in-place and out-of-place columns); fails unless perf's header names HEADER.
# eth: the two ranks get hosts of their own (MSCCLPP_HOSTID eth0, eth1), so they connect over
# Ethernet; shm: perf starts its own 2 local ranks.
PERF_SIZE=$((32 << 20))
perf_busbw() {
  local o0=$OUT/perf.0.out o1=$OUT/perf.1.out args=(-b "$PERF_SIZE" -e "$PERF_SIZE" -n 10 -w 3 -c 1) port
  if [ "${1:-}" = eth ]; then
    port=$((20000 + RANDOM % 20000))
    MSCCLPP_TEST_RANK=1 MSCCLPP_TEST_NRANKS=2 MSCCLPP_TEST_ADDR=127.0.0.1:$port MSCCLPP_HOSTID=eth1 \
      timeout 120 "$OUT/perf" "${args[@]}" >"$o1" 2>&1 &
    MSCCLPP_TEST_RANK=0 MSCCLPP_TEST_NRANKS=2 MSCCLPP_TEST_ADDR=127.0.0.1:$port MSCCLPP_HOSTID=eth0 \
      timeout 120 "$OUT/perf" "${args[@]}" >"$o0" 2>&1
    local rc=$?
    wait $! || rc=1
    cat "$o1" >&2
  else
    "$OUT/perf" --nranks 2 -T 120 "${args[@]}" >"$o0" 2>&1
    local rc=$?
  fi
  cat "$o0" >&2
  grep -q "^# mscclpp all_gather_perf: .*${2:-SHM}" "$o0" || { echo "perf: not over ${2:-SHM}" >&2; rc=1; }
  awk -v s="$PERF_SIZE" '$1==s{print "RESULT busbw.inplace " $12; print "RESULT busbw.outofplace " $8}' "$o0"
  return $rc
}
if want perf; then
  echo "running the perf tool (2 ranks, $((PERF_SIZE >> 20)) MiB, over SHM and over Ethernet) ..."
  for rep in $(seq "$REPS"); do
    for t in shm:SHM eth:ethernet; do
      out=$(perf_busbw "${t%%:*}" "${t#*:}" 2>>"$LOG") || { echo "bench: FAILED: the perf tool over ${t#*:}" | tee -a "$LOG" >&2; FAILED=$((FAILED + 1)); }
      echo "$out" | awk -v p="pf.${t%%:*}" '$1=="RESULT"{print p "." $2, $3}' >>"$RES"
    done
  done
  lap perf
fi

# ---- tables ----
medians
# ftime NS / frate PER_S / fnum N / fkib KIB / fbw GBPS: human units, n/a when empty
# (fmtv AWK VALUE: VALUE, as v, printed by the awk statements AWK)
fmtv() {
  [ -z "$2" ] && { echo "n/a"; return; }
  awk -v v="$2" "BEGIN{ $1 }"
}
ftime() { fmtv 'a = v < 0 ? -v : v; if (a>=1e6) printf "%.2f ms", v/1e6; else if (a>=1e3) printf "%.1f us", v/1e3; else if (a>=100) printf "%.0f ns", v; else printf "%.2f ns", v' "$1"; }
frate() { fmtv 'printf "%.2f M/s", v/1e6' "$1"; }
fnum() { fmtv 'printf "%.3g", v' "$1"; }
fkib() { fmtv 'if (v >= 1024 || v <= -1024) printf "%.1f MiB", v / 1024; else printf "%.0f KiB", v' "$1"; }
fbw() { fmtv 'printf "%.2f GB/s", v' "$1"; }
MET=0
MISSED=0
LIMITS=0
# row LABEL KIND OURS REF GOALTEXT CHECK
#   KIND: t (times, ratio ours/ref), b (bandwidth, ratio ours/ref), r (rates per second, ours/ref),
#         n (counts) or k (KiB)
#   CHECK: "" (no goal), "le R" (ratio <= R), "ge R" (ratio >= R), "abs V" (ours <= V ns),
#          "dle V" (ours - ref <= V ns),
#          "limle R P" / "limge R P": "le R" / "ge R"; where that misses and P, the same ratio
#          for a raw reference measured in the same run (the proof row printed next), misses R
#          itself: "limit" (the goal is beyond what the raw mechanism reaches on this machine)
# row LABEL t|b OURS REF GOAL CHECK [RATIO]: RATIO, when given, is the ratio measured pairwise
# (median over interleaved blocks of ours/reference), else ours/ref of the medians.
row() {
  local label=$1 kind=$2 ours=$3 ref=$4 goal=$5 check=$6 paired=${7:-} o r ratio met
  case $kind in
  t) o=$(ftime "$ours"); r=$(ftime "$ref") ;;
  r) o=$(frate "$ours"); r=$(frate "$ref") ;;
  n) o=$(fnum "$ours"); r=$(fnum "$ref") ;;
  k) o=$(fkib "$ours"); r=$(fkib "$ref") ;;
  *) o=$(fbw "$ours"); r=$(fbw "$ref") ;;
  esac
  ratio=n/a
  [ -n "$ours" ] && [ -n "$ref" ] && ratio=$(awk -v a="$ours" -v b="$ref" 'BEGIN{ if (b>0) printf "%.2f", a/b; else print "n/a" }')
  [ -n "$paired" ] && ratio=$(awk -v p="$paired" 'BEGIN{ printf "%.2f", p }')
  met=""
  if [ -n "$check" ]; then
    set -- $check
    met=$(awk -v c="$1" -v x="$2" -v y="${3:-}" -v o="$ours" -v r="$ratio" -v rf="$ref" 'BEGIN{
      if (o=="") { print "n/a"; exit }
      if (c=="abs") { print (o+0 <= x+0) ? "yes" : "NO"; exit }
      if (c=="dle") { if (rf=="") print "n/a"; else print (o-rf <= x+0) ? "yes" : "NO"; exit }
      if (r=="n/a") { print "n/a"; exit }
      if (c=="limle" || c=="limge") {
        # a goal missed where the raw reference of the proof row, measured in the same run,
        # itself cannot reach it (proof ratio y) is at a measured limit
        if ((c=="limle" && r+0 <= x+0) || (c=="limge" && r+0 >= x+0)) { print "yes"; exit }
        if (y=="") { print "n/a"; exit }
        if ((c=="limle" && y+0 > x+0) || (c=="limge" && y+0 < x+0)) { print "limit"; exit }
        print "NO"; exit
      }
      if (c=="le") print (r+0 <= x+0) ? "yes" : "NO"; else print (r+0 >= x+0) ? "yes" : "NO" }')
    [ "$met" = yes ] && MET=$((MET + 1))
    [ "$met" = NO ] && MISSED=$((MISSED + 1))
    [ "$met" = limit ] && LIMITS=$((LIMITS + 1))
  fi
  printf "%-44s %12s %12s %7s  %-22s %s\n" "$label" "$o" "$r" "$ratio" "$goal" "$met"
  # the results file: KEY="SECTION|ROW" (or KEY=1: this section and label) puts the row in
  # docs/PERFORMANCE.md's table under that section and name
  local tsec=$SECTION tlab=$label intable=0 unit=GB/s
  case $kind in t) unit=ns ;; r) unit=/s ;; n) unit=count ;; k) unit=KiB ;; esac
  if [ -n "${KEY:-}" ]; then
    intable=1
    [ "$KEY" != 1 ] && { tsec=${KEY%%|*}; tlab=${KEY#*|}; }
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tsec" "$tlab" "$ours" "$unit" "$ref" "$ratio" "$goal" "$met" "$intable" >>"$TSV"
}
# initrows OURS CRING GOFLOOR GOALTEXT [CPROTO]: the init row against the C ring, and beside it
# the C ring's exchange in Go (boot_gofloor: no goroutines, no net package, no authentication),
# the floor under any Go bootstrap. The goal "<= 3 x the C ring" is retired (that floor alone
# costs 1.5-3.9 x; upstream 0.1's own bootstrap takes 3.2-100 x ours): the rows are diagnostics,
# GOALTEXT is ignored. With CPROTO (one host), the library's init protocol written in C
# (boot_tcp proto: challenge, registration, table, node segment, ready, last word).
# INITKEY="ROW" before the call: the first row goes in PERFORMANCE.md's table under that name
# (its Go floor stays out: the page says what it shows, and stays under 300 lines).
INITKEY=
initrows() {
  local k1="" k2=""
  [ -n "$INITKEY" ] && k1="Init (mscclppCommInitRank, release -> last rank ready)|$INITKEY"
  INITKEY=
  KEY=$k1 row "init (release -> last rank ready)" t "$1" "$2" "(diagnostic)" ""
  KEY=$k2 row "  proof: the C ring's exchange in Go" t "$3" "$2" "(the Go floor)" ""
  row "  init vs that Go floor" t "$1" "$3" "(diagnostic)" ""
  [ $# -ge 5 ] && row "  the library's protocol in C vs the C ring" t "$5" "$2" "(diagnostic)" ""
  return 0
}
# runs KEY [KEYB [median]]: the spread over the bench's runs of KEY's values, or with KEYB of the
# ratio of KEY's i-th value to KEYB's (the runs paired in the order they ran): "median M, range
# LO-HI over K runs"; with "median", only M (a row's ratio: the median of the runs)
runs() {
  awk -v a="$1" -v b="${2:-}" '$1==a{x[++na]=$2} b!="" && $1==b{y[++nb]=$2}
    END{ for (i = 1; i <= na; i++) if (b == "") print x[i]; else if (i <= nb && y[i] > 0) print x[i] / y[i] }' "$RES" |
    sort -g | awk -v m="${3:-}" '{ v[NR] = $1 } END{
      if (!NR) { if (m == "") print "n/a"; exit }
      if (m != "") printf "%.6g", v[int((NR + 1) / 2)]
      else printf "median %.2f, range %.2f-%.2f over %d runs", v[int((NR + 1) / 2)], v[1], v[NR], NR }'
}
# spread WHAT KEY [KEYB]: a line under a row, the spread of its ratio over the runs (runs)
spread() { printf "   %-41s %s\n" "($1 per run:" "$(runs "$2" "${3:-}"))"; }
# irow LABEL KIND KEY KEYB GOAL CHECK [WHAT]: a row of two figures timed interleaved in the same
# runs (KEY ours, KEYB its reference): its ratio is the median of the runs' own ratios, each
# run's pair having seen the same machine, and their spread follows it (WHAT names the ratio
# there: "ours / reference" unless given)
irow() {
  row "$1" "$2" "$(get "$3")" "$(get "$4")" "$5" "$6" "$(runs "$3" "$4" median)"
  spread "${7:-ours / reference}" "$3" "$4"
}
# hdr TITLE: a table's header line; TITLE (after PART, the bench section) names the rows' section in the results file
SECTION=
PART=
hdr() {
  SECTION="$PART: $1"
  printf "%-44s %12s %12s %7s  %-22s %s\n" "$1" ours reference ratio goal "met?"
}

if want boot; then
echo
PART=bootstrap
echo "== 1. Bootstrap: ours vs plain TCP (boot_tcp.c: ring; diagnostic rows: its star), medians; ratio = ours / reference"
for n in $NS; do
  echo
  hdr "N = $n local processes"
  INITKEY="N = $n local ranks, vs a C TCP ring"
  initrows "$(get ours.$n.init_ns)" "$(get tcp.$n.init_ns)" "$(get gofloor.$n.init_ns)" "<= 3 x C" "$(get cproto.$n.init_ns)"
  row "init, Go runtime start included" t "$(get cold.$n.init_ns)" "$(get tcp.$n.init_ns)" "" ""
  row "init, MSCCLPP_DEVICE=host" t "$(get hostmode.$n.init_ns)" "$(get tcp.$n.init_ns)" "(diagnostic)" ""
  g=""; c=""
  [ "$n" = 2 ] && { g="<= 10 us"; c="abs 10e3"; }
  [ "$n" = 16 ] && { g="<= 1 ms"; c="abs 1e6"; }
  row "mscclppBootstrapAllGather 4 B/rank" t "$(get ours.$n.ag4.median_ns)" "$(get tcp.$n.ag4.median_ns)" "$g" "$c"
  row "  the same vs a C star" t "$(get ours.$n.ag4.median_ns)" "$(get star.$n.ag4.median_ns)" "(diagnostic)" ""
  k=""
  [ "$n" = 16 ] && k="Bootstrap collectives|mscclppBootstrapAllGather 1 MiB/rank, N = 16, vs a C TCP ring"
  KEY=$k row "mscclppBootstrapAllGather 1 MiB/rank" t "$(get ours.$n.ag1m.median_ns)" "$(get tcp.$n.ag1m.median_ns)" "<= 1 x C ring" "le 1"
  row "mscclppBootstrapBarrier" t "$(get ours.$n.barrier.median_ns)" "$(get tcp.$n.barrier.median_ns)" "" ""
  row "  the same vs a C star" t "$(get ours.$n.barrier.median_ns)" "$(get star.$n.barrier.median_ns)" "(diagnostic)" ""
done

fi

if want host; then
echo
PART="host data path"
echo "== 2. Host data path (SHM transport, host mode), medians; ratio = ours / reference"
echo "   Each figure and its references run interleaved, block by block, in the same 2 processes"
echo "   pinned to CPUs 0 and 1 ($( [ $MPI = 1 ] && echo 'mpirun --bind-to core' || echo 'launch -p')); one way = RTT / 2; bandwidth = size / RTT"
echo
hdr "8 B putWithSignal -> wait, one way"
# proof rows: the raw protocol itself against the reference of a goal it may not reach here
ratio_of() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.2f", a/b }'; }
PROOF_A=$(ratio_of "$(get h.hostalloc.8.memcpy.oneway_ns)" "$(get h.hostalloc.8.line.oneway_ns)")
KEY="8-byte one-way latency (putWithSignal -> wait)|SHM, HostAlloc, vs (a) one cache line's ping-pong" row "HostAlloc vs (a) cache-line ping-pong" t "$(get h.hostalloc.8.ours.oneway_ns)" "$(get h.hostalloc.8.line.oneway_ns)" "<= 1.25 x (a)" "limle 1.25 $PROOF_A"
KEY="8-byte one-way latency (putWithSignal -> wait)|  proof: raw (b) memcpy + epoch vs (a)" row "  proof: raw (b) memcpy + epoch vs (a)" t "$(get h.hostalloc.8.memcpy.oneway_ns)" "$(get h.hostalloc.8.line.oneway_ns)" "(2 lines move, not 1)" ""
KEY="8-byte one-way latency (putWithSignal -> wait)|SHM, HostAlloc, vs Open MPI RMA on a shared window" row "HostAlloc vs (d) MPI RMA, shared window" t "$(get h.hostalloc.8.ours.oneway_ns)" "$(get h.hostalloc.8.rma.oneway_ns)" "<= 1 x MPI RMA" "le 1"
# the goal is (e): (b)'s protocol behind two checked library calls, which no library can go below;
# (b), the bare protocol inlined in the program, is a diagnostic
KEY="8-byte one-way latency (putWithSignal -> wait)|SHM, HostAlloc, vs (e) (b) behind checked library calls" irow "HostAlloc vs (e) (b) behind checked calls" t h.hostalloc.8.ours.oneway_ns h.hostalloc.8.checked.oneway_ns "<= 1 x (e)" "le 1" "ours / (e)"
KEY="8-byte one-way latency (putWithSignal -> wait)|SHM, HostAlloc, vs (b) raw memcpy + epoch store" row "  HostAlloc vs (b) memcpy + epoch" t "$(get h.hostalloc.8.ours.oneway_ns)" "$(get h.hostalloc.8.memcpy.oneway_ns)" "(diagnostic)" ""
row "  (e) vs (b)" t "$(get h.hostalloc.8.checked.oneway_ns)" "$(get h.hostalloc.8.memcpy.oneway_ns)" "(diagnostic)" ""
row "  (f) a one-line ring vs (b)" t "$(get h.hostalloc.8.ring.oneway_ns)" "$(get h.hostalloc.8.memcpy.oneway_ns)" "(diagnostic)" ""
KEY="8-byte one-way latency (putWithSignal -> wait)|SHM, malloc, vs (c) raw process_vm_writev + epoch" row "malloc vs (c) process_vm_writev + epoch" t "$(get h.malloc.8.ours.oneway_ns)" "$(get h.malloc.8.vmwrite.oneway_ns)" "<= 1.5 x (c)" "le 1.5"
KEY="8-byte one-way latency (putWithSignal -> wait)|SHM, malloc, vs Open MPI Send/Recv" row "malloc vs (d) MPI_Send/MPI_Recv" t "$(get h.malloc.8.ours.oneway_ns)" "$(get h.malloc.8.sendrecv.oneway_ns)" "<= 1.5 x MPI Send/Recv" "le 1.5"
row "malloc, MSCCLPP_WAIT_SPIN=4000, vs (c)" t "$(get diag.malloc.8.ours.oneway_ns)" "$(get diag.malloc.8.vmwrite.oneway_ns)" "(diagnostic)" ""
echo
hdr "putWithSignal bandwidth"
irow "HostAlloc 1 MiB vs (b) memcpy" b h.hostalloc.1m.ours.gbps h.hostalloc.1m.memcpy.gbps ">= 0.9 x (b)" "ge 0.9"
KEY="Bandwidth (putWithSignal)|SHM, HostAlloc, 16 MiB, vs (b) raw memcpy" irow "HostAlloc 16 MiB vs (b) memcpy" b h.hostalloc.16m.ours.gbps h.hostalloc.16m.memcpy.gbps ">= 1 x (b)" "ge 1"
irow "HostAlloc 256 MiB vs (b) memcpy" b h.hostalloc.256m.ours.gbps h.hostalloc.256m.memcpy.gbps ">= 0.9 x (b)" "ge 0.9"
row "HostAlloc 16 MiB, no sleep phase, vs (b)" b "$(get diag.hostalloc.16m.ours.gbps)" "$(get diag.hostalloc.16m.memcpy.gbps)" "(diagnostic)" ""
row "HostAlloc 16 MiB vs (d) MPI RMA" b "$(get h.hostalloc.16m.ours.gbps)" "$(get h.hostalloc.16m.rma.gbps)" "" ""
row "malloc 1 MiB vs (c) process_vm_writev" b "$(get h.malloc.1m.ours.gbps)" "$(get h.malloc.1m.vmwrite.gbps)" "" ""
KEY="Bandwidth (putWithSignal)|SHM, malloc, 16 MiB, vs (c) raw process_vm_writev" irow "malloc 16 MiB vs (c) process_vm_writev" b h.malloc.16m.ours.gbps h.malloc.16m.vmwrite.gbps ">= 0.9 x (c)" "ge 0.9"
irow "malloc 256 MiB vs (c) process_vm_writev" b h.malloc.256m.ours.gbps h.malloc.256m.vmwrite.gbps ">= 0.9 x (c)" "ge 0.9"
PROOF_M=$(ratio_of "$(get h.malloc.16m.vmwrite.gbps)" "$(get h.malloc.16m.sendrecv.gbps)")
KEY="Bandwidth (putWithSignal)|SHM, malloc, 16 MiB, vs Open MPI Send/Recv" row "malloc 16 MiB vs (d) MPI_Send/MPI_Recv" b "$(get h.malloc.16m.ours.gbps)" "$(get h.malloc.16m.sendrecv.gbps)" ">= 1 x MPI Send/Recv" "limge 1 $PROOF_M"
row "  proof: raw (c) process_vm_writev vs (d)" b "$(get h.malloc.16m.vmwrite.gbps)" "$(get h.malloc.16m.sendrecv.gbps)" "(one write per put)" ""
echo
hdr "8 B allgather round, 4 ranks on $(nproc) CPUs"
KEY="Collectives|8 B allgather round, 4 ranks, vs MPI_Allgather" row "putWithSignal x3 + wait x3 vs MPI_Allgather" t "$(get h4.ag.ours.round_ns)" "$(get h4.ag.mpi.round_ns)" "<= 3 x MPI_Allgather" "le 3"

echo
echo "== the reference programs alone (separate processes, one run each; not used for the ratios)"
printf "  (a) host_ref line: cache-line ping-pong one way   %s\n" "$(ftime "$(get s.line.oneway_ns)")"
printf "  (b) host_ref memcpy: 8 B one way %s;  1 MiB %s;  16 MiB %s;  256 MiB %s\n" "$(ftime "$(get s.memcpy.8.oneway_ns)")" "$(fbw "$(get s.memcpy.1m.gbps)")" "$(fbw "$(get s.memcpy.16m.gbps)")" "$(fbw "$(get s.memcpy.256m.gbps)")"
printf "  (c) host_ref vmwrite: 8 B one way %s;  1 MiB %s;  16 MiB %s;  256 MiB %s\n" "$(ftime "$(get s.vmwrite.8.oneway_ns)")" "$(fbw "$(get s.vmwrite.1m.gbps)")" "$(fbw "$(get s.vmwrite.16m.gbps)")" "$(fbw "$(get s.vmwrite.256m.gbps)")"
printf "      one bare 8-byte process_vm_writev call %s\n" "$(ftime "$(get s.vmcall8.ns)")"
printf "  (d) mpi_ref: Send/Recv 8 B one way %s, 16 MiB %s;  RMA 8 B one way %s, 16 MiB %s;  MPI_Allgather 8 B, N=4: %s\n" "$(ftime "$(get s.sendrecv.8.oneway_ns)")" "$(fbw "$(get s.sendrecv.16m.gbps)")" "$(ftime "$(get s.rma.8.oneway_ns)")" "$(fbw "$(get s.rma.16m.gbps)")" "$(ftime "$(get s4.ag.round_ns)")"
fi

if want eth; then
  echo
  PART=Ethernet
  echo "== 2b. Ethernet transport (TCP between 2 processes of this machine, loopback), medians; ratio = ours / reference"
  echo "   ours: putWithSignal + a signal back; reference: the same bytes on a plain TCP socket + one byte back, interleaved"
  echo
  hdr "putWithSignal bandwidth over mscclppTransportEthernet"
  echo "   ratio: per run the median over interleaved blocks of ours/TCP, then the median over runs (range over runs below)"
  for sz in 65536:"64 KiB" 262144:"256 KiB" 1048576:"1 MiB" 16777216:"16 MiB" 268435456:"256 MiB"; do
    b=${sz%%:*}
    k=""
    case $b in 1048576 | 16777216) k="Bandwidth (putWithSignal)|Ethernet (loopback), ${sz#*:}, vs a raw TCP stream" ;; esac
    KEY=$k row "${sz#*:} vs a raw TCP stream" b "$(get e.eth.$b.ours.gbps)" "$(get e.eth.$b.tcp.gbps)" ">= 0.95 x raw TCP" "ge 0.95" "$(get e.eth.$b.ratio)"
    row "  the same vs TCP whose reader spins first" b "$(get e.eth.$b.ours.gbps)" "$(get e.eth.$b.tcpspin.gbps)" "(diagnostic)" "" "$(get e.eth.$b.spinratio)"
  done
  echo "   (a reader that spins first: a non-blocking recv for as long as a reading wait of ours spins before it"
  echo "    blocks, 25 ns per pause of MSCCLPP_WAIT_SPIN; like for like with ours, whose waits spin first)"
  printf "   ratio range over the %s runs:" "$REPS"
  for b in 65536 262144 1048576 16777216 268435456; do
    printf "  %s" "$(awk -v k="e.eth.$b.ratio" '$1==k{v=$2+0; if(n==0||v<lo)lo=v; if(n==0||v>hi)hi=v; n++} END{if(n) printf "%.2f-%.2f", lo, hi; else printf "n/a"}' "$RES")"
  done
  echo "  (64 KiB .. 256 MiB)"
fi

# ucxpath MODE [am]: the path UCX's endpoint took in the MODE runs, from ucp_ep_print_info's lanes
# (INFO ucx.MODE.lanes): the transport of each lane that carries puts and the put protocols by
# size, or, with no put lane, the active-message lane RMA is emulated over (with "am": that lane).
# A lane's protocols "0..<short>..4294967296..<bcopy>..(inf)" read "short up to 4 GiB, then bcopy".
ucxpath() {
  info "u.ucx.$1.lanes" | awk -F' ;' -v want="${2:-}" '
    function bytes(v) {
      if (v >= 1073741824 && v % 1073741824 == 0) return (v / 1073741824) " GiB"
      if (v >= 1048576 && v % 1048576 == 0) return (v / 1048576) " MiB"
      if (v >= 1024 && v % 1024 == 0) return (v / 1024) " KiB"
      return v " B"
    }
    function protos(p,   a, k, j, s, t) {
      k = split(p, a, /\.\./)
      s = ""
      for (j = 2; j <= k; j += 2) {
        t = a[j]; gsub(/[<>]/, "", t)
        s = s (s == "" ? "" : ", then ") t
        if (j + 1 <= k && a[j + 1] ~ /^[0-9]+$/) s = s " up to " bytes(a[j + 1])
      }
      return s
    }
    {
    for (i = 1; i <= NF; i++) {
      f = $i; sub(/^ +/, "", f)
      if (f ~ /^lane\[/) { n = f; sub(/^lane\[/, "", n); sub(/\].*/, "", n); split(f, w, " "); tl[n] = w[2]; sub(/^[0-9]+:/, "", tl[n]); if (f ~ / am /) am = tl[n] }
      if (f ~ /^put\[/) { n = f; sub(/^put\[/, "", n); sub(/\].*/, "", n); p = f; sub(/^put\[[0-9]+\]: */, "", p); puts = puts (puts ? "; " : "") tl[n] " (" protos(p) ")" }
    }
    if (want == "am") print am; else if (puts) print "puts on " puts; else if (am) print "no put lane: RMA emulated over active messages on " am; else print "n/a"
  }'
}
# ucxwhy MODE WAY: what UCX does in that row, in a few words
ucxwhy() {
  local p
  p=$(ucxpath "$1")
  case $1.$2 in
  shm.ucxmalloc) # malloc memory is no mapping of its sm transports: lane tables without cma emulate
    case $(info "u.ucx.shm.lanes") in *cma/*) echo "its cma lane (process_vm_writev)" ;;
    *) echo "RMA emulated over active messages on $(ucxpath shm am)" ;; esac ;;
  shm.ucx) case $p in *short*) echo "a short put on ${p#puts on }" | sed 's/ (.*//; s/$/: stores into the peer region it maps/' ;; *) echo "$p" ;; esac ;;
  *) case $p in no\ put*) echo "RMA emulated over active messages (tcp)" ;; *) echo "$p" ;; esac ;;
  esac
}
# urow LABEL t|b MODE SIZE OURS UCXWAY: ours against UCX, goal <= 1 x UCX (one way) or >= 1 x UCX
# (bandwidth); where UCX wins, a diagnostic row under it says how UCX moved the bytes. The malloc
# bandwidth rows are at a measured limit where the raw one-copy protocol (ucx_ref.c's cma: one
# process_vm_writev on the sender's CPU, the same buffers) does not reach UCX either; their proof
# rows show it, and ours against it.
urow() {
  local label=$1 kind=$2 mode=$3 sz=$4 ow=$5 uw=$6 unit=gbps o u pr raw proof="" check
  [ "$kind" = t ] && unit=oneway_ns
  o=$(get "u.ucx.$mode.$sz.$ow.$unit")
  u=$(get "u.ucx.$mode.$sz.$uw.$unit")
  # ours and UCX run interleaved in the same processes: the row's ratio is the median of the runs'
  pr=$(runs "u.ucx.$mode.$sz.$ow.$unit" "u.ucx.$mode.$sz.$uw.$unit" median)
  [ "$ow" = oursmalloc ] && [ "$kind" = b ] && raw=$(get "u.ucx.$mode.$sz.cma.$unit") && [ -n "$raw" ] && [ -n "$u" ] &&
    proof=$(runs "u.ucx.$mode.$sz.cma.$unit" "u.ucx.$mode.$sz.$uw.$unit" median | awk '{ printf "%.2f", $1 }')
  # in PERFORMANCE.md's table: a section naming UCX's version, the 8-byte and 16 MiB rows and
  # their why-rows (the page stays under 300 lines; the other sizes are in bench's output)
  local sec=$UCXSEC
  case $sz in 8 | 16m) ;; *) sec="" ;; esac
  if [ "$kind" = t ]; then
    KEY=${sec:+"$sec|$label"} row "$label" t "$o" "$u" "<= 1 x UCX" "le 1" "$pr"
  else
    check="ge 1"
    [ -n "$proof" ] && check="limge 1 $proof"
    KEY=${sec:+"$sec|$label"} row "$label" b "$o" "$u" ">= 1 x UCX" "$check" "$pr"
  fi
  # UCX wins where the row's goal is missed (the ratio as the row rounds it)
  if [ -n "$pr" ] && awk -v k="$kind" -v p="$pr" 'BEGIN{ r = sprintf("%.2f", p) + 0; exit !((k=="t" && r>1) || (k=="b" && r<1)) }'; then
    KEY=${sec:+"$sec|  UCX wins: $(ucxwhy "$mode" "$uw")"} row "  UCX wins: $(ucxwhy "$mode" "$uw")" "$kind" "$o" "$u" "(diagnostic)" "" "$pr"
    # per run: a loaded machine makes ours bimodal where its waits sleep (UCX's never do)
    spread "ours / UCX" "u.ucx.$mode.$sz.$ow.$unit" "u.ucx.$mode.$sz.$uw.$unit"
    # from 16 MiB: the put call alone, timed in the same run (the copy without the round trip):
    # whether the gap is the copy's or the protocol's (bench output only, not the docs' table)
    local oc uc
    oc=$(get "u.ucx.$mode.$sz.$ow.copy_gbps") uc=$(get "u.ucx.$mode.$sz.$uw.copy_gbps")
    if [ -n "$oc" ] && [ -n "$uc" ]; then
      row "  the put call alone (the copy, no round trip)" b "$oc" "$uc" "(diagnostic)" ""
    fi
  fi
  # where UCX wins a malloc row: the raw one-copy protocol against UCX, and ours against it
  if [ -n "$proof" ] && [ -n "$pr" ] && awk -v p="$pr" 'BEGIN{ exit !(sprintf("%.2f", p) + 0 < 1) }'; then
    KEY=${sec:+"$sec|  proof: raw process_vm_writev, same buffers, vs UCX"} \
      row "  proof: raw process_vm_writev, same buffers, vs UCX" b "$raw" "$u" "(one copy, one CPU)" "" "$proof"
    row "  ours vs that raw copy" b "$o" "$raw" ">= 0.9 x raw" "ge 0.9" \
      "$(runs "u.ucx.$mode.$sz.$ow.$unit" "u.ucx.$mode.$sz.cma.$unit" median)"
  fi
}
if want ucx; then
  PART=UCX
  echo
  echo "== 2d. UCX $(info u.ucx.version) (UCP one-sided puts), medians; ratio = ours / UCX"
  echo "   2 processes on CPUs 0 and 1 (launch -p), UCX and ours interleaved block by block in them (ucx_ref.c);"
  echo "   UCX: ucp_put_nbx(data) + ucp_worker_fence + ucp_put_nbx(8-byte flag), completed locally; the receiver"
  echo "   progresses its worker until the flag arrives (putWithSignal -> wait); one way = RTT / 2, bandwidth = size / RTT;"
  echo "   raw: one process_vm_writev of ours' malloc bytes + one of a count the receiver polls (the one-copy protocol)"
  # the table's section names UCX's version, and its note the transports UCX chose
  UCXSEC="UCX $(info u.ucx.version) one-sided puts (UCX_TLS=sm,self / tcp), ours vs UCX"
  if [ $UCX = 0 ]; then
    echo "  n/a: no UCX (libucx-dev) and it could not be installed"
    printf '#note\t%s\t%s\n' "$UCXSEC" "n/a: no UCX (libucx-dev) and it could not be installed" >>"$TSV"
  else
    echo "   shared memory, UCX_TLS=sm,self: $(ucxpath shm)"
    echo "   TCP, UCX_TLS=tcp: $(ucxpath tcp)"
    printf '#note\t%s\t%s\n' "$UCXSEC" "UCX $(info u.ucx.version) chose: shared memory (UCX_TLS=sm,self): $(ucxpath shm); TCP (UCX_TLS=tcp): $(ucxpath tcp)" >>"$TSV"
  fi
  echo
  hdr "8 B put + signal -> wait, one way"
  urow "shm: HostAlloc vs UCX (its own memory)" t shm 8 ours ucx
  urow "shm: malloc vs UCX (registered malloc)" t shm 8 oursmalloc ucxmalloc
  urow "Ethernet vs UCX over TCP" t tcp 8 ours ucx
  echo
  hdr "bandwidth, the signal ending each message"
  for sz in 64k:"64 KiB" 1m:"1 MiB" 16m:"16 MiB" 256m:"256 MiB"; do
    s=${sz%%:*} l=${sz#*:}
    urow "shm $l: HostAlloc vs UCX" b shm "$s" ours ucx
    urow "shm $l: malloc vs UCX (registered malloc)" b shm "$s" oursmalloc ucxmalloc
    urow "$l: Ethernet vs UCX over TCP" b tcp "$s" ours ucx
  done
fi

if want proxy; then
  echo
  PART=proxy
  echo "== 2c. Proxy path (host mode: the FIFO and proxy code CUDA mode runs, minus driver calls), medians; ratio = ours / reference"
  echo "   trigger rows: one process, the producer on CPU 0, the proxies and the raw ring's consumer on CPU 1, interleaved"
  echo "   block by block; raw ring: 128 slots of 16 B, a polling consumer thread, nothing else (proxy_ref.h);"
  echo "   ratio: per run ours / raw ring of the run's medians, then the median over runs; round trips timed"
  echo "   8 at a time (one clock read is a third of a round trip here); the proxy alone: the same trigger"
  echo "   pushed and waited for through the FIFO's fields, as device code does (mscclppfifo.h's protocol)"
  echo
  hdr "trigger FIFO, Sync triggers of size 1"
  KEY="Proxy (host mode)|trigger push -> served, vs a raw SPSC ring" row "round trip: push -> served, vs the raw ring" t "$(get p.rt.ours.ns)" "$(get p.rt.raw.ns)" "<= 1.3 x raw ring" "le 1.3" "$(get p.rt.ratio)"
  spread "ours / raw ring" p.rt.ratio
  row "  the proxy alone: no library call (as a kernel)" t "$(get p.rt.direct.ns)" "$(get p.rt.raw.ns)" "(diagnostic)" "" "$(get p.rt.direct.ratio)"
  KEY="Proxy (host mode)|triggers served per second, vs a raw SPSC ring" row "triggers served per second, 1 connection" r "$(get p.tput.1.per_s)" "$(get p.tput.raw.per_s)" ">= 0.8 x raw ring" "limge 0.8 $(get p.tput.proto.ratio)" "$(get p.tput.1.ratio)"
  KEY="Proxy (host mode)|  proof: the FIFO protocol on the raw ring" row "  proof: the FIFO protocol on the raw ring" r "$(get p.tput.proto.per_s)" "$(get p.tput.raw.per_s)" "(the floor)" "" "$(get p.tput.proto.ratio)"
  row "  1 connection vs that protocol" r "$(get p.tput.1.per_s)" "$(get p.tput.proto.per_s)" ">= 0.8 x protocol" "ge 0.8" "$(get p.tput.1.vsproto)"
  spread "ours / protocol" p.tput.1.vsproto
  row "  2 connections, one proxy" r "$(get p.tput.2.per_s)" "$(get p.tput.raw.per_s)" "(report)" "" "$(get p.tput.2.ratio)"
  row "  4 connections, one proxy" r "$(get p.tput.4.per_s)" "$(get p.tput.raw.per_s)" "(report)" "" "$(get p.tput.4.ratio)"
  row "  2 proxies (SHM + Ethernet), both on CPU 1" r "$(get p.tput.2proxy.per_s)" "$(get p.tput.raw.per_s)" "(report)" "" "$(get p.tput.2proxy.ratio)"
  row "  2 proxies, one on each CPU" r "$(get p.tput.2proxy2cpu.per_s)" "$(get p.tput.raw.per_s)" "(report)" "" "$(get p.tput.2proxy2cpu.ratio)"
  row "  1-byte Data triggers, 1 connection" r "$(get p.tput.data.per_s)" "$(get p.tput.raw.per_s)" "(diagnostic)" "" "$(get p.tput.data.ratio)"
  row "round trip of the FIFO protocol, vs the raw ring" t "$(get p.rt.proto.ns)" "$(get p.rt.raw.ns)" "(diagnostic)" "" "$(get p.rt.proto.ratio)"
  row "a push alone, FIFO with room, vs the protocol's" t "$(get p.push.ours.ns)" "$(get p.push.proto.ns)" "(diagnostic)" ""
  echo
  hdr "idle proxy (back-off: see below)"
  row "CPU time per second, SHM proxy" t "$(get p.idle.shm.cpu_ns_per_s)" "" "(report)" ""
  row "CPU time per second, Ethernet proxy" t "$(get p.idle.eth.cpu_ns_per_s)" "" "(report)" ""
  for ms in 1 10 100; do
    row "push -> served after $ms ms idle, vs busy" t "$(get p.wake.$ms.ns)" "$(get p.rt.ours.ns)" "(report)" ""
  done
  echo "   an idle host-mode proxy: ${MSCCLPP_PROXY_SPIN:-1000} pauses (MSCCLPP_PROXY_SPIN), then ${MSCCLPP_PROXY_YIELD:-100}" \
    "sched_yield (MSCCLPP_PROXY_YIELD), then asleep on a futex a push wakes, looking again every" \
    "${MSCCLPP_PROXY_SLEEP_MAX_US:-10000} us (MSCCLPP_PROXY_SLEEP_MAX_US); no spin or yield where a rank has one CPU"
  echo
  echo "   putWithSignal: 2 processes, rank r and its proxy on CPU r (launch -p); one way = RTT / 2, bandwidth = size / RTT;"
  echo "   proxy: epochIncrement + mscclppFifoPush(Data|Flag), both directions; host: putWithSignal on the calling thread;"
  echo "   raw: a raw ring served by a thread of the rank (memcpy + signal store, a futex doorbell when idle: proxy_ref.h)"
  echo
  hdr "putWithSignal -> wait through the proxy"
  r8=$(awk -v a="$(get pp.pair.8.raw.oneway_ns)" -v b="$(get pp.pair.8.host.oneway_ns)" 'BEGIN{ if (a>0 && b>0) printf "%.4g", a/b }')
  r64=$(awk -v a="$(get pp.pair.64k.raw.gbps)" -v b="$(get pp.pair.64k.host.gbps)" 'BEGIN{ if (a>0 && b>0) printf "%.4g", a/b }')
  r1m=$(awk -v a="$(get pp.pair.1m.raw.gbps)" -v b="$(get pp.pair.1m.host.gbps)" 'BEGIN{ if (a>0 && b>0) printf "%.4g", a/b }')
  KEY="8-byte one-way latency (putWithSignal -> wait)|SHM through the proxy thread, vs the host path" row "8 B one way vs the host path" t "$(get pp.pair.8.proxy.oneway_ns)" "$(get pp.pair.8.host.oneway_ns)" "<= 1.3 x host" "limle 1.3 $r8"
  row "  proof: the raw proxy vs the host path" t "$(get pp.pair.8.raw.oneway_ns)" "$(get pp.pair.8.host.oneway_ns)" "(the floor)" ""
  row "  8 B one way vs the raw proxy" t "$(get pp.pair.8.proxy.oneway_ns)" "$(get pp.pair.8.raw.oneway_ns)" "<= 1.3 x raw proxy" "le 1.3"
  row "64 KiB bandwidth vs the host path" b "$(get pp.pair.64k.proxy.gbps)" "$(get pp.pair.64k.host.gbps)" ">= 0.95 x host" "limge 0.95 $r64"
  row "  proof: the raw proxy vs the host path" b "$(get pp.pair.64k.raw.gbps)" "$(get pp.pair.64k.host.gbps)" "(the floor)" ""
  row "  64 KiB vs the raw proxy" b "$(get pp.pair.64k.proxy.gbps)" "$(get pp.pair.64k.raw.gbps)" ">= 0.9 x raw proxy" "ge 0.9"
  row "1 MiB bandwidth vs the host path" b "$(get pp.pair.1m.proxy.gbps)" "$(get pp.pair.1m.host.gbps)" ">= 0.95 x host" "limge 0.95 $r1m"
  row "  proof: the raw proxy vs the host path" b "$(get pp.pair.1m.raw.gbps)" "$(get pp.pair.1m.host.gbps)" "(the floor)" ""
  irow "  1 MiB vs the raw proxy" b pp.pair.1m.proxy.gbps pp.pair.1m.raw.gbps ">= 0.9 x raw proxy" "ge 0.9" "ours / raw proxy"
  echo "   (on $(nproc) CPUs each rank's proxy shares its rank's CPU: every trigger is a futex wake-up and a switch to the proxy)"
fi

# perlayer ERRSTR LIBREF K: the time each of K tools adds to a call, against the same run's other-library call
perlayer() {
  [ -z "$1" ] || [ -z "$2" ] && return
  awk -v a="$1" -v b="$2" -v k="$3" 'BEGIN{ printf "%.6g", (a - b) / k }'
}
if want tools; then
  echo
  PART="tool dispatch"
  echo "== 3. Tool dispatch (mscclpp_tools.h), ns per call, medians; ratio = ours / reference"
  echo "   plain: a noinline function in the program; other .so: the same table lookup in another shared library"
  echo "   (what mscclppGetErrorString cost before tools); each process runs all of them interleaved, pinned to CPU 0"
  echo
  hdr "mscclppGetErrorString"
  row "no tool vs a plain call" t "$(get t0.tools.errstr_ns)" "$(get t0.tools.plain_ns)" "" ""
  KEY="Tool dispatch (mscclpp_tools.h)|no tool, vs the same lookup in another .so" row "no tool vs the other .so" t "$(get t0.tools.errstr_ns)" "$(get t0.tools.libref_ns)" "<= +1 ns" "dle 1"
  row "1 pass-through tool vs a plain call" t "$(get t1.tools.errstr_ns)" "$(get t1.tools.plain_ns)" "" ""
  row "2 pass-through tools vs a plain call" t "$(get t2.tools.errstr_ns)" "$(get t2.tools.plain_ns)" "" ""
  KEY="Tool dispatch (mscclpp_tools.h)|added per pass-through tool" row "added per tool, 1 tool (vs the other .so)" t "$(perlayer "$(get t1.tools.errstr_ns)" "$(get t1.tools.libref_ns)" 1)" "" "<= 10 ns per tool" "abs 10"
  row "added per tool, 2 tools (vs the other .so)" t "$(perlayer "$(get t2.tools.errstr_ns)" "$(get t2.tools.libref_ns)" 2)" "" "<= 10 ns per tool" "abs 10"
  row "mscclppGetVersion (enters Go), 0 tools" t "$(get t0.tools.version_ns)" "$(get t0.tools.plain_ns)" "(diagnostic)" ""
  row "mscclppGetVersion (enters Go), 2 tools" t "$(get t2.tools.version_ns)" "$(get t2.tools.plain_ns)" "(diagnostic)" ""
  row "profile tool vs no tool" t "$(get tp.tools.errstr_ns)" "$(get t0.tools.errstr_ns)" "(diagnostic)" ""
  row "trace tool vs no tool" t "$(get tt.tools.errstr_ns)" "$(get t0.tools.errstr_ns)" "(diagnostic)" ""
  row "mscclppGetVersion, profile tool vs no tool" t "$(get tp.tools.version_ns)" "$(get t0.tools.version_ns)" "(diagnostic)" ""
  row "mscclppGetVersion, trace tool vs no tool" t "$(get tt.tools.version_ns)" "$(get t0.tools.version_ns)" "(diagnostic)" ""
  echo "   added per call: profile $(perlayer "$(get tp.tools.errstr_ns)" "$(get t0.tools.errstr_ns)" 1) ns," \
    "trace $(perlayer "$(get tt.tools.errstr_ns)" "$(get t0.tools.errstr_ns)" 1) ns (two clock reads, counters or a record)"
  for k in 0 1 2 p t; do
    l=$(get t$k.tools.layers)
    w=$k
    case $k in p | t) w=1 ;; esac
    [ "$l" = "$w" ] || { echo "bench: the run t$k had ${l:-no} layers, expected $w"; FAILED=$((FAILED + 1)); }
  done
fi

# rankrows PREFIX: what a rank holds and spent (scale.c), rank 0 (the root) beside the others' median
rankrows() {
  local p=$1 f
  for f in init a2a; do
    row "  descriptors after $f: root vs others" n "$(get $p.fds.$f.root_n)" "$(get $p.fds.$f.median_n)" "(report)" ""
    row "  resident memory after $f: root vs others" k "$(get $p.rss.$f.root_kb)" "$(get $p.rss.$f.median_kb)" "(report)" ""
  done
  row "  CPU in init: root vs others" t "$(get $p.cpu.init.root_ns)" "$(get $p.cpu.init.median_ns)" "(report)" ""
  row "  CPU per 4-byte allgather: root vs others" t "$(get $p.cpu.ag4.root_ns)" "$(get $p.cpu.ag4.median_ns)" "(report)" ""
  row "  CPU in the setup: root vs others" t "$(get $p.cpu.a2a.root_ns)" "$(get $p.cpu.a2a.median_ns)" "(report)" ""
  # where the time goes when ranks outnumber CPUs: the ranks' CPU against the phase's wall time x
  # CPUs (the ratio: their share of the machine; the machine's busy share beside it, other load
  # included), and the check's closing barrier's longest wait against the bootstrap timeout
  local ph w
  for ph in a2a:"the setup" chk:"the check"; do
    w=$(get "$p.${ph%%:*}.setup_ns")
    [ "${ph%%:*}" = chk ] && w=$(get "$p.chk.wall_ns")
    row "  all ranks' CPU in ${ph#*:} vs wall x CPUs" t "$(get "$p.${ph%%:*}.cpu_sum_ns")" \
      "$([ -n "$w" ] && awk -v w="$w" -v n="$(nproc)" 'BEGIN{ printf "%.6g", w * n }')" "(diagnostic)" ""
    row "    the machine busy in it, % of its CPUs" n "$(get "$p.${ph%%:*}.busy_pct")" "100" "(diagnostic)" ""
  done
  row "  check's closing barrier: wait vs timeout" t "$(get $p.chk.spread_ns)" "$(get $p.boot_timeout_ns)" "(diagnostic)" ""
}
# growth A B K: (B - A) / K, empty when either is
growth() {
  [ -z "$1" ] || [ -z "$2" ] && return
  awk -v a="$1" -v b="$2" -v k="$3" 'BEGIN{ printf "%.6g", (b - a) / k }'
}
if want scale; then
  echo
  PART=scale
  echo "== 4. Scale: init, 4-byte allgather, all-to-all connection setup (N <= 64: $SREPS reps, medians; above 64"
  echo "   and 8 x 16: one run; section took ${S_SECS} s)"
  echo "   reference: boot_tcp.c (C ring); all-to-all: every rank mscclppConnect's every other (a 64 B slice"
  echo "   each of one HostAlloc buffer) and calls mscclppConnectionSetup once: first rank's start to last rank's"
  echo "   return; then the check: an 8-byte putWithSignal to every peer, a wait for every peer, a barrier;"
  echo "   per rank (root: rank 0, the bootstrap's root and hub, vs the median of the others): descriptors"
  echo "   open and resident memory after init and after the setup, CPU time (user + system) in each phase;"
  echo "   MSCCLPP_BOOTSTRAP_TIMEOUT: 2 s per rank and CPU, at least 30 s (the closing barriers' first rank"
  echo "   waits for the last: with ranks outnumbering CPUs, for about all ranks' CPU time / CPUs)"
  echo "   (ulimit -n: $(ulimit -n); /dev/shm: $(df -h --output=size /dev/shm 2>/dev/null | tail -1 | tr -d ' '))"
  for n in $SCALE_NS; do
    echo
    hdr "N = $n local processes"
    g=""; ga=""; ca=""; gs=""; cs=""
    [ "$n" -ge 32 ] && { g="<= 3 x C ring"; ga="<= 1 x C ring"; ca="le 1"; }
    [ "$n" = 64 ] && { gs="< 1 s"; cs="abs 1e9"; }
    # (N in section 1's sizes: its init row, with more samples, is the table's)
    in_boot "$n" || INITKEY="N = $n local ranks, vs a C TCP ring"
    initrows "$(get sc.$n.init_ns)" "$(get "$(sref "$n" tcp).init_ns")" "$(get "$(sref "$n" gf).init_ns")" "$g" "$(get "$(sref "$n" cp).init_ns")"
    row "mscclppBootstrapAllGather 4 B/rank" t "$(get sc.$n.ag4.median_ns)" "$(get "$(sref "$n" tcp).ag4.median_ns")" "$ga" "$ca"
    k=""
    [ "$n" = 64 ] && k="Bootstrap collectives|all-to-all mscclppConnectionSetup, N = 64"
    [ "$n" = 256 ] && k="Bootstrap collectives|all-to-all mscclppConnectionSetup, N = 256"
    KEY=$k row "all-to-all mscclppConnectionSetup" t "$(get sc.$n.a2a.setup_ns)" "" "$gs" "$cs"
    row "  its Connect calls (slowest rank)" t "$(get sc.$n.a2a.connect_ns)" "" "(diagnostic)" ""
    rankrows "sc.$n"
  done
  echo
  hdr "growth per added rank"
  prev=""
  for n in $SCALE_NS; do
    if [ -n "$prev" ]; then
      k=$((n - prev))
      row "init, N $prev -> $n" t "$(growth "$(get sc.$prev.init_ns)" "$(get sc.$n.init_ns)" $k)" "$(growth "$(get "$(sref "$prev" tcp).init_ns")" "$(get "$(sref "$n" tcp).init_ns")" $k)" "" ""
      row "allgather 4 B, N $prev -> $n" t "$(growth "$(get sc.$prev.ag4.median_ns)" "$(get sc.$n.ag4.median_ns)" $k)" "$(growth "$(get "$(sref "$prev" tcp).ag4.median_ns")" "$(get "$(sref "$n" tcp).ag4.median_ns")" $k)" "" ""
      row "all-to-all setup, N $prev -> $n" t "$(growth "$(get sc.$prev.a2a.setup_ns)" "$(get sc.$n.a2a.setup_ns)" $k)" "" "" ""
      for f in init a2a; do
        row "  descriptors after $f, root vs others" n "$(growth "$(get sc.$prev.fds.$f.root_n)" "$(get sc.$n.fds.$f.root_n)" $k)" "$(growth "$(get sc.$prev.fds.$f.median_n)" "$(get sc.$n.fds.$f.median_n)" $k)" "(report)" ""
        row "  resident memory after $f, root vs others" k "$(growth "$(get sc.$prev.rss.$f.root_kb)" "$(get sc.$n.rss.$f.root_kb)" $k)" "$(growth "$(get sc.$prev.rss.$f.median_kb)" "$(get sc.$n.rss.$f.median_kb)" $k)" "(report)" ""
      done
      for f in init ag4 a2a; do
        row "  CPU in $f, root vs others" t "$(growth "$(get sc.$prev.cpu.$f.root_ns)" "$(get sc.$n.cpu.$f.root_ns)" $k)" "$(growth "$(get sc.$prev.cpu.$f.median_ns)" "$(get sc.$n.cpu.$f.median_ns)" $k)" "(report)" ""
      done
    fi
    prev=$n
  done
  printf "  all-to-all setup per connection (N*(N-1) of them):"
  for n in $SCALE_NS; do
    a=$(get sc.$n.a2a.setup_ns)
    printf "  N=%s %s" "$n" "$(ftime "$([ -n "$a" ] && awk -v a="$a" -v n="$n" 'BEGIN{ printf "%.6g", a / (n * (n - 1)) }')")"
  done
  echo
  for c in mn:4:4:16 mn8:8:16:128; do
    IFS=: read -r p nodes per total <<<"$c"
    [ "$p" = mn8 ] && [ "$MN8" != 1 ] && continue
    echo
    hdr "$nodes simulated nodes x $per ranks"
    [ -n "$MN_WHY" ] && echo "  n/a: nodes cannot be simulated here: $MN_WHY"
    echo "  (tests/multinode/cluster.sh: a network namespace, veth and private /dev/shm per node; SHM inside, Ethernet between)"
    INITKEY="$nodes simulated nodes x $per ranks, vs a C TCP ring"
    initrows "$(get $p.init_ns)" "$(get ${p}tcp.init_ns)" "$(get ${p}gf.init_ns)" "<= 3 x C ring"
    if [ "$p" = mn ]; then
      irow "mscclppBootstrapAllGather 4 B/rank" t mn.ag4.median_ns mntcp.ag4.median_ns "<= 1 x C ring" "le 1" "ours / C ring"
      row "all-to-all mscclppConnectionSetup" t "$(get mn.a2a.setup_ns)" "" "< 1 s" "abs 1e9"
    else
      row "mscclppBootstrapAllGather 4 B/rank" t "$(get $p.ag4.median_ns)" "$(get ${p}tcp.ag4.median_ns)" "(report)" ""
      row "all-to-all mscclppConnectionSetup" t "$(get $p.a2a.setup_ns)" "" "(report)" ""
    fi
    row "  its Connect calls (slowest rank)" t "$(get $p.a2a.connect_ns)" "" "(diagnostic)" ""
    row "init vs $total ranks on one node" t "$(get $p.init_ns)" "$(get sc.$total.init_ns)" "(diagnostic)" ""
    row "allgather 4 B vs $total ranks on one node" t "$(get $p.ag4.median_ns)" "$(get sc.$total.ag4.median_ns)" "(diagnostic)" ""
    row "all-to-all setup vs $total ranks on one node" t "$(get $p.a2a.setup_ns)" "$(get sc.$total.a2a.setup_ns)" "(diagnostic)" ""
    rankrows "$p"
  done
fi

if want perf; then
  PART="perf tool"
  echo
  echo "== 5. The perf tool (tools/perf, nccl-tests' all_gather_perf flags): 2 ranks, $((PERF_SIZE >> 20)) MiB gathered,"
  echo "   busbw (GB/s, medians); reference: the raw bandwidth of sections 2 and 2b at 16 MiB, each rank's chunk"
  echo
  hdr "mscclpp_allgather_perf busbw"
  PB="Bus bandwidth (mscclpp_allgather_perf, 2 ranks, 32 MiB, in place)"
  KEY="$PB|SHM (HostAlloc), vs (b) raw memcpy" row "SHM, in place, vs (b) memcpy 16 MiB" b "$(get pf.shm.busbw.inplace)" "$(get h.hostalloc.16m.memcpy.gbps)" "" ""
  row "SHM, out of place, vs (b) memcpy 16 MiB" b "$(get pf.shm.busbw.outofplace)" "$(get h.hostalloc.16m.memcpy.gbps)" "" ""
  KEY="$PB|Ethernet (loopback), vs a raw TCP stream" row "Ethernet, in place, vs raw TCP 16 MiB" b "$(get pf.eth.busbw.inplace)" "$(get e.eth.16777216.tcp.gbps)" "" ""
  row "Ethernet, out of place, vs raw TCP 16 MiB" b "$(get pf.eth.busbw.outofplace)" "$(get e.eth.16777216.tcp.gbps)" "" ""
fi

{ printf '#end\t%s s, load average %s\n' "$(($(date +%s) - T_START))" "$(cut -d' ' -f1-3 /proc/loadavg)"
  printf '#durations\t%s\n' "$DURS"
  printf '#verdict\tgoals met: %s, missed: %s, at a measured limit: %s; runs failed: %s\n' "$MET" "$MISSED" "$LIMITS" "$FAILED"; } >>"$TSV"
echo
echo "goals met: $MET, missed: $MISSED, at a measured limit: $LIMITS; runs failed: $FAILED; load average at end: $(cut -d' ' -f1-3 /proc/loadavg); $(( $(date +%s) - T_START )) s"
echo "sections: $DURS"
echo "raw figures: $RES (every rep), the rows: $TSV, log: $LOG"
[ "$FAILED" = 0 ]
