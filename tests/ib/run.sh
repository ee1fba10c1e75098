#!/usr/bin/env bash
# tests/ib/run.sh: the IB layer on a real RDMA host. Two ranks (two
# processes of one host) connect RC QPs over one real device, RDMA-write at
# offsets, signal, flush, and check an out-of-bounds write comes back as a
# remote access error naming the peer. Without an ACTIVE device it says so
# and exits 0.
#   bash tests/ib/run.sh [DEVICE]     (default: the first device with an ACTIVE port)
# Env: MSCCLPP_IBV_SO (library, default libibverbs.so.1), MSCCLPP_IB_GID_INDEX (RoCE: a populated GID).
set -euo pipefail
cd "$(dirname "$0")/../.."
dev="${1:-}"
if [ -z "$dev" ]; then
  for d in /sys/class/infiniband/*; do
    [ -d "$d" ] || continue
    for p in "$d"/ports/*/state; do
      if grep -q ACTIVE "$p" 2>/dev/null; then dev=$(basename "$d"); break 2; fi
    done
  done
fi
if [ -z "$dev" ]; then
  echo "SKIP tests/ib/run.sh: no RDMA device with an ACTIVE port on this host"
  exit 0
fi
echo "tests/ib/run.sh: device $dev"
MSCCLPP_IB_TEST_DEVICE="$dev" go test -tags mscclpp_testhooks -count=1 -v -run 'TestRealHardware|TestRealLibibverbs' ./ib/
