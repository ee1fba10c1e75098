#!/bin/sh
# check-cuda.sh [DIR]: compile tests/c/cuda_devconn.cu with nvcc -c (a
# kernel calling every device method of mscclppDevConn and
# mscclppConcurrentFifo), and checks in its sm_70 PTX that every trigger
# store follows a system-scope fence. DIR is a build directory (its include/ is used) or
# an include directory; default: the repository's include/.
# Without nvcc (on PATH or /usr/bin/nvcc, /usr/local/cuda/bin/nvcc) it says
# so and exits 0. Extra nvcc flags can come in NVCC_FLAGS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
inc=${1:-$here/../../include}
if [ -f "$inc/include/mscclpp.h" ]; then
  inc=$inc/include
fi
if [ ! -f "$inc/mscclpp.h" ]; then
  echo "check-cuda: FAILED: no mscclpp.h in $inc"
  exit 1
fi

nvcc=$(command -v nvcc 2>/dev/null || true)
for c in /usr/bin/nvcc /usr/local/cuda/bin/nvcc; do
  [ -n "$nvcc" ] && break
  [ -x "$c" ] && nvcc=$c
done
if [ -z "$nvcc" ]; then
  echo "check-cuda: skipped (nvcc not found)"
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-cuda.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0
# the default architecture, and one with 16-byte volatile stores on sm_70+
for arch in "" "-arch=sm_70" "-arch=sm_90"; do
  if "$nvcc" $arch ${NVCC_FLAGS:-} -std=c++14 -Werror all-warnings -I"$inc" -c "$here/cuda_devconn.cu" \
      -o "$tmp/cuda_devconn.o" >"$tmp/log" 2>&1; then
    echo "check-cuda: ok   nvcc ${arch:-(default arch)}: every device method of mscclppDevConn compiles"
  else
    if [ -n "$arch" ] && grep -q "Unsupported gpu architecture" "$tmp/log"; then
      echo "check-cuda: note nvcc does not know $arch; not checked"
      continue
    fi
    echo "check-cuda: FAILED nvcc ${arch:-(default arch)}:"
    sed 's/^/    /' "$tmp/log"
    status=1
  fi
done
# the release before every trigger store, as nvcc emits it (membar.sys / fence.sc.sys)
if "$nvcc" -arch=sm_70 ${NVCC_FLAGS:-} -std=c++14 -I"$inc" -ptx "$here/cuda_devconn.cu" -o "$tmp/d.ptx" >"$tmp/log" 2>&1; then
  if awk '/membar\.sys|fence\.(sc|acq_rel)\.sys/ { f = 1 }
          /st\.volatile\.global\.v2\.u64/ { n++; if (!f) bad++; f = 0 }
          END { exit (n == 0 || bad > 0) }' "$tmp/d.ptx"; then
    echo "check-cuda: ok   every trigger store in the PTX follows a system-scope fence (release)"
  else
    echo "check-cuda: FAILED a trigger store in the PTX with no system-scope fence before it"
    status=1
  fi
else
  echo "check-cuda: note nvcc -ptx -arch=sm_70 failed; ordering not checked"
  sed 's/^/    /' "$tmp/log"
fi
exit $status
