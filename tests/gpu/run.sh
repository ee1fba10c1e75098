#!/usr/bin/env bash
# run.sh [--require-gpu] [--dry-run] [BUILD_DIR]: the GPU checks of libmscclpp, for a machine
# with at least one NVIDIA GPU, the CUDA driver and nvcc; Go and a network are not needed:
# BUILD_DIR (default build/) may be a build/ made by `make` elsewhere and carried here, at any
# path. Ranks share GPUs round-robin (rank r uses GPU r % ngpus).
#
#   1. a library already in BUILD_DIR (a carried build/) is used as it is; only where there is
#      none, BUILD_DIR is the repository's and Go is here does it run make. The GPUs are
#      counted through CUDA (gpuinfo.cu: cudaGetDeviceCount, so CUDA_VISIBLE_DEVICES and MIG
#      count as the checks see them), each with the attributes the library depends on
#      (GPUDirect RDMA 116, its write ordering 118, dma-buf 124, memory pools 115). Then the
#      checks with build.sh (in parallel; -arch=native where nvcc knows it, else SASS for
#      sm_70/80/90 and PTX), flags from BUILD_DIR only (tests/gpu/moved.sh checks that);
#   2. allgather over P2P with 2 and 4 processes, every byte checked, bandwidth per size;
#   3. latency with 2 processes: one-way signal latency and P2P put bandwidth beside cudaMemcpy
#      D2D; p2p-bandwidth-goal: P2P at 0.9x of D2D or more at 256 MiB. When the 2 processes
#      share a GPU, MPS is started for this case (a private pipe directory; stopped after). A
#      failure under MPS is a failure, and so is the goal: the run without MPS that follows is
#      INFO (whether MPS was the cause), never a pass. Without MPS at all (it does not start)
#      two processes time-slice the GPU: the goal is a SKIP;
#   4. devpaths.cu (256 pushing threads over P2P and Ethernet in CUDA mode, a CUDA graph, an
#      exit without mscclppProxyStop), hwpaths.cu (two communicators of one process on two
#      GPUs, and on one GPU, which the library must refuse; a data check after every wait();
#      1024 threads writing before one pusher; mscclppRegisteredBufferWrite from a buffer a
#      kernel writes on the same stream, over P2P and over IB loopback where this node has an
#      RDMA device with an ACTIVE port), faults.cu (a P2P peer killed while a kernel waits:
#      the wait returns with failed() within the bootstrap timeout + 1 s; mscclppProxyStop
#      during a wait: within 1 s) and memkinds.cu (dma-buf export of 4 KiB, 1 MiB and
#      2 MiB + 4 KiB cudaMalloc buffers, as the library registers them; a cudaMallocAsync
#      buffer refused with a message; a cudaHostAlloc buffer over Ethernet in host mode);
#   5. upstream 0.1's allgather_test_standalone.cu (MSCCLPP_UPSTREAM_DIR, shared/upstream in
#      the repository, or ../shared/upstream or ../../shared/upstream beside it), built from a
#      copy with its one-line device change, 2 ranks; its output searched for its failure
#      line ("oh uh!"), since its exit code does not say.
#
# Prints PASS, FAIL or SKIP (class: reason) per case with its figures, INFO for what is not
# counted, and last "N passed, M failed, K skipped"; exits non-zero on a failure. A case
# skips where this machine cannot run it: class "hardware" (one GPU, no RDMA device),
# "attribute-unsupported" (the device answers the attribute the case needs with 0: the
# program's own "SKIP(class): why" line), "no-mps". A SKIP is never a pass: with
# --require-gpu (what a device run passes) the skipped cases are listed with their reasons
# before the summary. Without a GPU or nvcc the whole run is a SKIP (exit 0); with
# --require-gpu that is a FAIL. Fits in 10 minutes with the build: each case has a timeout
# (launch -t), cut to what is left of a 420 s budget for the cases.
#
# --dry-run needs no GPU, nvcc or library: it prints every case as it would run it (ranks,
# timeout, program and arguments, the condition of a conditional one) and checks that each is
# wired: its program is one build.sh builds, and its mode is one the program accepts (the
# program's "--modes" answer where BUILD_DIR/tests/gpu holds it built, else the kModes list of
# its source); exits non-zero when one is not.
#
# Environment: MSCCLPP_GPU_MAX_CHUNK (allgather's largest chunk, default 64 MiB),
# MSCCLPP_UPSTREAM_BYTES (upstream's -datasize, default 64 MiB), NVCC_FLAGS, MSCCLPP_DEBUG
# (default WARN), MSCCLPP_UPSTREAM_DIR, MSCCLPP_GPU_IB_DEV (the RDMA device for the IB case;
# default the first in /sys/class/infiniband with an ACTIVE port; "none": no IB case).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
start=$SECONDS
require=0 dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --require-gpu) require=1 ;;
    --dry-run) dry=1 ;;
    *) break ;;
  esac
  shift
