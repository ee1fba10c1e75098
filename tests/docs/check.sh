#!/usr/bin/env bash
# check.sh [BUILD_DIR]: the docs do what they say. Blocks are marked for it by
# an HTML comment on the line before their fence (invisible when rendered):
#
#   <!-- docs-check: file NAME -->   the block is the file NAME (written where
#                                    the reader is at that point)
#   <!-- docs-check: run -->         a shell block safe to run as it stands
#   <!-- docs-check: output -->      lines the run block before it prints (each
#                                    must be a whole line of its output)
#
# Cases, one PASS/FAIL line each, then "N passed, M failed, K skipped":
#   docs-programs-PAGE  every file block named *.c, *.cc or *.cpp compiles and
#                       links against BUILD_DIR through pkg-config with -Wall
#                       -Wextra -Werror (one that says USE_MPI also with mpicc
#                       -DUSE_MPI, where mpicc is installed)
#   docs-run-PAGE       the page's file and run blocks in order, as one bash -e
#                       script from the repository root, with HOME a fresh
#                       directory (README.md first: from `make` to a running
#                       program; the pages after it start from where README
#                       left the reader: PKG_CONFIG_PATH and PATH at the
#                       install under that HOME), and every output block found;
#                       SKIP when the page uses cmake, mpicc or mpirun and
#                       this machine has none
#   bench-render-*      docs/PERFORMANCE.md's table is rendered from
#                       docs/bench-results.tsv (tests/c/bench/render_check.sh)
#   docs-log-lines      every sample log line's "file.go:N" / "file.c:N" is a line
#                       of that file making a log call
# The paths the pages name are checked by tests/go/docpaths_test.go, and
# docs/ENVIRONMENT.md against the code by tests/go/envdoc_test.go.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
out=$build/tests/docs
rm -rf "$out"
mkdir -p "$out/home" || exit 1
passed=0 failed=0 skipped=0
# each case's line carries its time: since the last case's line (the cases run one after another)
mark=$(date +%s.%N)
took() { awk -v a="$mark" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
pass() {
  passed=$((passed + 1))
  echo "PASS $1  ($(took) s)"
  mark=$(date +%s.%N)
}
fail() {
  failed=$((failed + 1))
  echo "FAIL $1  ($(took) s)"
  mark=$(date +%s.%N)
  [ -f "${2:-}" ] && sed 's/^/    /' "$2" | tail -n 60
}
skip() {
  skipped=$((skipped + 1))
  echo "SKIP $1: $2"
  mark=$(date +%s.%N)
}

pages=(README.md docs/*.md tools/*/README.md)
cd "$root" || exit 1

# blocks PAGE: the page's marked blocks as lines "KIND ARG" then the block's
# lines prefixed with "|", then "END"
blocks() {
  awk '
    /^<!-- docs-check: [a-z]+( [^ ]+)? -->$/ { kind = $3; arg = ($4 == "-->") ? "" : $4; next }
    kind != "" && !inside && /^```/ { inside = 1; print kind " " arg; next }
    inside && /^```/ { inside = 0; kind = ""; print "END"; next }
    inside { print "|" $0 }
  ' "$1"
}

# script PAGE: the page as one bash script; run block k writes its output to
# $DOCS_OUT/k.out, an output block checks the last one
script() {
  local kind arg line step=0
  echo 'set -e'
  echo 'trap '\''s=$?; [ $s -ne 0 ] && [ -f "$DOCS_OUT/last" ] && { echo "-- the block exited $s:"; cat "$DOCS_OUT/$(cat "$DOCS_OUT/last").out"; }'\'' EXIT'
  while IFS= read -r line; do
    case $line in
      "file "*) echo "cat >'${line#file }' <<'DOCS_CHECK_EOF'" ;;
      "run "*)
        step=$((step + 1))
        echo "echo $step >\"\$DOCS_OUT/last\"; echo '== block $step'"
        echo '{'
        ;;
      "output "*) echo "docs_expect \"\$DOCS_OUT/$step.out\" <<'DOCS_CHECK_EOF'" ;;
      END)
        if [ "$kind" = run ]; then echo "} >\"\$DOCS_OUT/$step.out\" 2>&1; cat \"\$DOCS_OUT/$step.out\""; else echo DOCS_CHECK_EOF; fi
        kind=
        continue
        ;;
      \|*) echo "${line#|}"; continue ;;
    esac
    kind=${line%% *}
  done < <(blocks "$1")
}

# docs_expect OUT < LINES: every line is a whole line of OUT (for the scripts)
docs_expect() {
  local want ok=0
  while IFS= read -r want; do
    if ! grep -qxF -- "$want" "$1"; then echo "-- the output of the block has no line '$want'"; ok=1; fi
  done
  return $ok
}
export -f docs_expect

