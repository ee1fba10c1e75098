#!/usr/bin/env bash
# run.sh [--require-gpu] [BUILD_DIR]: the GPU checks of libmscclpp, for a machine with at
# least one NVIDIA GPU, the CUDA driver and nvcc; Go and a network are not needed: BUILD_DIR
# (default build/) may be a build/ made by `make` elsewhere and carried here, at any path.
# Ranks share GPUs round-robin (rank r uses GPU r % ngpus).
#
#   1. builds the library with make when Go is here, BUILD_DIR is the repository's and holds
#      no library yet (a carried build/ is used as it is), then
#      the checks with build.sh (in parallel; -arch=native where nvcc knows it, else SASS for
#      sm_70/80/90 and PTX), flags from BUILD_DIR only (tests/gpu/moved.sh checks that);
#   2. allgather over P2P with 2 and 4 processes, every byte checked, bandwidth per size;
#   3. latency with 2 processes: one-way signal latency (putWithSignal/wait ping-pong) and
#      P2P put bandwidth beside cudaMemcpy device-to-device; p2p-bandwidth-goal: P2P at 0.9x
#      of D2D or more at 256 MiB. When the 2 processes share a GPU, MPS is started for this
#      case (a private pipe directory; stopped after): without MPS two processes time-slice
#      the GPU and the rows are printed as REPORT only, never as a pass or a failure; a
#      failure under MPS stays a failure (the run without it is for information);
#   4. devpaths (256 pushing threads over P2P and Ethernet in CUDA mode, a CUDA graph, an
#      exit without mscclppProxyStop) and hwpaths: two communicators in one process over P2P,
#      a data check after every wait(), 1024 threads writing before one pusher
#      (__syncthreads), a dma-buf export of the library's device blocks (no NIC needed), and
#      mscclppRegisteredBufferWrite from a device buffer a kernel writes on the same stream;
#   5. upstream 0.1's allgather_test_standalone.cu (MSCCLPP_UPSTREAM_DIR, shared/upstream in
#      the repository, or ../shared/upstream or ../../shared/upstream beside it), built from a
#      copy with its one-line device change, 2 ranks; its output searched for its failure
#      line ("oh uh!"), since its exit code does not say.
#
# Prints PASS/FAIL per case with its figures, and last "N passed, M failed"; exits non-zero
# on a failure. Without a GPU or nvcc it prints SKIP and exits 0; with --require-gpu (what a
# device run passes) that is a FAIL. Fits in 10 minutes with the build: each case has a
# timeout (launch -t), cut to what is left of a 420 s budget for the cases.
#
# Environment: MSCCLPP_GPU_MAX_CHUNK (allgather's largest chunk, default 64 MiB),
# MSCCLPP_UPSTREAM_BYTES (upstream's -datasize, default 64 MiB), NVCC_FLAGS, MSCCLPP_DEBUG
# (default WARN), MSCCLPP_UPSTREAM_DIR.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
start=$SECONDS
require=0
if [ "${1:-}" = --require-gpu ]; then
  require=1
  shift
fi

# unusable: no GPU or no nvcc: a SKIP, or with --require-gpu a FAIL
unusable() { # case why
  if [ $require = 1 ]; then
    echo "FAIL $1: $2 (--require-gpu)"
    echo "0 passed, 1 failed"
    exit 1
  fi
  echo "run.sh: SKIP: $2"
  exit 0
}
if ! command -v nvidia-smi >/dev/null 2>&1; then
  unusable gpu "no NVIDIA GPU here (nvidia-smi not found)"
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${gpus:-0}" -eq 0 ]; then
  unusable gpu "no NVIDIA GPU here (nvidia-smi -L lists none: $(nvidia-smi -L 2>&1 | head -1))"
fi
echo "run.sh: $gpus GPU(s):"
nvidia-smi -L | sed 's/^/  /'
nvidia-smi --query-gpu=driver_version,compute_mode --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/  driver, compute mode: /'
mode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -1)
case $mode in
  *Exclusive_Process*|*Prohibited*)
    echo "run.sh: note: compute mode is '$mode': several processes cannot share a GPU without MPS" ;;
esac

