#!/usr/bin/env bash
# perf.sh BUILD_DIR NODES [NRANKS [perf options...]]: `make run MULTINODE=NODES`.
#
# Builds the allgather perf tool (tools/perf/perf.c) and the launcher against
# BUILD_DIR through pkg-config, and runs perf as NRANKS ranks (default 4)
# over NODES simulated nodes (tests/multinode/cluster.sh: block placement,
# SHM between the ranks of a node, the cross-node transport between nodes).
# The cross-node transport is perf's --transport: MSCCLPP_PERF_TRANSPORT,
# default ethernet (an ARGS --transport wins). Rank 0's lines are printed
# as they come, without the "[rank 0] " prefix.
#
# Exit status: perf's through launch (0 only when every rank passed). Where
# perf cannot connect across nodes over that transport (e.g. ib without the
# RDMA device), one line gives the library's reason and the status is 3;
# where nodes cannot be simulated (not root, no iproute2, no namespaces),
# one line says why and the status is 1: `make run` never pretends.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
nodes=${2:-}
case $nodes in
  '' | *[!0-9]* | 0)
    echo "perf.sh: MULTINODE must be a number of nodes (1..64), got '$nodes'" >&2
    exit 2
    ;;
esac
n=${3:-4}
case $n in
  '' | *[!0-9]*)
    echo "perf.sh: NRANKS must be a number of ranks, got '$n' (perf's own flags come after it)" >&2
    exit 2
    ;;
esac
shift $(($# < 3 ? $# : 3))
if [ "$n" -lt "$nodes" ]; then
  echo "make run MULTINODE=$nodes: NRANKS=$n ranks cannot fill $nodes nodes (want NRANKS >= MULTINODE)" >&2
  exit 2
fi

if ! why=$(bash "$here/cluster.sh" --check); then
  echo "make run MULTINODE=$nodes: cannot simulate nodes on this machine: $why"
  exit 1
fi

export PKG_CONFIG_PATH="$build/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pc=$(pkg-config --cflags --libs mscclpp) || exit 1
mkdir -p "$build/tests/multinode"
gcc -std=c11 -O2 -g -Wall -Wextra -o "$build/tests/perf" "$root/tools/perf/perf.c" $pc || exit 1
gcc -std=c11 -O2 -o "$build/tests/multinode/launch" "$root/tests/c/launch.c" || exit 1

transport=${MSCCLPP_PERF_TRANSPORT:-ethernet}
echo "# $build/tests/perf --transport $transport $* as $n ranks over $nodes simulated nodes"
log=$(mktemp "${TMPDIR:-/tmp}/mscclpp-mnperf.XXXXXX")
trap 'rm -f "$log"' EXIT
# the ranks' timeout: perf's -T / --timeout when given, else 600 s
timeout=600
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[$i]} in
    -T | --timeout) timeout=${args[$((i + 1))]:-600} ;;
    --timeout=*) timeout=${args[$i]#--timeout=} ;;
  esac
done
bash "$here/cluster.sh" -k "$nodes" -n "$n" -t "$timeout" --launch "$build/tests/multinode/launch" -- \
  "$build/tests/perf" --transport "$transport" "$@" 2>&1 | tee "$log" |
  sed -u -e '/cannot connect to rank [0-9]* over the cross-node transport/d' -e 's/^\[rank 0\] //'
rc=${PIPESTATUS[0]}
if msg=$(grep -m1 -oE 'cannot connect to rank [0-9]+ over the cross-node transport .*' "$log"); then
  echo "make run MULTINODE=$nodes: perf cannot run across nodes: $msg"
  exit 3
fi
exit "$rc"
