#!/usr/bin/env bash
# selftest.sh [RUN_SH]: run.sh's judgement, tested without a GPU. RUN_SH (default run.sh beside
# this file) runs in a copy of the tree against stand-ins: an nvcc that "builds" each check as
# a script whose outcome a plan chooses (pass, fail, or the program's SKIP(attribute-unsupported)
# line), a gpuinfo that reports the GPUs CUDA counts (FAKE_GPUS), an nvidia-smi that lists
# other GPUs than CUDA sees (as under CUDA_VISIBLE_DEVICES or MIG), an MPS control daemon, and a
# `go` and `make` that must never be called since build/ holds a library (a carried build/).
# tests/c/launch is real. The scenarios:
#   pass-attr-skip on 2 GPUs with an RDMA device every case passes but the dma-buf ones, whose
#                  programs say the attribute is unsupported: exit 0, the bandwidth goal and the
#                  IB loopback case PASS, the dma-buf cases SKIP with that class (never PASS),
#                  listed under --require-gpu;
#   mps-failure    one GPU as CUDA counts it (nvidia-smi lists two), no RDMA device: MPS is
#                  started, the latency case fails under it and passes without: exit non-zero,
#                  no PASS for latency or the bandwidth goal (which FAILs), the rerun only INFO;
#                  the two-GPU and IB cases SKIP (hardware), listed;
#   no-gpu         CUDA counts no GPU (nvidia-smi lists one): a SKIP (exit 0), and with
#                  --require-gpu a FAIL;
#   dry-run        --dry-run lists every case wired, and fails where a case's mode is missing
#                  from its program.
# Prints "selftest: ok <scenario>" or "selftest: FAILED <scenario>: why" (with run.sh's output);
# exits non-zero on a failure. SELFTEST_KEEP=1 keeps the temporary tree (its path in TMPDIR).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runsh=$(cd "$(dirname "${1:-$here/run.sh}")" && pwd)/$(basename "${1:-$here/run.sh}")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-gpuself.XXXXXX") || exit 1
trap '[ -n "${SELFTEST_KEEP:-}" ] || rm -rf "$tmp"' EXIT INT TERM

# the tree run.sh sees: tests/gpu, launch.c, a fake upstream file, a "carried" build/
repo=$tmp/repo
mkdir -p "$repo/tests/gpu" "$repo/tests/c" "$repo/shared/upstream" "$repo/build/include" "$repo/build/lib" "$tmp/bin"
cp "$here"/*.cu "$here"/*.h "$here/build.sh" "$repo/tests/gpu/" && cp "$runsh" "$repo/tests/gpu/run.sh" &&
  cp "$root/tests/c/launch.c" "$root/tests/c/ports.h" "$root/tests/c/compile-cache.sh" "$repo/tests/c/" || exit 1
: >"$repo/build/include/mscclpp.h"
: >"$repo/build/lib/libmscclpp.so"
echo 'CUDACHECK(cudaSetDevice(cudaNum));' >"$repo/shared/upstream/allgather_test_standalone.cu"
"${CC:-cc}" -O1 -o "$tmp/launch" "$root/tests/c/launch.c" || { echo "selftest: FAILED: cannot build launch.c"; exit 1; }

# fakeprog NAME ARGS...: a check as the plan ($FAKE_PLAN: lines "GLOB<TAB>OUTCOME" over
# "NAME ARGS" plus " [mps]" under MPS; the first match wins, default pass) says. The programs
# the fake nvcc makes source it (". fakeprog NAME ARGS"), and it runs no other program: the
# scenarios start some 300 of them, and each fork and exec costs this 2-CPU machine's test run
# CPU time (a shell and a sed|tr|tr|grep pipeline per program cost 13 s of CPU in all).
cat >"$tmp/fakeprog" <<'EOF'
name=$1
shift
if [ "$name" = gpuinfo ]; then
  echo "gpuinfo: $FAKE_GPUS CUDA device(s) (fake); device 0: GPUDirect RDMA writes ordering (118) 0"
  echo "gpus $FAKE_GPUS"
  exit 0
fi
if [ "${1:-}" = --modes ]; then # the modes the program's source lists (its kModes line)
  while IFS= read -r line; do
    [[ $line =~ kModes\[\]\ =\ \{(.*)NULL\}\; ]] || continue
    IFS=, read -ra modes <<<"${BASH_REMATCH[1]//[\" ]/}"
    for m in "${modes[@]}"; do [ -n "$m" ] && echo "$m"; done
  done <"$FAKE_SRC/$name.cu"
  exit 0
fi
key="$name $*"
[ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && key="$key [mps]"
outcome=pass
while IFS='	' read -r glob what; do
  # shellcheck disable=SC2254
  case $key in $glob) outcome=$what; break ;; esac
done <"${FAKE_PLAN:-/dev/null}"
r=${MSCCLPP_TEST_RANK:-0}
case $key in "faults peerkill"*) [ "$r" = 1 ] && kill -KILL $$ ;; esac
case $outcome in
  fail) echo "rank $r: fake failure of $key" >&2; exit 1 ;;
  skip-attr) echo "SKIP(attribute-unsupported): fake: the device says 0"; exit 0 ;;
esac
case $name in
  latency) echo "bandwidth: 256 MiB: P2P put 90.00 GB/s, cudaMemcpy D2D 95.00 GB/s (P2P/D2D 0.95; bytes copied)" ;;
  upstream_allgather) echo "Rank $r succeeded!" ;;
esac
echo "$name: rank $r PASS"
EOF
# nvcc -o OUT ... X.cu: OUT becomes a bash script that sources "fakeprog X"; nvcc -o OUT X.o (a
# link): OUT becomes X.o; --version as nvcc 11.8 says it; -M (compile-cache.sh's list of inputs)
# fails, so nothing is cached. It and the programs it makes name this bash by its path (no env,
# sh or basename run on the way: forks, see fakeprog).
cat >"$tmp/bin/nvcc" <<EOF
#!$BASH
[ "\${1:-}" = --version ] && { echo "Cuda compilation tools, release 11.8, V11.8.89"; exit 0; }
o= src= obj=
while [ \$# -gt 0 ]; do
  case \$1 in -M) exit 1 ;; -o) o=\$2; shift ;; *.cu) src=\${1##*/} src=\${src%.cu} ;; *.o) obj=\$1 ;; esac
  shift