build=${1:-build}
case $build in /*) ;; *) [ -d "$build" ] || build=$root/$build ;; esac
# a library already there (a carried build/) is used as it is: no make, which may need the network
if [ ! -e "$build/lib/libmscclpp.so" ] && command -v go >/dev/null 2>&1 &&
  [ "$(cd "$(dirname "$build")" 2>/dev/null && pwd)" = "$root" ]; then
  echo "run.sh: make (library, headers, mscclpp.pc)"
  make -C "$root" all >/dev/null || { echo "FAIL build-library"; echo "0 passed, 1 failed"; exit 1; }
fi
if [ ! -e "$build/lib/libmscclpp.so" ]; then
  echo "run.sh: no library in '$build' and no Go toolchain here to build it: run make elsewhere and bring build/"
  echo "FAIL build-library"
  echo "0 passed, 1 failed"
  exit 1
fi
build=$(cd "$build" && pwd)

nvcc=${NVCC:-$(command -v nvcc 2>/dev/null || true)}
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
[ -z "$nvcc" ] && [ -x /usr/bin/nvcc ] && nvcc=/usr/bin/nvcc
if [ -z "$nvcc" ]; then
  unusable nvcc "a GPU but no nvcc here; cannot build the checks"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-gpu.XXXXXX") || exit 1
mps_pipe=
stop_mps() {
  [ -n "$mps_pipe" ] || return 0
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log nvidia-cuda-mps-control >/dev/null 2>&1
  mps_pipe=
}
trap 'stop_mps; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
if [ -z "${NVCC_FLAGS+x}" ]; then
  printf '__global__ void k(){}\nint main(){return 0;}\n' >"$tmp/a.cu"
  if "$nvcc" -arch=native -o "$tmp/a" "$tmp/a.cu" >/dev/null 2>&1; then export NVCC_FLAGS=-arch=native; fi
fi
export NVCC=$nvcc
upstream=
for d in ${MSCCLPP_UPSTREAM_DIR:-} "$root/shared/upstream" "$root/../shared/upstream" "$root/../../shared/upstream"; do
  [ -f "$d/allgather_test_standalone.cu" ] && { upstream=$d/allgather_test_standalone.cu; break; }
done
out=$build/tests/gpu
echo "run.sh: building the checks into $out (nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') ${NVCC_FLAGS:-default architectures})"
if ! MSCCLPP_UPSTREAM_FILE=$upstream bash "$here/build.sh" "$build" "$out"; then
  echo "FAIL build-checks"
  echo "0 passed, 1 failed"
  exit 1
fi

export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSCCLPP_DEVICE=cuda # fail clearly instead of falling back to host mode
export MSCCLPP_DEBUG=${MSCCLPP_DEBUG:-WARN}
unset MSCCLPP_TEST_RANK MSCCLPP_TEST_NRANKS MSCCLPP_TEST_ADDR MSCCLPP_TEST_DIR CUDA_MPS_PIPE_DIRECTORY
maxChunk=${MSCCLPP_GPU_MAX_CHUNK:-67108864}
passed=0 failed=0
log=$tmp/case.log
figures=$tmp/figures

# run NAME TIMEOUT NRANKS PROG ARGS...: one case; its figure lines are kept, the rest shown on failure
budget=$((SECONDS + 420))
casefail=0
run() {
  local name=$1 timeout=$2 n=$3
  shift 3
  local t0=$SECONDS
  casefail=1
  if [ $((budget - SECONDS)) -lt 10 ]; then
    echo "FAIL $name (not run: the 420 s budget is spent)"
    failed=$((failed + 1))
    return
  fi
  [ "$timeout" -gt $((budget - SECONDS)) ] && timeout=$((budget - SECONDS))
  "$out/launch" -n "$n" -t "$timeout" -- "$@" >"$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && ! grep -qE 'oh uh!|Failure at|Cuda failure' "$log"; then
    grep -E '\] (allgather|latency|bandwidth|pushers|graph|exit|sameproc|everywait|syncthreads|dmabuf|regwrite|Rank [0-9]+ report):' "$log" |
      grep -v ' PASS$' | sed 's/^/  /' | tee -a "$figures"
    echo "PASS $name ($((SECONDS - t0)) s)"
    passed=$((passed + 1))
    casefail=0
  else
    sed 's/^/  /' "$log"
    [ $rc -eq 124 ] && echo "  (timed out after $timeout s)"
    echo "FAIL $name"
    failed=$((failed + 1))
  fi
}

run allgather-2 60 2 "$out/allgather" "$maxChunk"
run allgather-4 75 4 "$out/allgather" "$maxChunk"

# latency and bandwidth: 2 processes; on one GPU they share it, under MPS when it starts
shared=$((gpus < 2))
mps=0
if [ $shared = 1 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  mkdir -p "$tmp/mps-pipe" "$tmp/mps-log"
  if CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log nvidia-cuda-mps-control -d >/dev/null 2>&1; then
    mps_pipe=$tmp/mps-pipe
    mps=1
    echo "run.sh: MPS started for the latency/bandwidth case (2 processes share GPU 0)"
  else
    echo "run.sh: note: nvidia-cuda-mps-control -d failed: no MPS"
  fi
fi
if [ $mps = 1 ]; then
  CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log run latency-2-mps 45 2 "$out/latency"
  stop_mps
  if [ $casefail = 1 ]; then
    # the failure stands: the run without MPS only tells whether MPS was the cause
    echo "run.sh: note: the latency case failed under MPS (above, counted): once more without it, for information"
    mps=0
  fi
fi
[ $mps = 1 ] || run latency-2 45 2 "$out/latency"
ratio=$(sed -n 's/.*bandwidth: *256 MiB:.*(P2P\/D2D \([0-9.]*\);.*/\1/p' "$log" | head -1)
if [ $shared = 1 ] && [ $mps = 0 ]; then
  echo "REPORT p2p-bandwidth-goal (P2P/D2D ${ratio:-not measured} at 256 MiB; 2 processes time-slice one GPU without MPS: not a pass or a failure)"
