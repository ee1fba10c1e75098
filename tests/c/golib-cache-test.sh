#!/usr/bin/env bash
# golib-cache-test.sh: tools/build/golib-cache.sh does what it says, with a stand-in go (its
# version and env) and a build command that counts its runs, in two copies of a tree at
# different paths and a cache of its own: a second build of the same tree, also from the other
# copy, is a hit (no build, the same output); a changed source, go.mod or Go environment misses
# and builds again; a changed test file does not; a failed build fails and is not kept;
# MSCCLPP_LIB_CACHE=off builds every time and keeps nothing; at most 16 entries stay.
# Prints "ok   ..." per check, "FAIL ..." for each failed one; exit status 1 when one failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/checks.sh"
checks_init golibtest GOLIBTEST_KEEP

# the stand-in go: its version, its environment (the tree's go.mod by its path, as go env
# names it, and a flag from the environment), CC
cat >"$tmp/fakego" <<'EOF'
#!/usr/bin/env bash
case "$*" in
  version) echo "go version go0.0-fake linux/amd64" ;;
  "env CC") echo gcc ;;
  env) printf "CC='gcc'\nCGO_CFLAGS='%s'\nGOGCCFLAGS='-ffile-prefix-map=/tmp/go-build%s=/tmp/go-build'\nGOMOD='%s/go.mod'\n" \
    "${CGO_CFLAGS:-}" "$RANDOM" "$PWD" ;;
  *) exit 2 ;;
esac
EOF
chmod +x "$tmp/fakego"
export GO=$tmp/fakego MSCCLPP_CACHE_DIR=$tmp/cache BUILDS=$tmp/builds
unset MSCCLPP_LIB_CACHE
for t in tree1 tree2; do
  mkdir -p "$tmp/$t/tools/build" "$tmp/$t/impl" "$tmp/$t/capi"
  cp "$root/tools/build/golib-cache.sh" "$tmp/$t/tools/build/"
  printf 'module x\n' >"$tmp/$t/go.mod"
  : >"$tmp/$t/go.sum"
  printf 'package impl // v1\n' >"$tmp/$t/impl/impl.go"
  printf 'package impl // test\n' >"$tmp/$t/impl/impl_test.go"
done
builds() { if [ -f "$BUILDS" ]; then wc -l <"$BUILDS"; else echo 0; fi; }
entries() { find "$tmp/cache/golib" -name done 2>/dev/null | wc -l; }
# build TREE [FAIL]: golib-cache.sh in TREE over a command that "builds" lib.so from impl.go
build() {
  (cd "$tmp/$1" && bash tools/build/golib-cache.sh lib.so -- \
    bash -c 'echo build >>"$BUILDS"; [ -z "$1" ] || exit 3; cat impl/impl.go >lib.so' build "${2:-}") >"$tmp/out" 2>&1
}

build tree1
check "a first build runs the command and keeps its output" [ "$(builds)" = 1 -a "$(entries)" = 1 -a "$(cat "$tmp/tree1/lib.so")" = "package impl // v1" ]
rm -f "$tmp/tree1/lib.so"
build tree1
check "the same build again is a hit (no build), its output the same" [ "$(builds)" = 1 -a "$(cat "$tmp/tree1/lib.so")" = "package impl // v1" ]
build tree2
check "a copy of the tree at another path is a hit" [ "$(builds)" = 1 -a "$(cat "$tmp/tree2/lib.so")" = "package impl // v1" ]
printf 'package impl // test changed\n' >"$tmp/tree2/impl/impl_test.go"
build tree2
check "a changed test file is no input (a hit)" [ "$(builds)" = 1 ]
printf 'package impl // v2\n' >"$tmp/tree2/impl/impl.go"
build tree2
check "a changed source misses and builds it" [ "$(builds)" = 2 -a "$(cat "$tmp/tree2/lib.so")" = "package impl // v2" ]
printf 'module x\ngo 1.22\n' >"$tmp/tree1/go.mod"
build tree1
check "a changed go.mod misses" [ "$(builds)" = 3 ]
CGO_CFLAGS=-O1 build tree1
check "a changed Go environment misses" [ "$(builds)" = 4 ]
n=$(entries)
build tree1 fail
rc1=$?
build tree1 fail
check "a failed build fails, and is not kept (built both times)" [ "$rc1" != 0 -a "$(builds)" = 6 -a "$(entries)" = "$n" ]
MSCCLPP_LIB_CACHE=off build tree1
MSCCLPP_LIB_CACHE=off build tree1
check "MSCCLPP_LIB_CACHE=off builds every time and keeps nothing" [ "$(builds)" = 8 -a "$(entries)" = "$n" ]
for i in $(seq 1 20); do
  mkdir -p "$tmp/cache/golib/old$i" && : >"$tmp/cache/golib/old$i/done" && touch -d '2 days ago' "$tmp/cache/golib/old$i"
done
n=$(builds)
recent() { find "$tmp/cache/golib" -mindepth 1 -maxdepth 1 -type d ! -name '.*' ! -name 'old*' | wc -l; }
r=$(recent)
build tree2
check "at most 16 entries are kept, those used last (the recent ones; a hit stays one)" \
  [ "$(find "$tmp/cache/golib" -mindepth 1 -maxdepth 1 -type d ! -name '.*' | wc -l)" = 16 -a "$(recent)" = "$r" -a "$(builds)" = "$n" ]
exit $status
