#!/usr/bin/env bash
# run.sh [BUILD_DIR]: the GPU checks of libmscclpp, for a machine with at
# least one NVIDIA GPU (ranks share GPUs round-robin: rank r uses GPU
# r % ngpus, so on one GPU every process uses it through CUDA IPC).
#
#   1. builds the library with make when Go is here (else uses BUILD_DIR as
#      it is, default build/), then the checks with build.sh;
#   2. allgather over P2P with 2 and then 4 processes: every byte checked,
#      algorithm and bus bandwidth per size;
#   3. latency with 2 processes: signal->wait one-way latency, and P2P put
#      bandwidth beside cudaMemcpy device-to-device bandwidth (same run); the
#      case p2p-bandwidth-goal passes when P2P reaches 0.9x of D2D at 256 MiB;
#   4. devpaths with 2 processes (devpaths.cu): 256 threads (more than the
#      FIFO's 128 slots) each writing and pushing its data in the same kernel
#      with putWithSignal, put+signal, putWithSignalAndFlush and zero-size
#      puts, every byte checked by a waiting kernel, over P2P and over
#      Ethernet in CUDA mode; putWithSignal+wait captured in a CUDA graph and
#      launched 10 times; a process that returns from main without
#      mscclppProxyStop must still exit.
#
# Prints PASS/FAIL per case and last "N passed, M failed"; exits non-zero on
# a failure. Without a GPU (or nvcc) it says so and exits 0. Takes under 5
# minutes, build included: each case has a timeout (launch -t), cut to what
# is left of a 280 s budget for the cases.
#
# Environment: MSCCLPP_GPU_MAX_CHUNK (allgather's largest chunk, default
# 64 MiB), NVCC_FLAGS (default -arch=native where nvcc knows it),
# MSCCLPP_DEBUG (default WARN).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
start=$SECONDS

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "run.sh: SKIP: no NVIDIA GPU here (nvidia-smi not found); nothing to run"
  exit 0
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${gpus:-0}" -eq 0 ]; then
  echo "run.sh: SKIP: no NVIDIA GPU here (nvidia-smi -L lists none: $(nvidia-smi -L 2>&1 | head -1))"
  exit 0
fi
echo "run.sh: $gpus GPU(s):"
nvidia-smi -L | sed 's/^/  /'
mode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -1)
case $mode in
  *Exclusive_Process*|*Prohibited*)
    echo "run.sh: note: compute mode is '$mode': several processes cannot share a GPU; the 4-process run needs 4 GPUs or Default mode" ;;
esac

build=${1:-build}
case $build in /*) ;; *) [ -d "$build" ] || build=$root/$build ;; esac
if command -v go >/dev/null 2>&1 && [ "$(cd "$(dirname "$build")" 2>/dev/null && pwd)" = "$root" ]; then
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
  echo "run.sh: SKIP: a GPU but no nvcc here; cannot build the checks"
  exit 0
fi
if [ -z "${NVCC_FLAGS+x}" ]; then
  probe=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-arch.XXXXXX")
  printf '__global__ void k(){}\nint main(){return 0;}\n' >"$probe/a.cu"
  if "$nvcc" -arch=native -o "$probe/a" "$probe/a.cu" >/dev/null 2>&1; then NVCC_FLAGS=-arch=native; else NVCC_FLAGS=; fi
  rm -rf "$probe"
fi
export NVCC=$nvcc NVCC_FLAGS
out=$build/tests/gpu
echo "run.sh: building the checks into $out (nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') ${NVCC_FLAGS})"
if ! bash "$here/build.sh" "$build" "$out"; then
  echo "FAIL build-checks"
  echo "0 passed, 1 failed"
  exit 1
fi

export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSCCLPP_DEVICE=cuda # fail clearly instead of falling back to host mode
export MSCCLPP_DEBUG=${MSCCLPP_DEBUG:-WARN}
unset MSCCLPP_TEST_RANK MSCCLPP_TEST_NRANKS MSCCLPP_TEST_ADDR MSCCLPP_TEST_DIR
maxChunk=${MSCCLPP_GPU_MAX_CHUNK:-67108864}
passed=0 failed=0
log=$(mktemp "${TMPDIR:-/tmp}/mscclpp-gpu.XXXXXX")
trap 'rm -f "$log"' EXIT

# run NAME TIMEOUT NRANKS PROG ARGS...: one case; its result lines are kept, the rest shown on failure
budget=$((SECONDS + 280))
run() {
  local name=$1 timeout=$2 n=$3
  shift 3
  local t0=$SECONDS
  if [ $((budget - SECONDS)) -lt 10 ]; then
    echo "FAIL $name (not run: the 280 s budget is spent)"
    failed=$((failed + 1))
    return
  fi
  [ "$timeout" -gt $((budget - SECONDS)) ] && timeout=$((budget - SECONDS))
  "$out/launch" -n "$n" -t "$timeout" -- "$@" >"$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    grep -E '\] (allgather|latency|bandwidth|pushers|graph|exit):' "$log" | grep -v ' PASS$' | sed 's/^/  /'
    echo "PASS $name ($((SECONDS - t0)) s)"
    passed=$((passed + 1))
  else
    sed 's/^/  /' "$log"
    [ $rc -eq 124 ] && echo "  (timed out after $timeout s)"
    echo "FAIL $name"
    failed=$((failed + 1))
  fi
}

run allgather-2 60 2 "$out/allgather" "$maxChunk"
run allgather-4 75 4 "$out/allgather" "$maxChunk"
run latency-2 45 2 "$out/latency"
# the goal: P2P puts at 0.9x or more of cudaMemcpy device-to-device (256 MiB, the latency run's line)
ratio=$(sed -n 's/.*bandwidth: *256 MiB:.*(P2P\/D2D \([0-9.]*\);.*/\1/p' "$log" | head -1)
if [ -n "$ratio" ] && awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9) }'; then
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

echo "run.sh: $((SECONDS - start)) s"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