elif [ -n "$ratio" ] && awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9) }'; then
  echo "PASS p2p-bandwidth-goal (P2P/D2D $ratio at 256 MiB, goal 0.9)"
  passed=$((passed + 1))
else
  echo "FAIL p2p-bandwidth-goal (P2P/D2D ${ratio:-not measured} at 256 MiB, goal 0.9)"
  failed=$((failed + 1))
fi

run pushers-p2p 30 2 "$out/devpaths" pushers p2p
run pushers-eth-cuda 40 2 "$out/devpaths" pushers eth
run graph-p2p 30 2 "$out/devpaths" graph p2p
run exit-without-proxystop 20 2 "$out/devpaths" exit p2p
run sameproc-p2p 30 1 "$out/hwpaths" sameproc
run everywait-p2p 60 2 "$out/hwpaths" everywait
run syncthreads-p2p 60 2 "$out/hwpaths" syncthreads
run dmabuf-probe 30 2 "$out/hwpaths" dmabuf
run regwrite-stream 30 2 "$out/hwpaths" regwrite
if [ -z "$upstream" ]; then
  echo "FAIL upstream-allgather-2 (allgather_test_standalone.cu not found: set MSCCLPP_UPSTREAM_DIR, or bring shared/upstream)"
  failed=$((failed + 1))
else
  # upstream's own argument style; its data check prints "oh uh!" and exits 0 all the same
  # shellcheck disable=SC2016
  run upstream-allgather-2 90 2 sh -c 'exec "$0" -ip_port "$MSCCLPP_TEST_ADDR" -rank "$MSCCLPP_TEST_RANK" \
    -nranks "$MSCCLPP_TEST_NRANKS" -rankspernode "$MSCCLPP_TEST_NRANKS" -datasize "$1"' \
    "$out/upstream_allgather" "${MSCCLPP_UPSTREAM_BYTES:-67108864}"
  if [ $casefail = 0 ] && [ "$(grep -c 'Rank [0-9]* succeeded!' "$log")" -ne 2 ]; then
    echo "  (but not both ranks printed 'Rank N succeeded!')"
    echo "FAIL upstream-allgather-2"
    passed=$((passed - 1))
    failed=$((failed + 1))
  fi
fi

echo "run.sh: figures:"
grep -E 'latency:|bandwidth:|report:' "$figures" 2>/dev/null | sed 's/^ *//'
echo "run.sh: $((SECONDS - start)) s"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
