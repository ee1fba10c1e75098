#!/usr/bin/env bash
# packaging.sh BUILD_DIR destdir|nvcc: checks of `make install` as
# distributions use it (cases of tests/c/run.sh; one "ok"/"not ok" line per
# check, exit status 1 when one failed).
#
#   destdir  `make install DESTDIR=T PREFIX=/usr` stages everything under T:
#            the library, its links, mscclpp.pc and the CMake package in
#            T/usr/lib/<multiarch>, the headers, bin/mscclpp_allgather_perf,
#            share/doc/mscclpp (LICENSE too); the .pc names /usr and adds no
#            rpath; a C program builds from the .pc (PKG_CONFIG_SYSROOT_DIR=T)
#            and runs, and so does the staged perf tool (2 ranks) and a CMake
#            find_package(mscclpp) project; `make uninstall` with the same
#            DESTDIR and PREFIX leaves no file behind.
#   nvcc     `make install PREFIX=P` (not a system prefix: the .pc has an
#            rpath), then `nvcc app.cu $(pkg-config --cflags --libs mscclpp)`
#            builds a .cu program that runs without LD_LIBRARY_PATH.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:?usage: packaging.sh BUILD_DIR destdir|nvcc}
case $build in /*) ;; *) build=$root/$build ;; esac
what=${2:?usage: packaging.sh BUILD_DIR destdir|nvcc}
CC=${CC:-cc}
unset LD_LIBRARY_PATH PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-pkg.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
bad=0
ok() { echo "ok   $*"; }
notok() {
  echo "not ok $*"
  bad=1
}
check() { # description command...
  local d=$1
  shift
  if "$@" >"$tmp/check.log" 2>&1; then ok "$d"; else
    notok "$d"
    sed 's/^/    /' "$tmp/check.log" | tail -n 30
  fi
}

destdir_case() {
  local t=$tmp/stage arch lib
  arch=$($CC -print-multiarch)
  lib=$t/usr/lib/$arch
  check "make install DESTDIR=$t PREFIX=/usr" make -s -C "$root" install DESTDIR="$t" PREFIX=/usr BUILD="$build"
  local f
  for f in "$lib/libmscclpp.so.0.1.0" "$lib/pkgconfig/mscclpp.pc" "$lib/cmake/mscclpp/mscclppConfig.cmake" \
    "$lib/cmake/mscclpp/mscclppConfigVersion.cmake" "$t/usr/include/mscclpp.h" "$t/usr/include/mscclppfifo.h" "$t/usr/include/mscclppdevconn.h" \
    "$t/usr/include/mscclpp_tools.h" "$t/usr/bin/mscclpp_allgather_perf" "$t/usr/share/doc/mscclpp/LICENSE" \
    "$t/usr/share/doc/mscclpp/README.md" "$t/usr/share/doc/mscclpp/tools/perf/README.md" "$lib/mscclpp/libmscclpp_profile.so" "$lib/mscclpp/libmscclpp_trace.so" \
    "$t/usr/bin/mscclpp-trace-merge" "$t/usr/bin/mscclpp-perf-plot"; do
    check "staged $f" test -f "$f"
  done
  check "links libmscclpp.so.0 -> libmscclpp.so.0.1.0, libmscclpp.so -> libmscclpp.so.0" \
    test "$(readlink "$lib/libmscclpp.so.0")" = libmscclpp.so.0.1.0 -a "$(readlink "$lib/libmscclpp.so")" = libmscclpp.so.0
  check "nothing staged outside $t/usr/{lib/$arch,include,bin,share/doc/mscclpp}" \
    test -z "$(cd "$t" && find . \( -type f -o -type l \) ! -path "./usr/lib/$arch/*" ! -path './usr/include/*' \
      ! -path './usr/bin/*' ! -path './usr/share/doc/mscclpp/*')"
  local pc=(env PKG_CONFIG_SYSROOT_DIR="$t" PKG_CONFIG_LIBDIR="$lib/pkgconfig" pkg-config)
  check "the .pc: prefix=/usr" \
    grep -qx "prefix=/usr" "$lib/pkgconfig/mscclpp.pc"
  check "the .pc: libdir under /usr/lib/$arch" grep -qx "libdir=\${prefix}/lib/$arch" "$lib/pkgconfig/mscclpp.pc"
  check "pkg-config --libs: no rpath for /usr ($("${pc[@]}" --libs mscclpp))" \
    bash -c '! "$@" --libs mscclpp | grep -q rpath' _ "${pc[@]}"
  # a program from the staged tree's .pc (the sysroot prefixes its paths)
  check "cc app.c \$(pkg-config --cflags --libs mscclpp) against the staged tree" \
    bash -c '$0 -std=c11 -Wall -Werror $("${@:3}" --cflags mscclpp) "$1/error_strings.c" -o "$2/app" \
      $("${@:3}" --libs mscclpp)' "$CC" "$here" "$tmp" "${pc[@]}"
  check "the program runs against the staged library" env LD_LIBRARY_PATH="$lib" "$tmp/app"
  check "staged mscclpp_allgather_perf --nranks 2 checks every byte" \
    bash -c 'out=$(LD_LIBRARY_PATH="$1" timeout -k 5 60 "$2" --nranks 2 -b 8 -e 1K -f 4 -n 2 -w 1 -c 1 2>&1);
      rc=$?; echo "$out"; [ $rc = 0 ] && echo "$out" | grep -q "^# Out of bounds values : 0 OK$"' _ \
    "$lib" "$t/usr/bin/mscclpp_allgather_perf"
  if command -v cmake >/dev/null 2>&1; then
    mkdir -p "$tmp/cmake"
    check "find_package(mscclpp) with CMAKE_PREFIX_PATH=$t/usr finds lib/$arch/cmake/mscclpp" \
      bash -c 'cd "$1" && cmake -DCMAKE_PREFIX_PATH="$2/usr" -DEXPECTED_PREFIX="$2/usr" \
        -DEXPECTED_LIBDIR="$3" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "$4/cmake" && cmake --build . &&
        LD_LIBRARY_PATH="$3" ./find_package' _ "$tmp/cmake" "$t" "$lib" "$here"
  else
    notok "cmake not found (.ci/install-deps.sh installs it)"
  fi
  check "make uninstall DESTDIR=$t PREFIX=/usr" make -s -C "$root" uninstall DESTDIR="$t" PREFIX=/usr BUILD="$build"
  check "nothing left after uninstall" test -z "$(find "$t" -type f -o -type l)"
}

nvcc_case() {
  local p=$tmp/prefix nvcc
  nvcc=$(command -v nvcc || true)
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  if [ -z "$nvcc" ]; then
    echo "SKIP nvcc not found"
    return
  fi
  check "make install PREFIX=$p" make -s -C "$root" install PREFIX="$p" BUILD="$build"
  cat >"$tmp/app.cu" <<'EOF'
// a CUDA application of the library: a kernel taking a device connection,
// and host calls (no GPU needed to run: the kernel is not launched)
#include <mscclpp.h>
#include <cstdio>
__global__ void kernel(mscclppDevConn_t conn) { conn.signal(); }
int main() {
  int v = 0;
  if (mscclppGetVersion(&v) != mscclppSuccess || v != MSCCLPP_VERSION) return 1;
  std::printf("%s %d\n", mscclppGetErrorString(mscclppSuccess), v);
  return 0;
}
EOF
  local libs
  libs=$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --libs mscclpp)
  check "pkg-config --libs uses the -Xlinker rpath form ($libs)" \
    bash -c '[[ $1 == *"-Xlinker -rpath=$2/lib "* && $1 != *-Wl,* ]]' _ "$libs" "$p"
  check "nvcc app.cu \$(pkg-config --cflags --libs mscclpp)" \
    bash -c 'cd "$1" && "$2" app.cu $(PKG_CONFIG_PATH="$3/lib/pkgconfig" pkg-config --cflags --libs mscclpp) -o app' \
    _ "$tmp" "$nvcc" "$p"
  check "the nvcc-built program runs without LD_LIBRARY_PATH (the .pc's rpath)" "$tmp/app"
}

case $what in
  destdir) destdir_case ;;
  nvcc) nvcc_case ;;
  *)
    echo "packaging.sh: unknown check '$what'"
    exit 2
    ;;
esac
exit $bad
