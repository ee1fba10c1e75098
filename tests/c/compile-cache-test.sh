#!/usr/bin/env bash
# compile-cache-test.sh: the C/C++ side of compile-cache.sh (cc_cached, cc_program) does what it
# says, with a counting stand-in for gcc and a cache of its own: a second compile of the same
# input is a hit (no compile), and a changed header, flag or compiler version misses and builds
# the new program; two clones at different paths share their objects, and no object names the
# clone's path; a failure is not kept; the link is made every time (a symbol the library lost
# fails it after a hit); MSCCLPP_CC_CACHE=off compiles every time and keeps nothing; headers
# read from a directory named with cache_place are checked at its new place once it moved.
# Prints "ok   ..." per check, "FAIL ..." for each failed one; exit status 1 when one failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/checks.sh"
checks_init cctest CCTEST_KEEP

# the stand-in compiler: gcc, counting its compiles (-c) in $tmp/compiles; --version says
# $FAKE_CC_VERSION
cat >"$tmp/fakecc" <<'EOF'
#!/usr/bin/env bash
[ "${1:-}" = --version ] && { echo "fakecc ${FAKE_CC_VERSION:-1}"; exit 0; }
for a in "$@"; do [ "$a" = -c ] && echo compile >>"$FAKE_CC_COUNT"; [ "$a" = -M ] && echo deps >>"$FAKE_CC_DEPS"; done
exec gcc "$@"
EOF
chmod +x "$tmp/fakecc"
export FAKE_CC_COUNT=$tmp/compiles FAKE_CC_DEPS=$tmp/deps
export MSCCLPP_CACHE_DIR=$tmp/cache
unset MSCCLPP_CC_CACHE
compiles() { if [ -f "$FAKE_CC_COUNT" ]; then wc -l <"$FAKE_CC_COUNT"; else echo 0; fi; }
depruns() { if [ -f "$FAKE_CC_DEPS" ]; then wc -l <"$FAKE_CC_DEPS"; else echo 0; fi; }
entries() { find "$tmp/cache/cc" -name done 2>/dev/null | wc -l; }

# two "clones" of the repository, each with compile-cache.sh, a program and its header
for c in clone1 clone2; do
  mkdir -p "$tmp/$c/tests/c" "$tmp/$c/src"
  cp "$here/compile-cache.sh" "$tmp/$c/tests/c/"
  printf '#define GREETING "hello"\n' >"$tmp/$c/src/greet.h"
  printf '#include <stdio.h>\n#include "greet.h"\nextern int lib_answer(void);\nint main(void) { printf("%%s %%s %%d\\n", GREETING, __FILE__, lib_answer()); return 0; }\n' \
    >"$tmp/$c/src/prog.c"
done
printf 'int lib_answer(void) { return 42; }\n' >"$tmp/lib.c"
gcc -shared -fPIC -o "$tmp/libanswer.so" "$tmp/lib.c" || exit 1

# build CLONE [FLAGS...]: cc_program in CLONE (its compile-cache.sh sourced there) -> $tmp/out
build() {
  local c=$1
  shift
  (cd "$tmp/$c" && . tests/c/compile-cache.sh &&
    cc_program "$tmp/fakecc" "$tmp/$c/prog" -O1 -g -Wall "$@" "$tmp/$c/src/prog.c" -L"$tmp" -lanswer -Wl,-rpath,"$tmp") >"$tmp/out" 2>&1
}
run() { "$tmp/$1/prog" 2>&1; }

build clone1
check "a first compile runs the compiler and keeps the object" [ "$(compiles)" = 1 -a "$(entries)" = 1 ]
check "the program runs" [ "$(run clone1)" = "hello ./src/prog.c 42" ]
build clone1
check "the same compile again is a hit (no compile)" [ "$(compiles)" = 1 ]
check "a hit whose listed files are unchanged lists them from its manifest (no -M)" [ "$(depruns)" = 1 ]
check "the program from the hit runs the same" [ "$(run clone1)" = "hello ./src/prog.c 42" ]
build clone2
check "a clone at another path finds the object (a hit)" [ "$(compiles)" = 1 ]
check "a clone at another path checks its own files against the manifest (no -M)" [ "$(depruns)" = 1 ]
check "no object names the clone's path" [ -z "$(grep -l "$tmp/clone" "$tmp/clone1/prog.o" "$tmp/clone2/prog.o")" ]

