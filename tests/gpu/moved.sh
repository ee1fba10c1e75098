#!/usr/bin/env bash
# moved.sh BUILD_DIR: what a bare GPU machine does with a build/ carried from the machine that
# ran `make`: copies BUILD_DIR to a fresh temporary directory (another path; the original is
# left as it is) and builds the GPU checks (tests/gpu/build.sh) from the copy with nvcc alone,
# once through the copy's own pkg-config file and once without pkg-config (flags from the
# tree). Each time every program must link the copy's libmscclpp (ldd and RUNPATH name the
# copy, never BUILD_DIR) and build.sh must have taken its flags from the copy. Upstream 0.1's
# allgather_test_standalone.cu is built too where it is found (MSCCLPP_UPSTREAM_DIR,
# shared/upstream in the repository, or ../shared/upstream or ../../shared/upstream beside
# it: the main checkout, a worktree). Prints
# "moved: ok ..." lines, or "moved: FAILED ..." and exits 1; without nvcc it says so and
# exits 0 (tests/c/run.sh reports that as a skip). Only the temporary directory is removed.
#
# Environment: NVCC_FLAGS (default -arch=sm_90: one architecture keeps it quick).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" 2>/dev/null && pwd) || { echo "moved: FAILED: no build directory '${1:-}'"; exit 1; }
nvcc=$(command -v nvcc 2>/dev/null || true)
for c in /usr/local/cuda/bin/nvcc /usr/bin/nvcc; do
  [ -n "$nvcc" ] && break
  [ -x "$c" ] && nvcc=$c
done
if [ -z "$nvcc" ]; then
  echo "moved: skipped (nvcc not found)"
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-moved.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
copy=$tmp/carried/build
mkdir -p "$tmp/carried" && cp -a "$build" "$copy" || { echo "moved: FAILED: copying $build"; exit 1; }
upstream=
for d in ${MSCCLPP_UPSTREAM_DIR:-} "$root/shared/upstream" "$root/../shared/upstream" "$root/../../shared/upstream"; do
  [ -f "$d/allgather_test_standalone.cu" ] && { upstream=$d/allgather_test_standalone.cu; break; }
done
progs="allgather latency devpaths hwpaths faults memkinds gpuinfo${upstream:+ upstream_allgather}"
export NVCC=$nvcc NVCC_FLAGS=${NVCC_FLAGS:--arch=sm_90}
status=0
for how in pkg-config none; do
  out=$tmp/out-$how
  if ! PKG_CONFIG=$how MSCCLPP_UPSTREAM_FILE=$upstream bash "$here/build.sh" "$copy" "$out" >"$tmp/log" 2>&1; then
    echo "moved: FAILED building from the copy (PKG_CONFIG=$how):"
    sed 's/^/    /' "$tmp/log"
    status=1
    continue
  fi
  flags=$(grep -m1 '^build.sh: .*flags from' "$tmp/log")
  case $flags in
    *"$copy"*) ;;
    *) echo "moved: FAILED build.sh did not take its flags from the copy (PKG_CONFIG=$how): $flags"; status=1 ;;
  esac
  case $flags in
    *"$build/"*|*"$build "*) echo "moved: FAILED build.sh's flags name the original tree (PKG_CONFIG=$how): $flags"; status=1 ;;
  esac
  for p in $progs; do
    lib=$(env -u LD_LIBRARY_PATH ldd "$out/$p" 2>/dev/null | sed -n 's/.*libmscclpp\.so\.0 => \([^ ]*\).*/\1/p')
    runpath=$(readelf -d "$out/$p" 2>/dev/null | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
    case $p:$lib in
      gpuinfo:) # needs no libmscclpp (gpuinfo.cu): built, and held to the RUNPATH check below
        [ -x "$out/$p" ] || { echo "moved: FAILED $p (PKG_CONFIG=$how) was not built"; status=1; continue; } ;;
      *:"$copy"/*) ;;
      *) echo "moved: FAILED $p (PKG_CONFIG=$how) loads libmscclpp.so.0 from '${lib:-nowhere}', not the copy"; status=1; continue ;;
    esac
    case $runpath in
      *"$build"*) echo "moved: FAILED $p (PKG_CONFIG=$how) has the original tree in its RUNPATH: $runpath"; status=1; continue ;;
    esac
  done
  [ $status = 0 ] && echo "moved: ok   PKG_CONFIG=$how: $progs built from a copy of $build at $copy with nvcc alone, each linked to the copy's library"
done
[ -z "$upstream" ] && echo "moved: note upstream's allgather_test_standalone.cu not found (MSCCLPP_UPSTREAM_DIR, shared/upstream, ../shared/upstream, ../../shared/upstream): not built"
exit $status
