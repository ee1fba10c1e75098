#!/usr/bin/env bash
# check-cuda.sh [DIR]: the header's device side under nvcc.
#  1. compiles tests/c/cuda_devconn.cu with nvcc -c (a kernel calling every
#     device method of mscclppDevConn and mscclppConcurrentFifo, and the same
#     calls on the host) for the default architecture, sm_70 and sm_90;
#  2. checks in its sm_70 PTX that every trigger store follows a system-scope
#     fence;
#  3. the SASS check: compiles tests/c/cuda_sass.cu (one kernel per device
#     method) for sm_80 and sm_90, disassembles it with cuobjdump -sass and
#     checks it with sass-check.awk: every poll a .STRONG.SYS load inside its
#     loop, a system-scope fence after each poll and before the trigger, the
#     trigger one 128-bit volatile store;
#  4. proves the SASS check can fail: copies of the header with the poll's
#     volatile removed, the release fence removed, the acquire fences removed,
#     the trigger split into two 64-bit stores, and the trigger store made
#     non-volatile must each fail it (sm_90);
#  5. compiles the README's first program (hello.c) with nvcc -x cu and as C++.
# nvcc and cuobjdump go through compile-cache.sh: a compile the same nvcc already made of the
# same input is not made again (what it is, where it lives: compile-cache.sh, docs/TESTING.md);
# every check above still runs on its output.
# DIR is a build directory (its include/ is used) or an include directory;
# default: the repository's include/. Without nvcc (on PATH or /usr/bin/nvcc,
# /usr/local/cuda/bin/nvcc) it says so and exits 0 (tests/c/run.sh counts
# that as a skip, which CI does not allow where nvcc is installed). Extra nvcc
# flags can come in NVCC_FLAGS.
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
cuobjdump=$(dirname "$nvcc")/cuobjdump
[ -x "$cuobjdump" ] || cuobjdump=$(command -v cuobjdump 2>/dev/null || true)

. "$here/compile-cache.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-cuda.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
cache_place TMP "$tmp" # the copies of the headers and sources compiled from it find their manifests next run
status=0
# the default architecture, and one with 16-byte volatile stores on sm_70+
for arch in "" "-arch=sm_70" "-arch=sm_90"; do
  if nvcc_cached "$nvcc" $arch ${NVCC_FLAGS:-} -std=c++14 -Werror all-warnings -I"$inc" -c "$here/cuda_devconn.cu" \
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
if nvcc_cached "$nvcc" -arch=sm_70 ${NVCC_FLAGS:-} -std=c++14 -I"$inc" -ptx "$here/cuda_devconn.cu" -o "$tmp/d.ptx" >"$tmp/log" 2>&1; then
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

# sass INCDIR SM OUT: the SASS check of cuda_sass.cu built against INCDIR for sm_SM; its
# report in OUT; 0 when it passes, 1 when it fails, 2 when it could not be built.
sass() {
  nvcc_cached "$nvcc" -cubin -gencode "arch=compute_$2,code=sm_$2" ${NVCC_FLAGS:-} -std=c++14 -I"$1" \
    -o "$tmp/s.cubin" "$here/cuda_sass.cu" >"$3" 2>&1 || return 2
  cuobjdump_cached "$cuobjdump" -sass "$tmp/s.cubin" >"$tmp/s.sass" 2>>"$3" || return 2
  awk -f "$here/sass-check.awk" "$tmp/s.sass" >>"$3" 2>&1
}
if [ -z "$cuobjdump" ]; then
  echo "check-cuda: FAILED cuobjdump not found beside nvcc ($nvcc) nor on PATH: the SASS is not checked"
  exit 1
fi
for sm in 80 90; do
  sass "$inc" $sm "$tmp/sass.log"
  rc=$?
  if [ $rc = 0 ]; then
    echo "check-cuda: ok   SASS sm_$sm: every poll .STRONG.SYS in its loop, fences after polls and before the trigger, one 128-bit trigger store"
    sed 's/^/    /' "$tmp/sass.log"
  else
    echo "check-cuda: FAILED SASS sm_$sm:"
    sed 's/^/    /' "$tmp/sass.log"
    status=1
  fi
done

# The README's first program (its docs-check block hello.c) as a CUDA program and as C++: the C
# helpers it calls (mscclppDevConnPutWithSignal ...) must be declared in nvcc's device pass too.
readme=$here/../../README.md
awk '/docs-check: file hello.c/{f=1;next} f&&/^```c/{g=1;next} g&&/^```/{exit} g' "$readme" >"$tmp/hello.c" 2>/dev/null
if [ ! -s "$tmp/hello.c" ]; then
  echo "check-cuda: FAILED no docs-check block hello.c in $readme"
  status=1
else
  if nvcc_cached "$nvcc" -x cu ${NVCC_FLAGS:-} -Werror all-warnings -I"$inc" -c "$tmp/hello.c" -o "$tmp/hello_cu.o" >"$tmp/log" 2>&1; then
    echo "check-cuda: ok   the README's hello.c compiles as CUDA (nvcc -x cu)"
  else
    echo "check-cuda: FAILED the README's hello.c as CUDA (nvcc -x cu):"
    sed 's/^/    /' "$tmp/log"
    status=1
  fi
  if ${CXX:-c++} -x c++ -Wall -Wextra -Werror -I"$inc" -c "$tmp/hello.c" -o "$tmp/hello_cxx.o" >"$tmp/log" 2>&1; then
    echo "check-cuda: ok   the README's hello.c compiles as C++ (${CXX:-c++} -x c++)"
  else
    echo "check-cuda: FAILED the README's hello.c as C++:"
    sed 's/^/    /' "$tmp/log"
    status=1
  fi
fi

# The check must fail on a broken header: each variant below is a copy with one mistake.
variant() { # name, sed expression
  rm -rf "$tmp/v"
  mkdir -p "$tmp/v"
  local h changed=0
  for h in mscclpp.h mscclppfifo.h mscclppdevconn.h; do
    cp "$inc/$h" "$tmp/v/" || return 2
    sed -i "$2" "$tmp/v/$h"
    cmp -s "$tmp/v/$h" "$inc/$h" || changed=1
  done
  if [ $changed = 0 ]; then
    echo "check-cuda: FAILED broken variant '$1': the edit did not apply (the header changed: update check-cuda.sh)"
    return 1
  fi
  sass "$tmp/v" 90 "$tmp/variant.log"
  case $? in
  1) echo "check-cuda: ok   the SASS check fails on a header with $1: $(grep -m1 FAIL "$tmp/variant.log" | cut -c1-160)" ;;
  0) echo "check-cuda: FAILED the SASS check passes a header with $1"
     return 1 ;;
  *) echo "check-cuda: FAILED the header with $1 did not build:"
     sed 's/^/    /' "$tmp/variant.log"
     return 1 ;;
  esac
}
variant "the poll's volatile removed" 's|return \*(const volatile uint64_t\*)p;|return *p;|' || status=1
variant "the release fence before the trigger removed" '/__threadfence_system(); \/\* release/d' || status=1
variant "the acquire fences after the polls removed" 's|__threadfence_system(); /\* acquire \*/||' || status=1
variant "the trigger split into two 64-bit stores" \
  's|st.volatile.global.v2.u64 \[%0\], {%1,%2};|st.volatile.global.u64 [%0], %1; st.volatile.global.u64 [%0+8], %2;|' || status=1
variant "a non-volatile trigger store" 's|st.volatile.global.v2.u64|st.global.v2.u64|' || status=1
exit $status