# ---- docs-programs-PAGE ----
export PKG_CONFIG_PATH=$build/lib/pkgconfig
cflags=$(pkg-config --cflags mscclpp) libs=$(pkg-config --libs mscclpp) || exit 1
# each compile (-c) through the compile cache (tests/c/compile-cache.sh), each link every time
. "$root/tests/c/compile-cache.sh"
for page in "${pages[@]}"; do
  name=docs-programs-$(basename "$page" .md | tr 'A-Z/' 'a-z-')
  [ "$page" = "${page#tools/}" ] || name=docs-programs-$(dirname "$page" | tr '/' '-')
  dir=$out/programs/$name log=$out/$name.log n=0 ok=1
  mkdir -p "$dir"
  : >"$log"
  file=
  while IFS= read -r line; do
    case $line in
      "file "*) file=${line#file }; : >"$dir/$file" ;;
      END) file= ;;
      \|*) [ -n "$file" ] && printf '%s\n' "${line#|}" >>"$dir/$file" ;;
      *) file= ;;
    esac
  done < <(blocks "$page")
  for src in "$dir"/*.c "$dir"/*.cc "$dir"/*.cpp; do
    [ -f "$src" ] || continue
    n=$((n + 1))
    case $src in
      *.c) cmd=(cc -std=c11) mpi=(mpicc -std=c11) ;;
      *) cmd=(c++ -std=c++17) mpi=(mpicxx -std=c++17) ;;
    esac
    echo "== ${cmd[*]} $(basename "$src")" >>"$log"
    # shellcheck disable=SC2086
    cc_program "${cmd[0]}" "${src%.*}" "${cmd[1]}" -Wall -Wextra -Werror $cflags "$src" $libs -pthread >>"$log" 2>&1 || ok=0
    if grep -q USE_MPI "$src"; then
      if ! command -v "${mpi[0]}" >/dev/null; then
        echo "-- ${mpi[0]} not found (make deps installs Open MPI): -DUSE_MPI not compiled" >>"$log"
      else
        echo "== ${mpi[*]} -DUSE_MPI $(basename "$src")" >>"$log"
        "${mpi[@]}" -DUSE_MPI -Wall -Wextra -Werror $cflags "$src" $libs -o "${src%.*}_mpi" >>"$log" 2>&1 || ok=0
      fi
    fi
  done
  [ $n -eq 0 ] && continue
  if [ $ok = 1 ]; then pass "$name"; else fail "$name" "$log"; fi
done

# ---- docs-log-lines ----
# a sample log line's "file.go:N MSCCLPP" or "file.c:N MSCCLPP" names a line of a file of that
# name in the repository that makes a log call (the line a reader would look up)
log=$out/docs-log-lines.log n=0 ok=1
: >"$log"
while IFS=: read -r page f line; do
  n=$((n + 1))
  hit=0
  while IFS= read -r src; do
    sed -n "${line}p" "$src" | grep -Eq 'Alertf|Warnf|Infof|Tracef|Malformed|Versionf|toolWarn|WARN|INFO' && hit=1
  done < <(git ls-files "*/$f" "$f")
  if [ $hit = 0 ]; then
    echo "-- $page: a sample log line cites $f:$line, which makes no log call (the source moved?)" >>"$log"
    ok=0
  fi
done < <(grep -oE '[A-Za-z_]+\.(go|c):[0-9]+ MSCCLPP' "${pages[@]}" | sed -E 's/:([0-9]+) MSCCLPP$/:\1/')
if [ $n -eq 0 ]; then skip docs-log-lines "no sample log line cites a source line"
elif [ $ok = 1 ]; then pass docs-log-lines; else fail docs-log-lines "$log"; fi

# ---- docs-run-PAGE ----
# the reader's environment: a fresh HOME, no make of ours around it, Go's caches where they were (no
# download, no rebuild); nothing lets root run mpirun that the pages' commands do not say
gocache=$(go env GOCACHE 2>/dev/null) gomod=$(go env GOMODCACHE 2>/dev/null) gopath=$(go env GOPATH 2>/dev/null)
for page in "${pages[@]}"; do
  grep -q '^<!-- docs-check: run -->$' "$page" || continue
  name=docs-run-$(basename "$page" .md | tr 'A-Z' 'a-z')
  [ "$page" = "${page#tools/}" ] || name=docs-run-$(dirname "$page" | tr '/' '-')
  log=$out/$name.log sh=$out/$name.sh
  mkdir -p "$out/$name"
  script "$page" >"$sh"
  # a tool the page uses and this machine lacks: SKIP with the reason (make
  # deps installs them; CI fails on this skip, as on any missing tool)
  missing=
  for tool in cmake mpicc mpirun; do
    if grep -qw "$tool" "$sh" && ! command -v "$tool" >/dev/null; then missing="$missing $tool"; fi
  done
  if [ -n "$missing" ]; then
    skip "$name" "not found:$missing (make deps installs cmake and Open MPI)"
    continue
  fi
  extra=()
  if [ "$page" != README.md ]; then
    extra=("PKG_CONFIG_PATH=$out/home/mscclpp/lib/pkgconfig" "PATH=$out/home/mscclpp/bin:$PATH")
  fi
  if env -u PKG_CONFIG_PATH -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
    -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -u OMPI_MCA_rmaps_base_oversubscribe \
    HOME="$out/home" GOCACHE="$gocache" GOMODCACHE="$gomod" GOPATH="$gopath" \
    DOCS_OUT="$out/$name" ${extra[@]+"${extra[@]}"} timeout -k 5 300 bash "$sh" >"$log" 2>&1; then
    pass "$name"
  else
    echo "-- exit $? (the script: $sh)" >>"$log"
    fail "$name" "$log"
  fi
done

# ---- bench-render-*: docs/PERFORMANCE.md's table, rendered from a make bench results file ----
while IFS= read -r line; do
  echo "$line"
  case $line in PASS\ *) passed=$((passed + 1)) ;; FAIL\ *) failed=$((failed + 1)) ;; esac
done < <(bash "$root/tests/c/bench/render_check.sh" "$out/bench-render")

echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
