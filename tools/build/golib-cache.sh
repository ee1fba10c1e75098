#!/usr/bin/env bash
# golib-cache.sh OUT -- COMMAND...: runs COMMAND (the Makefile's `go build -buildmode=c-shared`
# of the library into OUT), or copies OUT from an earlier run of the same build. Go's build
# cache does not serve a c-shared build: every cgo package's cgo step and C compiles run again
# each time (its export headers are not cached), so without this a fresh clone spends most of
# its `make` there. A result is found again only for the same COMMAND (the clone's path in it
# written as .), the same Go (go version, go env, the clone's path written as .), the same C
# compiler (its --version) and the same content of every file the build may read: go.mod,
# go.sum (the dependencies' hashes) and each file under capi, impl, cuda, ib and include but
# tests (*_test.go, testdata/), which Go leaves out of a build. COMMAND must not stamp what
# varies besides these into OUT (the Makefile builds with -buildvcs=false). Only a success is
# kept.
#
# Where: $MSCCLPP_CACHE_DIR/golib, default ${XDG_CACHE_HOME:-$HOME/.cache}/mscclpp/golib (beside
# tests/c/compile-cache.sh's); MSCCLPP_LIB_CACHE=off runs COMMAND every time, reading and writing
# nothing. Entries not used for 30 days are removed, and all but the 16 used last (a library is
# several MiB). GO names the go command (default go).
set -u
if [ $# -lt 3 ] || [ "$2" != -- ]; then
  echo "usage: golib-cache.sh OUT -- COMMAND..." >&2
  exit 2
fi
out=$1
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "${MSCCLPP_LIB_CACHE:-on}" = off ] && exec "$@"
dir=${MSCCLPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mscclpp}/golib
mkdir -p "$dir" 2>/dev/null || exec "$@"
find "$dir" -mindepth 1 -maxdepth 1 -type d -mtime +30 -exec rm -rf {} + 2>/dev/null || true
# (entries are named by their sha256 key: no blank or newline in a name)
ls -1t "$dir" 2>/dev/null | tail -n +17 | while read -r old; do rm -rf "${dir:?}/$old"; done

go=${GO:-go}
cc=$("$go" env CC 2>/dev/null)
key=$(cd "$root" && {
  printf 'command'
  printf ' %q' "$@"
  echo
  "$go" version
  "$go" env | sed 's|go-build[0-9]*|go-build|g' # (GOGCCFLAGS names a temporary directory)
  "${cc:-gcc}" --version 2>&1 | head -n 1
  find go.mod go.sum capi impl cuda ib include -type f ! -name '*_test.go' ! -path '*/testdata/*' 2>/dev/null |
    LC_ALL=C sort | xargs -d '\n' sha256sum
} | sed "s|$root/|./|g; s|$root|.|g" | sha256sum | cut -d' ' -f1)
e=$dir/$key
if [ -f "$e/done" ] && cp "$e/out" "$out.tmp" && mv -f "$out.tmp" "$out"; then
  touch "$e"
  echo "golib-cache: $out from an earlier build of the same sources, Go and flags ($e)"
  exit 0
fi
"$@" || exit
tmp=$(mktemp -d "$dir/.new.XXXXXX" 2>/dev/null) || exit 0
if cp "$out" "$tmp/out" && : >"$tmp/done" && mv -T "$tmp" "$e" 2>/dev/null; then
  exit 0
fi
rm -rf "$tmp"
exit 0
