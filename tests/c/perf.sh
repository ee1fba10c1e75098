#!/usr/bin/env bash
# perf.sh BUILD_DIR [NRANKS [perf options...]]: build tests/c/perf.c against
# BUILD_DIR through pkg-config and run the allgather perf tool on NRANKS
# local ranks (default 4) over SHM. Extra options go to perf (see perf.c:
# -b -e -f -i -w --malloc). Exit status: perf's (non-zero on any wrong byte).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
n=${2:-4}
shift $(($# < 2 ? $# : 2))
export PKG_CONFIG_PATH="$build/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pc=$(pkg-config --cflags --libs mscclpp)
mkdir -p "$build/tests"
gcc -std=c11 -O2 -g -Wall -Wextra -o "$build/tests/perf" "$here/perf.c" $pc
echo "# $build/tests/perf -n $n $*"
exec "$build/tests/perf" -n "$n" "$@"