printf '#define GREETING "changed"\n' >"$tmp/clone1/src/greet.h"
build clone1
check "a changed header misses" [ "$(compiles)" = 2 ]
check "a changed header makes -M list the files again" [ "$(depruns)" = 2 ]
check "the program has the changed header" [ "$(run clone1)" = "changed ./src/prog.c 42" ]
build clone1 -DUNUSED=1
check "a changed flag misses" [ "$(compiles)" = 3 ]
FAKE_CC_VERSION=2 build clone1 -DUNUSED=1
check "another compiler version misses" [ "$(compiles)" = 4 ]

printf '#define GREETING broken(\n' >"$tmp/clone1/src/greet.h"
build clone1
build clone1
check "a failed compile fails, and is not kept (the compiler ran both times)" [ "$(compiles)" = 6 -a "$(entries)" = 4 ]
check "a failed compile prints the compiler's error" grep -q 'greet.h' "$tmp/out"

printf 'int other(void) { return 1; }\n' >"$tmp/lib.c"
gcc -shared -fPIC -o "$tmp/libanswer.so" "$tmp/lib.c" || exit 1
build clone2
check "after a hit the link is made: a symbol the library lost fails it" [ "$(compiles)" = 6 -a -n "$(grep lib_answer "$tmp/out")" ]

printf 'int lib_answer(void) { return 42; }\n' >"$tmp/lib.c"
gcc -shared -fPIC -o "$tmp/libanswer.so" "$tmp/lib.c" || exit 1
n=$(entries)
MSCCLPP_CC_CACHE=off build clone2
MSCCLPP_CC_CACHE=off build clone2
check "MSCCLPP_CC_CACHE=off compiles every time and keeps nothing" [ "$(compiles)" = 8 -a "$(entries)" = "$n" ]
check "MSCCLPP_CC_CACHE=off builds the program" [ "$(run clone2)" = "hello ./src/prog.c 42" ]

# the manifest names the files under the clone that wrote it by their place in the clone: a
# clone whose own header changed lists its files again, while the other's still match
printf '#define GREETING "hello"\n' >"$tmp/clone1/src/greet.h"
build clone1
d=$(depruns)
printf '#define GREETING "second"\n' >"$tmp/clone2/src/greet.h"
build clone2
check "a clone's own changed header makes -M run, though the other clone's files match the manifest" \
  [ "$(depruns)" = $((d + 1)) -a "$(run clone2)" = "second ./src/prog.c 42" ]
# a header directory outside the clone, copied elsewhere between two builds (a build/ carried to
# another path): named with cache_place, the copy's files are checked against the manifest
# (no -M); a header changed in the copy lists the files again
mkdir -p "$tmp/inc1"
printf '#define WHO "place"\n' >"$tmp/inc1/who.h"
printf '#include <stdio.h>\n#include "who.h"\nint main(void) { puts(WHO); return 0; }\n' >"$tmp/clone1/src/who.c"
build_placed() { # INCDIR
  (cd "$tmp/clone1" && . tests/c/compile-cache.sh && cache_place INC "$1" &&
    cc_program "$tmp/fakecc" "$tmp/clone1/who" -O1 -I"$1" "$tmp/clone1/src/who.c") >"$tmp/out" 2>&1
}
build_placed "$tmp/inc1"
d=$(depruns)
cp -a "$tmp/inc1" "$tmp/inc2"
build_placed "$tmp/inc2"
check "a cache_place directory copied elsewhere is checked there against the manifest (no -M)" \
  [ "$(depruns)" = "$d" -a "$("$tmp/clone1/who")" = place ]
printf '#define WHO "moved"\n' >"$tmp/inc2/who.h"
build_placed "$tmp/inc2"
check "a header changed in the copied cache_place directory makes -M run" \
  [ "$(depruns)" = $((d + 1)) -a "$("$tmp/clone1/who")" = moved ]
exit $status
