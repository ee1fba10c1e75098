#!/usr/bin/env bash
# rank.sh PROG [ARGS...]: what tests/c/launch starts for every rank of a
# cluster.sh run. It finds the rank's node from the placement, points the
# test addresses at rank 0's node, and execs PROG inside the node's
# namespaces (mount, net, uts of the node's holder process) with nsenter:
# the rank keeps its PID and process group, so launch's output capture,
# exit codes and timeout kills work as for local ranks.
#
# From cluster.sh (removed from the rank's environment):
#   MN_PLACEMENT   node of every rank, comma list (rank r: field r)
#   MN_NODE_PIDS   holder PID of every node, space list
#   MN_ROOT_IP     the address of the node of rank 0
#   MN_RUN_ID      this run's id (part of every name)
#   MN_WD          the working directory inside the nodes
#   MN_ADDR_VARS   variables whose 127.0.0.1 (launch's {ADDR}) becomes MN_ROOT_IP
#   MN_SHARED      launch's directory lies here; visible on every node
#   MN_NCPUS       this machine's CPUs (nproc, asked once by cluster.sh; without it, here)
# The rank gets, besides launch's MSCCLPP_TEST_RANK / _NRANKS / _DIR:
#   MSCCLPP_TEST_ADDR       MN_ROOT_IP:port
#   MSCCLPP_HOSTID          mn<id>-node<k>: the library's node identity
#   MSCCLPP_TEST_NODE       k;  MSCCLPP_TEST_NNODES  the node count
#   MSCCLPP_TEST_PLACEMENT  MN_PLACEMENT
#   MSCCLPP_TEST_NODE_ADDR  this node's address
# and, where the job has more ranks than this machine has CPUs (the nodes share them) and the
# environment does not set them, the host waits' back-off the library takes on a node with
# more ranks than CPUs: MSCCLPP_WAIT_SPIN=64 MSCCLPP_WAIT_YIELD=2000 (each node alone sees no
# more ranks than CPUs, and would keep a CPU yielding for up to a second per wait that the
# ranks of the other nodes need).
set -u
r=${MSCCLPP_TEST_RANK:?rank.sh: not started by launch}
IFS=, read -ra place <<<"$MN_PLACEMENT"
read -ra pids <<<"$MN_NODE_PIDS"
k=${place[$r]:-}
if [ -z "$k" ] || [ -z "${pids[$k]:-}" ]; then
  echo "rank.sh: rank $r has no node in placement '$MN_PLACEMENT'" >&2
  exit 127
fi
export MSCCLPP_TEST_ADDR=${MSCCLPP_TEST_ADDR//127.0.0.1/$MN_ROOT_IP}
for v in ${MN_ADDR_VARS:-}; do
  [ -n "${!v+x}" ] && export "$v=${!v//127.0.0.1/$MN_ROOT_IP}"
done
export MSCCLPP_HOSTID="mn$MN_RUN_ID-node$k"
export MSCCLPP_TEST_NODE=$k MSCCLPP_TEST_NNODES=${#pids[@]} MSCCLPP_TEST_PLACEMENT=$MN_PLACEMENT
export MSCCLPP_TEST_NODE_ADDR=$MN_NET_PREFIX.$((k + 1))
if [ "${MSCCLPP_TEST_NRANKS:-0}" -gt "${MN_NCPUS:-$(nproc 2>/dev/null || echo 1)}" ]; then
  export MSCCLPP_WAIT_SPIN=${MSCCLPP_WAIT_SPIN:-64} MSCCLPP_WAIT_YIELD=${MSCCLPP_WAIT_YIELD:-2000}
fi
pid=${pids[$k]} wd=$MN_WD
unset MN_PLACEMENT MN_NODE_PIDS MN_ROOT_IP MN_RUN_ID MN_WD MN_ADDR_VARS MN_SHARED MN_NET_PREFIX MN_NCPUS TMPDIR
exec nsenter -t "$pid" -m -n -u --wd="$wd" -- "$@"
