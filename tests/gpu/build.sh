#!/usr/bin/env bash
# build.sh BUILD_DIR OUTDIR: compile the GPU checks (allgather, latency, devpaths) with
# nvcc against the library in BUILD_DIR (made by `make` at the repository
# root), using only its headers and pkg-config (BUILD_DIR/lib/pkgconfig),
# plus tests/c/launch.c (the rank launcher) with cc, into OUTDIR.
# Without nvcc it prints "skipped: nvcc not found" and exits 0.
#
# Environment: NVCC (the compiler), NVCC_FLAGS (extra flags, e.g.
# -arch=native), CC (for launch.c; default cc).
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

pc=$build/lib/pkgconfig/mscclpp.pc
if [ ! -f "$pc" ] || [ ! -e "$build/lib/libmscclpp.so" ]; then
  echo "build.sh: $build has no libmscclpp.so and mscclpp.pc: run make at the repository root first" >&2
  exit 1
fi
if command -v pkg-config >/dev/null 2>&1; then
  cflags=$(PKG_CONFIG_PATH="$build/lib/pkgconfig" pkg-config --cflags mscclpp) || exit 1
  libs=$(PKG_CONFIG_PATH="$build/lib/pkgconfig" pkg-config --libs mscclpp) || exit 1
else
  # no pkg-config: read the two lines of the .pc file ourselves
  prefix=$(sed -n 's/^prefix=//p' "$pc")
  expand() { sed -e "s|\${prefix}|$prefix|g" -e "s|\${libdir}|$prefix/lib|g" -e "s|\${includedir}|$prefix/include|g"; }
  cflags=$(sed -n 's/^Cflags: *//p' "$pc" | expand)
  libs=$(sed -n 's/^Libs: *//p' "$pc" | expand)
fi
# nvcc does not take -Wl,...: hand those to the host linker with -Xlinker
nvlibs=()
for f in $libs; do
  case $f in
    -Wl,*) nvlibs+=(-Xlinker "${f#-Wl,}") ;;
    *) nvlibs+=("$f") ;;
  esac
done

status=0
"${CC:-cc}" -O2 -Wall -o "$out/launch" "$root/tests/c/launch.c" || status=1
for prog in allgather latency devpaths; do
  # shellcheck disable=SC2086
  if "$nvcc" -std=c++14 -O2 ${NVCC_FLAGS:-} $cflags -I"$here" -o "$out/$prog" "$here/$prog.cu" \
      "${nvlibs[@]}"; then
    echo "built $out/$prog"
  else
    echo "build.sh: FAILED to build $prog" >&2
    status=1
  fi
done
exit $status
