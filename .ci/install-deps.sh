#!/usr/bin/env bash
# install-deps.sh [--strict]: the Debian packages the tests need, installed
# when missing, so that no check skips for a missing tool (make test, .ci/run).
#
#   cmake                         the find_package(mscclpp) case
#   libibverbs-dev ibverbs-providers   ib/ibvapi.h against verbs.h, the real libibverbs
#   openmpi-bin libopenmpi-dev    perf under mpirun, make bench's references
#   libucx-dev ucx-utils          make bench's UCX references (ucx_ref.c), ucx_info
#   libpmix-dev libpmi2-0 slurm-wlm munge perf's launcher key-value store, the Slurm case
#   iproute2                      the simulated nodes of tests/multinode
#   nvidia-cuda-toolkit nvidia-cuda-dev   nvcc, cuda.h/nvml.h, Debian's libcuda
#                                 (non-free: the script adds that section)
#
# Quick when everything is there: one dpkg-query, no apt-get. Otherwise, as
# root (or through `sudo -n`), it adds Debian's contrib and non-free sections
# as /etc/apt/sources.list.d/mscclpp-non-free.sources (same host and suites as
# the main Debian source; only when no source has non-free yet), runs
# apt-get update once and installs the missing packages with
# --no-install-recommends (which keeps the NVIDIA kernel-module build out).
# Without root it lists what is missing and exits 0, or 1 with --strict (CI).
set -u

pkgs=(cmake libibverbs-dev ibverbs-providers openmpi-bin libopenmpi-dev libucx-dev ucx-utils libpmix-dev libpmi2-0 slurm-wlm munge
  iproute2 nvidia-cuda-toolkit nvidia-cuda-dev)
strict=0
[ "${1:-}" = --strict ] && strict=1

missing=()
while read -r name status; do
  [ "$status" = installed ] || missing+=("$name")
done < <(for p in "${pkgs[@]}"; do
  s=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) || s=absent
  echo "$p ${s:-absent}"
done)

if [ ${#missing[@]} -eq 0 ]; then
  echo "# deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "# deps: missing ${missing[*]}"

if ! command -v apt-get >/dev/null 2>&1; then
  echo "# deps: no apt-get here: install them by hand"
  exit $strict
fi
as_root=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    echo "# deps: not root (and no password-less sudo): run 'sudo $0' to install them; their checks will skip"
    exit $strict
  fi
fi

# non_free_enabled: some apt source already carries Debian's non-free section
non_free_enabled() {
  grep -Eqs '^[[:space:]]*Components:.*[[:space:]]non-free([[:space:]]|$)' /etc/apt/sources.list.d/*.sources ||
    grep -Eqs '^[[:space:]]*deb[[:space:]].*debian.*[[:space:]]non-free([[:space:]]|$)' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list
}

# add_non_free: a deb822 source for the host and suites of the main Debian
# source (debian.sources; not the security archive), contrib and non-free
add_non_free() {
  local src=/etc/apt/sources.list.d/debian.sources dst=/etc/apt/sources.list.d/mscclpp-non-free.sources
  local uri suites
  uri=$(awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }' "$src" 2>/dev/null)
  suites=$(awk -v u="$uri" '/^URIs:/ { cur = $2 } /^Suites:/ && cur == u { $1 = ""; sub(/^ /, ""); print; exit }' \
    "$src" 2>/dev/null)
  if [ -z "$uri" ] || [ -z "$suites" ]; then
    uri=http://deb.debian.org/debian
    suites="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
    suites="$suites $suites-updates"
  fi
  echo "# deps: adding $dst ($uri $suites: contrib non-free)"
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: contrib non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" "$suites" | "${as_root[@]}" tee "$dst.tmp" >/dev/null &&
    "${as_root[@]}" mv -f "$dst.tmp" "$dst"
}

non_free_enabled || add_non_free || exit 1
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/mscclpp-deps.XXXXXX.log)
echo "# deps: apt-get update && apt-get install --no-install-recommends ${missing[*]} (log: $log)"
if "${as_root[@]}" apt-get -o DPkg::Lock::Timeout=600 update -q >"$log" 2>&1 &&
  "${as_root[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
  echo "# deps: installed"
  exit 0
fi
tail -n 20 "$log"
echo "# deps: the install failed (log: $log)"
exit 1
