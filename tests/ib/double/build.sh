#!/usr/bin/env bash
# build.sh OUTDIR: builds the libibverbs TEST DOUBLE (ibverbs_double.c, gcc alone,
# ib/ibvapi.h instead of verbs.h) as OUTDIR/libibverbs.so.1 with the IBVERBS_1.1
# symbol versions. Load it through MSCCLPP_IBV_SO; never install it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
exec gcc -shared -fPIC -O2 -Wall -I "$root/ib" -o "$out/libibverbs.so.1" -Wl,-soname,libibverbs.so.1 \
  -Wl,--version-script="$here/ibverbs_double.map" "$here/ibverbs_double.c" -lpthread -ldl