done
[ -z "\$src" ] && [ -n "\$obj" ] && { cp "\$obj" "\$o"; exit; }
[ "\$src" = upstream_allgather ] || [ -f "$repo/tests/gpu/\$src.cu" ] || [ "\$src" = a ] || exit 1
printf '#!%s\n. %s %s "\$@"\n' "$BASH" "$tmp/fakeprog" "\$src" >"\$o" && chmod +x "\$o"
EOF
printf '#!/bin/sh\n# cc ... -o OUT launch.c: the launcher built once\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && o=$2; shift; done\ncp %s "$o"\n' "$tmp/launch" >"$tmp/bin/cc"
printf '#!/bin/sh\n[ "$1" = -L ] || exit 0\ni=0; while [ $i -lt ${FAKE_SMI_GPUS:-2} ]; do echo "GPU $i: Fake GPU (UUID: GPU-$i)"; i=$((i+1)); done\n' >"$tmp/bin/nvidia-smi"
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/nvidia-cuda-mps-control"
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/go"
printf '#!/bin/sh\necho "make $*" >>%s/make-called\nexit 1\n' "$tmp" >"$tmp/bin/make"
chmod +x "$tmp"/bin/*

status=0
# scenario NAME [RUN.SH ARGS...]: runs run.sh; its output in $tmp/NAME.out, its status in rc
scenario() {
  local name=$1
  shift
  FAKE_SRC=$repo/tests/gpu env -u MSCCLPP_UPSTREAM_DIR -u NVCC -u NVCC_FLAGS -u MSCCLPP_GPU_IB_DEV MSCCLPP_GPU_IB_DEV=${FAKE_IB:-none} PATH="$tmp/bin:$PATH" CC="$tmp/bin/cc" \
    PKG_CONFIG=none timeout 120 bash "$repo/tests/gpu/run.sh" "$@" >"$tmp/$name.out" 2>&1
  rc=$?
}
fail() { # scenario why
  echo "selftest: FAILED $1: $2"
  sed 's/^/    /' "$tmp/$1.out"
  status=1
}
has() { grep -qE "$2" "$tmp/$1.out"; }
judge() { # scenario: the checks every scenario shares, then ok
  if [ -f "$tmp/make-called" ]; then
    fail "$1" "run.sh ran make although build/ holds a library: $(cat "$tmp/make-called")"
    rm -f "$tmp/make-called"
  fi
}

printf 'memkinds dmabuf*\tskip-attr\nhwpaths dmabuf*\tskip-attr\n' >"$tmp/plan-attr"
FAKE_IB=fake_ib0 FAKE_PLAN=$tmp/plan-attr FAKE_GPUS=2 FAKE_SMI_GPUS=2 scenario pass-attr-skip --require-gpu "$repo/build"
judge pass-attr-skip
if [ $rc != 0 ] || ! has pass-attr-skip '^[0-9]+ passed, 0 failed' || ! has pass-attr-skip '^PASS p2p-bandwidth-goal'; then
  fail pass-attr-skip "want exit 0, no failure and PASS p2p-bandwidth-goal (exit $rc)"
elif has pass-attr-skip '^PASS dmabuf'; then
  fail pass-attr-skip "a dma-buf case passed where the attribute says unsupported"
elif ! has pass-attr-skip '^SKIP dmabuf-cudamalloc-4k \(attribute-unsupported: '; then
  fail pass-attr-skip "want 'SKIP dmabuf-cudamalloc-4k (attribute-unsupported: ...)'"
elif ! sed -n '/--require-gpu: .* did not run/,$p' "$tmp/pass-attr-skip.out" |
  grep -q '^  SKIP dmabuf-cudamalloc-1m (attribute-unsupported'; then
  fail pass-attr-skip "--require-gpu does not list the attribute-unsupported skips"
elif ! has pass-attr-skip '^PASS regwrite-ib-loopback'; then
  fail pass-attr-skip "an RDMA device is up (MSCCLPP_GPU_IB_DEV), yet regwrite-ib-loopback did not run and pass"
else
  echo "selftest: ok   pass-attr-skip: every other case passed, exit 0; attribute-unsupported is a SKIP with its reason, listed under --require-gpu"
fi

printf 'latency* \\[mps\\]\tfail\n' >"$tmp/plan-mps"
FAKE_PLAN=$tmp/plan-mps FAKE_GPUS=1 FAKE_SMI_GPUS=2 scenario mps-failure --require-gpu "$repo/build"
judge mps-failure
if [ $rc = 0 ]; then
  fail mps-failure "a failure under MPS, yet exit 0"
elif ! has mps-failure 'MPS started'; then
  fail mps-failure "CUDA counts one GPU (nvidia-smi two), yet MPS was not started: the GPUs were not counted through CUDA"
elif has mps-failure '^PASS latency' || has mps-failure '^(PASS|REPORT) p2p-bandwidth-goal'; then
  fail mps-failure "a pass (or a report-only goal) after the latency case failed under MPS"
elif ! has mps-failure '^FAIL latency-2-mps' || ! has mps-failure '^FAIL p2p-bandwidth-goal'; then
  fail mps-failure "want FAIL latency-2-mps and FAIL p2p-bandwidth-goal"
elif ! has mps-failure '^SKIP regwrite-ib-loopback \(hardware: ' || ! has mps-failure '^  SKIP sameproc-2gpu \(hardware: '; then
  fail mps-failure "one GPU and no RDMA device: want SKIP (hardware) of regwrite-ib-loopback and sameproc-2gpu, listed"
else
  echo "selftest: ok   mps-failure: GPUs counted through CUDA, a failure under MPS stays one (goal FAIL, rerun not a pass)"
fi

FAKE_GPUS=0 FAKE_SMI_GPUS=1 scenario no-gpu "$repo/build"
judge no-gpu
if [ $rc != 0 ] || ! has no-gpu 'SKIP: CUDA finds no GPU'; then
  fail no-gpu "CUDA counts no GPU (nvidia-smi one): want a SKIP and exit 0 (exit $rc)"
else
  FAKE_GPUS=0 FAKE_SMI_GPUS=1 scenario no-gpu --require-gpu "$repo/build"
  if [ $rc = 0 ] || ! has no-gpu '^FAIL gpu: '; then
    fail no-gpu "CUDA counts no GPU: want FAIL with --require-gpu (exit $rc)"
  else
    echo "selftest: ok   no-gpu: no GPU as CUDA counts them is a SKIP, and a FAIL with --require-gpu"
  fi
fi

scenario dry-run --dry-run "$repo/build"
if [ $rc != 0 ] || ! has dry-run ' 0 not$' || has dry-run 'NOT WIRED'; then
  fail dry-run "want every case wired (exit $rc)"
else
  sed -i 's/"stopwait", //' "$repo/tests/gpu/faults.cu"
  scenario dry-run --dry-run "$repo/build"
  if [ $rc = 0 ] || ! has dry-run "NOT WIRED: 'stopwait'"; then
    fail dry-run "a mode missing from faults.cu's kModes went unnoticed (exit $rc)"
  else
    echo "selftest: ok   dry-run: every case wired; a missing mode is reported"
  fi
fi
exit $status
