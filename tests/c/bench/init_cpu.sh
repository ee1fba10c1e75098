#!/bin/bash
# init_cpu.sh BUILD [OTHER_LIBDIR]: CPU per rank in mscclppCommInitRank (init_cpu.c),
# optionally against another build of the library, alternating in the same run.
#
#   bash tests/c/bench/init_cpu.sh build /tmp/old/lib
#
# Builds launch and init_cpu against BUILD (pkg-config) into BUILD/bench; for
# each N of INITCPU_NS ("2 8 16") runs INITCPU_REPS (10) launches of each
# library, alternating (OTHER_LIBDIR through LD_LIBRARY_PATH: the programs
# carry a RUNPATH, which it overrides), and prints the median, 25th and 75th
# percentile of the per-rank CPU time from the release to init's return, and
# the median launch init time (release -> last rank ready).
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:?usage: init_cpu.sh BUILD [OTHER_LIBDIR]}
OTHER=${2:-}
OUT=$BUILD/bench
mkdir -p "$OUT"
PC=$(PKG_CONFIG_PATH=$BUILD/lib/pkgconfig pkg-config --cflags --libs mscclpp) || exit 1
cc -O2 -Wall -Wextra -std=gnu11 -o "$OUT/launch" "$HERE/launch.c" || exit 1
cc -O2 -Wall -Wextra -std=gnu11 -o "$OUT/init_cpu" "$HERE/init_cpu.c" $PC || exit 1
RAW=$(mktemp)
trap 'rm -f "$RAW"' EXIT
for n in ${INITCPU_NS:-2 8 16}; do
  for r in $(seq 1 "${INITCPU_REPS:-10}"); do
    for v in this ${OTHER:+other}; do
      lp=; [ "$v" = other ] && lp=$OTHER
      env ${lp:+LD_LIBRARY_PATH=$lp} "$OUT/launch" "$n" "$OUT/init_cpu" 2>&1 |
        awk -v v="$v" -v n="$n" '$1=="INITCPU"{print n, v, "cpu", $5} $1=="LAUNCH"{print n, v, "init", $3/1000}' >>"$RAW"
    done
  done
done
python3 - "$RAW" <<'PY'
import sys, statistics as st
d = {}
for l in open(sys.argv[1]):
    n, v, k, x = l.split()
    d.setdefault((int(n), v, k), []).append(float(x))
for n, v in sorted({(k[0], k[1]) for k in d}):
    c = sorted(d.get((n, v, 'cpu'), [0]))
    q = lambda p: c[int(p * (len(c) - 1))]
    i = d.get((n, v, 'init'), [0])
    print(f"N={n:3d} {v:5s} cpu/rank median {st.median(c):7.0f} us (p25 {q(.25):.0f}, p75 {q(.75):.0f}, {len(c)} ranks)   init median {st.median(i):8.0f} us")
PY
