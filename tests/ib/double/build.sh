#!/usr/bin/env bash
# build.sh OUTDIR: builds the libibverbs TEST DOUBLE (ibverbs_double.c, gcc alone,
# ib/ibvapi.h instead of verbs.h) as OUTDIR/libibverbs.so.1 with the IBVERBS_1.1
# symbol versions. Load it through MSCCLPP_IBV_SO; never install it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
# the compile (-c) through the compile cache (tests/c/compile-cache.sh), the link every time
. "$root/tests/c/compile-cache.sh"
cc_program gcc "$out/libibverbs.so.1" -shared -fPIC -O2 -Wall -I "$root/ib" -Wl,-soname,libibverbs.so.1 \
  -Wl,--version-script="$here/ibverbs_double.map" "$here/ibverbs_double.c" -lpthread -ldl
