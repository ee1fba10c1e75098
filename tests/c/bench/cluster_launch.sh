#!/usr/bin/env bash
# cluster_launch.sh: what tests/multinode/cluster.sh runs as its launcher
# (--launch) in bench.sh's scale section, so that bench/launch (release at
# once, init timed to the last rank ready) starts the ranks of a simulated
# cluster.
#
#   cluster_launch.sh -n N [-t SECONDS] [-e VAR=VALUE]... -- bash rank.sh PROG [ARGS...]
#
# BENCH_LAUNCH names the built bench/launch. Every rank gets launch's
# BENCH_* variables and, for rank.sh, MSCCLPP_TEST_RANK / _NRANKS / _ADDR
# (BENCH_ADDR, which rank.sh moves to rank 0's node when cluster.sh was
# given -e BENCH_ADDR=...). -e values are not used: launch sets BENCH_ADDR.
set -u
n= t=120
while [ $# -gt 0 ]; do
  case $1 in
    -n) n=$2; shift 2 ;;
    -t) t=$2; shift 2 ;;
    -e) shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ -n "$n" ] && [ $# -ge 1 ] && [ -x "${BENCH_LAUNCH:-}" ] || {
  echo "cluster_launch.sh: usage: BENCH_LAUNCH=PATH cluster_launch.sh -n N [-t S] -- CMD..." >&2
  exit 2
}
# shellcheck disable=SC2016
exec "$BENCH_LAUNCH" -t "$t" "$n" bash -c \
  'export MSCCLPP_TEST_RANK=$BENCH_RANK MSCCLPP_TEST_NRANKS=$BENCH_NRANKS MSCCLPP_TEST_ADDR=$BENCH_ADDR; exec "$@"' \
  cluster_launch "$@"
