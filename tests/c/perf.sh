#!/usr/bin/env bash
# perf.sh BUILD_DIR [NRANKS [perf options...]]: build tools/perf/perf.c against
# BUILD_DIR through pkg-config and run the allgather perf tool on NRANKS
# local ranks (default 4) over SHM. The options go to perf unchanged: the
# flags of nccl-tests' all_gather_perf (-b -e -f -i -n -w -m -c -d -o -r -a
# -z -G -p -C -y -T -t -g -F), -J FILE, --malloc (see the comment at the top
# of perf.c); the rank count reaches perf as --nranks NRANKS. `make run NRANKS=4 ARGS="..."`
# calls this. Exit status: perf's (non-zero on any wrong byte or bad option).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
n=${2:-4}
case $n in
  '' | *[!0-9]*)
    echo "perf.sh: NRANKS must be a number of ranks, got '$n' (perf's own flags come after it)" >&2
    exit 2
    ;;
esac
shift $(($# < 2 ? $# : 2))
export PKG_CONFIG_PATH="$build/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pc=$(pkg-config --cflags --libs mscclpp)
mkdir -p "$build/tests"
gcc -std=c11 -O2 -g -Wall -Wextra -o "$build/tests/perf" "$root/tools/perf/perf.c" $pc -pthread
echo "# $build/tests/perf --nranks $n $*"
exec "$build/tests/perf" --nranks "$n" "$@"
