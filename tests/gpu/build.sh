#!/usr/bin/env bash
# build.sh BUILD_DIR OUTDIR: compile the GPU checks (allgather, latency, devpaths, hwpaths,
# faults, memkinds, gpuinfo) with nvcc against the library in BUILD_DIR (made by `make` at the
# repository root, possibly carried to another machine and path since), plus tests/c/launch.c
# (the rank launcher) with cc, into OUTDIR. Flags come from BUILD_DIR's own pkg-config file
# (relocatable: its prefix is ${pcfiledir}/../..), or, without pkg-config, straight from the
# tree: -I BUILD_DIR/include, -L and rpath BUILD_DIR/lib. Nothing outside BUILD_DIR, OUTDIR,
# tests/ and the compile cache (tests/c/compile-cache.sh: compiles of the same input) is read.
# With MSCCLPP_UPSTREAM_FILE (upstream 0.1's allgather_test_standalone.cu) it also builds
# OUTDIR/upstream_allgather from a copy with its one-line device change (cudaSetDevice of the
# rank modulo the number of GPUs, for fewer GPUs than ranks; see ../shared/upstream/README.md).
# Without nvcc it prints "skipped: nvcc not found" and exits 0.
#
# Environment: NVCC (the compiler), NVCC_FLAGS (default: SASS for sm_70, sm_80 and sm_90 and
# PTX for compute_90; e.g. -arch=native), CC (for launch.c; default cc), PKG_CONFIG (default
# pkg-config; "none": read the tree directly).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ $# -ne 2 ]; then
  echo "usage: build.sh BUILD_DIR OUTDIR" >&2
  exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "build.sh: no build directory '$1' (run make first)" >&2; exit 1; }
mkdir -p "$2" || exit 1
out=$(cd "$2" && pwd)

nvcc=${NVCC:-$(command -v nvcc 2>/dev/null || true)}
for c in /usr/local/cuda/bin/nvcc /usr/bin/nvcc; do
  [ -n "$nvcc" ] && break
  [ -x "$c" ] && nvcc=$c
done
if [ -z "$nvcc" ]; then
  echo "skipped: nvcc not found"
  exit 0
fi

if [ ! -f "$build/include/mscclpp.h" ] || [ ! -e "$build/lib/libmscclpp.so" ]; then
  echo "build.sh: $build has no include/mscclpp.h and lib/libmscclpp.so: run make at the repository root first" >&2
  exit 1
fi
pkgconfig=${PKG_CONFIG:-pkg-config}
if [ "$pkgconfig" != none ] && command -v "$pkgconfig" >/dev/null 2>&1 && [ -f "$build/lib/pkgconfig/mscclpp.pc" ]; then
  cflags=$(PKG_CONFIG_PATH="$build/lib/pkgconfig" "$pkgconfig" --cflags mscclpp) || exit 1
  libs=$(PKG_CONFIG_PATH="$build/lib/pkgconfig" "$pkgconfig" --libs mscclpp) || exit 1
  echo "build.sh: flags from $build/lib/pkgconfig/mscclpp.pc: $cflags $libs"
else
  cflags="-I$build/include"
  libs="-L$build/lib -Xlinker -rpath=$build/lib -lmscclpp"
  echo "build.sh: no pkg-config: flags from the tree: $cflags $libs"
fi
# nvcc does not take -Wl,...: hand those to the host linker with -Xlinker
nvlibs=()
for f in $libs; do
  case $f in
    -Wl,*) nvlibs+=(-Xlinker "${f#-Wl,}") ;;
    *) nvlibs+=("$f") ;;
  esac
done
archs=${NVCC_FLAGS-"-gencode arch=compute_70,code=sm_70 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"}

status=0
# the compiles go through compile-cache.sh (the same compiler over the same input: its object
# again); every program is linked here. Its manifests name BUILD_DIR and OUTDIR by a token, so
# a copy of BUILD_DIR elsewhere (tests/gpu/moved.sh), or another OUTDIR, finds them again.
. "$root/tests/c/compile-cache.sh"
cache_place BUILD "$build"
cache_place OUT "$out"
cc_program "${CC:-cc}" "$out/launch" -O2 -Wall "$root/tests/c/launch.c" || status=1
cache_tool_init "$nvcc" # asked here once, not in each background build
# build PROG SOURCE: one program, compiled in the background (the programs build in parallel)
pids=()
build() {
  # shellcheck disable=SC2086
  { nvcc_cached "$nvcc" -std=c++14 -O2 $archs $cflags -I"$here" -c -o "$out/$1.o" "$2" >"$out/$1.buildlog" 2>&1 &&
    "$nvcc" -std=c++14 -O2 $archs -o "$out/$1" "$out/$1.o" "${nvlibs[@]}" >>"$out/$1.buildlog" 2>&1 &&
    echo "built $out/$1" || { echo "build.sh: FAILED to build $1:" >&2; sed 's/^/    /' "$out/$1.buildlog" >&2; exit 1; }; } &
  pids+=($!)
}
for prog in allgather latency devpaths hwpaths faults memkinds gpuinfo; do
  build "$prog" "$here/$prog.cu"
done
if [ -n "${MSCCLPP_UPSTREAM_FILE:-}" ]; then
  # a copy, changed at build time: never the file itself, never inside the repository
  up=$out/upstream_allgather.cu
  line='CUDACHECK(cudaSetDevice(cudaNum));'
  if ! grep -qF "$line" "$MSCCLPP_UPSTREAM_FILE"; then
    echo "build.sh: FAILED: no '$line' in $MSCCLPP_UPSTREAM_FILE to change" >&2
    status=1
  else
    sed "s|$line|{ int nDev_ = 1; CUDACHECK(cudaGetDeviceCount(\&nDev_)); CUDACHECK(cudaSetDevice(cudaNum % nDev_)); }|" \
      "$MSCCLPP_UPSTREAM_FILE" >"$up"
    build upstream_allgather "$up"
  fi
fi
for p in "${pids[@]}"; do
  wait "$p" || status=1
done
exit $status