done
passed=0 failed=0 skipped=0 notwired=0
skips=()

# unusable CASE WHY: no GPU or no nvcc: a SKIP, or with --require-gpu a FAIL
unusable() {
  if [ $require = 1 ]; then
    echo "FAIL $1: $2 (--require-gpu)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  echo "run.sh: SKIP: $2"
  exit 0
}

build=${1:-build}
case $build in /*) ;; *) [ -d "$build" ] || build=$root/$build ;; esac
out=$build/tests/gpu
if [ $dry = 0 ]; then
  # a library already there (a carried build/) is used as it is: no make, which may need the network
  if [ ! -e "$build/lib/libmscclpp.so" ] && command -v go >/dev/null 2>&1 &&
    [ "$(cd "$(dirname "$build")" 2>/dev/null && pwd)" = "$root" ]; then
    echo "run.sh: make (library, headers, mscclpp.pc)"
    make -C "$root" all >/dev/null || { echo "FAIL build-library"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
  fi
  if [ ! -e "$build/lib/libmscclpp.so" ]; then
    echo "run.sh: no library in '$build' and no Go toolchain here to build it: run make elsewhere and bring build/"
    echo "FAIL build-library"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  build=$(cd "$build" && pwd)
  out=$build/tests/gpu
  nvcc=${NVCC:-$(command -v nvcc 2>/dev/null || true)}
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  [ -z "$nvcc" ] && [ -x /usr/bin/nvcc ] && nvcc=/usr/bin/nvcc
  [ -n "$nvcc" ] || unusable nvcc "no nvcc here; cannot build the checks"
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

if [ $dry = 1 ]; then
  gpus=2 ibdev=dry-run
  echo "run.sh: dry run: the cases as a machine with 2 GPUs and an RDMA device runs them; conditions in brackets"
else
  # the GPUs as CUDA counts them (gpuinfo.cu needs no library: built first, alone)
  if ! "$nvcc" -o "$tmp/gpuinfo" "$here/gpuinfo.cu" >"$tmp/gpuinfo.log" 2>&1; then
    sed 's/^/  /' "$tmp/gpuinfo.log"
    echo "FAIL build-gpuinfo"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  "$tmp/gpuinfo" >"$tmp/gpus" 2>&1
  gpus=$(sed -n 's/^gpus \([0-9]*\)$/\1/p' "$tmp/gpus")
  if [ "${gpus:-0}" -eq 0 ]; then
    unusable gpu "CUDA finds no GPU here ($(grep -m1 -v '^gpus ' "$tmp/gpus" || echo "gpuinfo printed nothing"))"
  fi
  echo "run.sh: $gpus GPU(s), as CUDA counts them:"
  grep -v '^gpus ' "$tmp/gpus" | sed 's/^/  /'
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=driver_version,compute_mode --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/  nvidia-smi: driver, compute mode: /'
    mode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -1)
    case $mode in
      *Exclusive_Process*|*Prohibited*)
        echo "run.sh: note: compute mode is '$mode': several processes cannot share a GPU without MPS" ;;
    esac
  fi
  # an RDMA device with an ACTIVE port, for the IB loopback case
  ibdev=${MSCCLPP_GPU_IB_DEV:-}
  if [ "$ibdev" = none ]; then
    ibdev=
  elif [ -z "$ibdev" ]; then
    for d in /sys/class/infiniband/*; do
      [ -d "$d" ] && grep -qs ACTIVE "$d"/ports/*/state && { ibdev=${d##*/}; break; }
    done
  fi
  echo "run.sh: RDMA device for the IB case: ${ibdev:-none (MSCCLPP_GPU_IB_DEV=none, or no /sys/class/infiniband device with an ACTIVE port)}"

  if [ -z "${NVCC_FLAGS+x}" ]; then
    printf '__global__ void k(){}\nint main(){return 0;}\n' >"$tmp/a.cu"
    if "$nvcc" -arch=native -o "$tmp/a" "$tmp/a.cu" >/dev/null 2>&1; then export NVCC_FLAGS=-arch=native; fi
  fi
  export NVCC=$nvcc
fi
upstream=
for d in ${MSCCLPP_UPSTREAM_DIR:-} "$root/shared/upstream" "$root/../shared/upstream" "$root/../../shared/upstream"; do
  [ -f "$d/allgather_test_standalone.cu" ] && { upstream=$d/allgather_test_standalone.cu; break; }
done
if [ $dry = 0 ]; then
  echo "run.sh: building the checks into $out (nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') ${NVCC_FLAGS:-default architectures})"
  if ! MSCCLPP_UPSTREAM_FILE=$upstream bash "$here/build.sh" "$build" "$out"; then
    echo "FAIL build-checks"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
  fi
fi

export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSCCLPP_DEVICE=cuda # fail clearly instead of falling back to host mode
export MSCCLPP_DEBUG=${MSCCLPP_DEBUG:-WARN}
unset MSCCLPP_TEST_RANK MSCCLPP_TEST_NRANKS MSCCLPP_TEST_ADDR MSCCLPP_TEST_DIR CUDA_MPS_PIPE_DIRECTORY
maxChunk=${MSCCLPP_GPU_MAX_CHUNK:-67108864}
log=$tmp/case.log
figures=$tmp/figures

# skip NAME CLASS WHY: a case not run here; never a pass
skip() {
  echo "SKIP $1 ($2: $3)"
  skipped=$((skipped + 1))
  skips+=("$1 ($2: $3)")
}

# wired PROG [MODE]: the dry run's check that the case can run: PROG is built by build.sh and
# accepts MODE (its --modes answer where it is built, else its source's kModes list)
wired() {
  local prog=${1##*/} mode=${2:-}
  if [ "$prog" = sh ]; then
    [ -n "$upstream" ] && return 0
    echo "  (upstream's allgather_test_standalone.cu not found here: the case FAILs on a GPU machine without it)"
    return 0
  fi
  grep -q "^for prog in .*\b$prog\b" "$here/build.sh" || { echo "  NOT WIRED: build.sh does not build $prog"; return 1; }
  [ -f "$here/$prog.cu" ] || { echo "  NOT WIRED: no $here/$prog.cu"; return 1; }
  grep -q 'kModes\[\]' "$here/$prog.cu" || return 0 # its arguments are no mode
  if [ -x "$out/$prog" ] && [ "$out/$prog" -nt "$here/$prog.cu" ]; then
    "$out/$prog" --modes 2>/dev/null | grep -qx -- "$mode" && return 0
    echo "  NOT WIRED: $out/$prog --modes does not list '$mode'"
    return 1
  fi
  grep -E 'kModes\[\] = \{' "$here/$prog.cu" | grep -qF "\"$mode\"" && return 0
  echo "  NOT WIRED: '$mode' is not in $prog.cu's kModes"
  return 1
}

# run NAME TIMEOUT NRANKS [LAUNCH-OPTION...] -- PROG ARGS...: one case; its figure lines are kept,
# the rest shown on failure. With info=1 the result is INFO, not counted. casefail: 1 unless it passed.
budget=$((SECONDS + 420))
casefail=0 info=0 when=
run() {
  local name=$1 timeout=$2 n=$3 t0=$SECONDS opts=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  casefail=1
  if [ $dry = 1 ]; then
    local note=
    [ "$info" = 1 ] && note="  (INFO, not counted)"
    echo "case $name: launch -n $n -t $timeout ${opts[*]+${opts[*]} }-- ${*#"$out/"}${when:+  [$when]}$note"
    if wired "$@"; then passed=$((passed + 1)); else notwired=$((notwired + 1)); fi
    casefail=0
    return
  fi
  if [ $((budget - SECONDS)) -lt 10 ]; then
    echo "FAIL $name (not run: the 420 s budget is spent)"
    failed=$((failed + 1))
    return
  fi
  [ "$timeout" -gt $((budget - SECONDS)) ] && timeout=$((budget - SECONDS))
  "$out/launch" -n "$n" -t "$timeout" ${opts[@]+"${opts[@]}"} -- "$@" >"$log" 2>&1
  local rc=$?
  # one pass of this shell over the log (no sed, grep and tee per case: selftest.sh runs some 50
  # cases): the first rank's "SKIP(class): why" line, a failure line, and the figure lines (a
  # program's lines that name what it measured, but its PASS lines)
  local skipped_why= bad=0 line figs=()
  local figre='\] (allgather|latency|bandwidth|pushers|graph|exit|sameproc|everywait|syncthreads|dmabuf|regwrite|peerkill|stopwait|async|hostalloc-eth|Rank [0-9]+ report):'
  while IFS= read -r line || [ -n "$line" ]; do
    if [ -z "$skipped_why" ] && [[ $line =~ ^\[rank\ [0-9]*\]\ SKIP\(([a-z-]*)\):\ (.*)$ ]]; then
      skipped_why=${BASH_REMATCH[1]}$'\t'${BASH_REMATCH[2]}
    fi
    case $line in *'oh uh!'* | *'Failure at'* | *'Cuda failure'*) bad=1 ;; esac
    [[ $line =~ $figre ]] && [[ $line != *' PASS' ]] && figs+=("  $line")
  done <"$log"
  if [ $rc -eq 0 ] && [ $bad = 0 ]; then
    if [ ${#figs[@]} -gt 0 ]; then
      printf '%s\n' "${figs[@]}"
      printf '%s\n' "${figs[@]}" >>"$figures"
    fi
    casefail=0
    if [ "$info" = 1 ]; then
      echo "INFO $name passed ($((SECONDS - t0)) s; not counted)"
    elif [ -n "$skipped_why" ]; then
      skip "$name" "${skipped_why%%	*}" "${skipped_why#*	}"
    else
      echo "PASS $name ($((SECONDS - t0)) s)"
      passed=$((passed + 1))
    fi
  else
    sed 's/^/  /' "$log"
    [ $rc -eq 124 ] && echo "  (timed out after $timeout s)"
    if [ "$info" = 1 ]; then
      echo "INFO $name failed (not counted)"
    else
      echo "FAIL $name"
      failed=$((failed + 1))
    fi
  fi
}

run allgather-2 60 2 -- "$out/allgather" "$maxChunk"
run allgather-4 75 4 -- "$out/allgather" "$maxChunk"

# latency and bandwidth: 2 processes; on one GPU they share it, under MPS when it starts
shared=$((gpus < 2))
mps=0
if [ $dry = 0 ] && [ $shared = 1 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  mkdir -p "$tmp/mps-pipe" "$tmp/mps-log"
  if CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log nvidia-cuda-mps-control -d >/dev/null 2>&1; then
    mps_pipe=$tmp/mps-pipe
    mps=1
    echo "run.sh: MPS started for the latency/bandwidth case (2 processes share GPU 0)"
  else
    echo "run.sh: note: nvidia-cuda-mps-control -d failed: no MPS"
  fi
fi
ratio=
if [ $dry = 1 ]; then
  when="one GPU, MPS started" run latency-2-mps 45 2 -- "$out/latency"
  when="one GPU, latency-2-mps failed" info=1 run latency-2-nomps 45 2 -- "$out/latency"
  when="2+ GPUs, or one GPU without MPS" run latency-2 45 2 -- "$out/latency"
elif [ $mps = 1 ]; then
  CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log run latency-2-mps 45 2 -- "$out/latency"
  latfail=$casefail
  ratio=$(sed -n 's/.*bandwidth: *256 MiB:.*(P2P\/D2D \([0-9.]*\);.*/\1/p' "$log" | head -1)
  stop_mps
  if [ "$latfail" = 1 ]; then
    # the failure stands, and the goal with it: without MPS, only whether MPS was the cause
    echo "run.sh: note: the latency case failed under MPS (above, counted); once more without MPS, for information"
    info=1 run latency-2-nomps 45 2 -- "$out/latency"
  fi
else
  run latency-2 45 2 -- "$out/latency"
  latfail=$casefail
  ratio=$(sed -n 's/.*bandwidth: *256 MiB:.*(P2P\/D2D \([0-9.]*\);.*/\1/p' "$log" | head -1)
fi
if [ $dry = 1 ]; then
  echo "case p2p-bandwidth-goal: P2P/D2D at 256 MiB >= 0.9 in latency-2 or latency-2-mps  [FAIL when that case failed; SKIP (no-mps) on one GPU without MPS]"
elif [ "$latfail" = 1 ]; then
  echo "FAIL p2p-bandwidth-goal (the latency case it is measured in failed$([ $mps = 1 ] && echo ' under MPS'))"
  failed=$((failed + 1))
elif [ $shared = 1 ] && [ $mps = 0 ]; then
  skip p2p-bandwidth-goal no-mps "2 processes time-slice one GPU without MPS (P2P/D2D ${ratio:-not measured} at 256 MiB)"
elif [ -n "$ratio" ] && awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9) }'; then
  echo "PASS p2p-bandwidth-goal (P2P/D2D $ratio at 256 MiB, goal 0.9)"
  passed=$((passed + 1))
else
  echo "FAIL p2p-bandwidth-goal (P2P/D2D ${ratio:-not measured} at 256 MiB, goal 0.9)"
  failed=$((failed + 1))
fi

run pushers-p2p 30 2 -- "$out/devpaths" pushers p2p
run pushers-eth-cuda 40 2 -- "$out/devpaths" pushers eth
run graph-p2p 30 2 -- "$out/devpaths" graph p2p
run exit-without-proxystop 20 2 -- "$out/devpaths" exit p2p
if [ "$gpus" -ge 2 ]; then
  when="2+ GPUs" run sameproc-2gpu 30 1 -- "$out/hwpaths" sameproc distinct
else
  skip sameproc-2gpu hardware "CUDA sees one GPU; two communicators of one process need two"
fi
run sameproc-1gpu-refused 30 1 -- "$out/hwpaths" sameproc one
run everywait-p2p 60 2 -- "$out/hwpaths" everywait
run syncthreads-p2p 60 2 -- "$out/hwpaths" syncthreads
run peer-killed-during-wait-p2p 30 2 --expect-fail 1 -- "$out/faults" peerkill
run proxystop-during-wait-p2p 30 2 -- "$out/faults" stopwait
run dmabuf-cudamalloc-4k 20 1 -- "$out/memkinds" dmabuf 4096
run dmabuf-cudamalloc-1m 20 1 -- "$out/memkinds" dmabuf 1048576
run dmabuf-cudamalloc-2m+4k 20 1 -- "$out/memkinds" dmabuf 2101248
run cudamallocasync-refused 30 2 -- "$out/memkinds" async
run hostalloc-eth-hostmode 30 2 -- "$out/memkinds" hostalloc-eth
run regwrite-p2p 30 2 -- "$out/hwpaths" regwrite p2p
if [ -n "$ibdev" ]; then
  when="an RDMA device with an ACTIVE port" run regwrite-ib-loopback 30 2 -- "$out/hwpaths" regwrite ib "$ibdev"
else
  skip regwrite-ib-loopback hardware "no RDMA device with an ACTIVE port here (/sys/class/infiniband; MSCCLPP_GPU_IB_DEV)"
fi
if [ -z "$upstream" ] && [ $dry = 0 ]; then
  echo "FAIL upstream-allgather-2 (allgather_test_standalone.cu not found: set MSCCLPP_UPSTREAM_DIR, or bring shared/upstream)"
  failed=$((failed + 1))
else
  # upstream's own argument style; its data check prints "oh uh!" and exits 0 all the same
  # shellcheck disable=SC2016
  run upstream-allgather-2 90 2 -- sh -c 'exec "$0" -ip_port "$MSCCLPP_TEST_ADDR" -rank "$MSCCLPP_TEST_RANK" \
    -nranks "$MSCCLPP_TEST_NRANKS" -rankspernode "$MSCCLPP_TEST_NRANKS" -datasize "$1"' \
    "$out/upstream_allgather" "${MSCCLPP_UPSTREAM_BYTES:-67108864}"
  if [ $dry = 0 ] && [ $casefail = 0 ] && [ "$(grep -c 'Rank [0-9]* succeeded!' "$log")" -ne 2 ]; then
    echo "  (but not both ranks printed 'Rank N succeeded!')"
    echo "FAIL upstream-allgather-2"
    passed=$((passed - 1))
    failed=$((failed + 1))
  fi
fi

if [ $dry = 1 ]; then
  echo "run.sh: dry run: $passed case(s) wired, $notwired not"
  [ $notwired -eq 0 ]
  exit
fi
echo "run.sh: figures:"
grep -E 'latency:|bandwidth:|report:|peerkill:|stopwait:|dmabuf:' "$figures" 2>/dev/null | sed 's/^ *//'
if [ $require = 1 ] && [ $skipped -gt 0 ]; then
  echo "run.sh: --require-gpu: $skipped case(s) did not run on this machine (a SKIP is not a pass):"
  for s in "${skips[@]}"; do echo "  SKIP $s"; done
fi
echo "run.sh: $((SECONDS - start)) s"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
