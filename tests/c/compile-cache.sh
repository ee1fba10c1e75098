# compile-cache.sh: sourced (bash) by the test scripts that compile: a content-addressed cache
# of what nvcc, cuobjdump and the C/C++ compiler (gcc, g++, cc, c++) made, like Go's build
# cache, so that a second run over the same input costs no compile. A result is found again
# only when the same compiler (TOOL --version; for nvcc also the host gcc and g++ it runs) saw
# the same flags and the same input: the content of every file the compile read (TOOL -M's
# list: the source, our headers, CUDA's and the system's; the list an earlier -M made serves while
# every file on it is unchanged: see cache_deps). A hit replays the tool's output file
# and messages; what a check then asserts about them runs every time, and every program is
# still linked for real (cc_program), so a symbol the library stopped exporting fails the link.
# Only successes are kept: a failure runs again next time. Two scripts making the same compile
# at once make it once (the second waits for the first's result).
#
# Paths: nvcc's key holds none (a build/ moved to another path finds its objects again).
# A C/C++ compile runs with -ffile-prefix-map=ROOT=. (ROOT: this clone), so its object names
# no file of the clone by its absolute path (debug info, __FILE__), and its key holds each
# file's path as the object names it (under ROOT: relative; elsewhere: as it is) and the
# working directory: a fresh clone at another path finds its objects; a file read from another
# place outside the clone misses.
#
# Where: $MSCCLPP_CACHE_DIR/{nvcc,cc}, default ${XDG_CACHE_HOME:-$HOME/.cache}/mscclpp/{nvcc,cc}
# (outside the clone, so a fresh clone finds it). MSCCLPP_NVCC_CACHE=off runs nvcc and cuobjdump,
# MSCCLPP_CC_CACHE=off the C/C++ compiler, every time, reading and writing nothing. Entries not
# used for 30 days are removed (looked for at most once a day); removing the directory clears it.
#
#   nvcc_cached NVCC ARGS...       nvcc ARGS (with -o OUT), or its cached result
#   cuobjdump_cached TOOL ARGS...  TOOL ARGS whose result is its standard output
#   cc_cached CC ARGS...           CC ARGS (with -c and -o OUT), or its cached result
#   cc_program CC OUT ARGS...      CC ARGS -o OUT (one source among ARGS, linking flags too):
#                                  the source compiled through cc_cached to OUT.o, then linked
#   cc_test_program DIR NAME SRC [ARGS...]
#                                  a program of the data-path suites (transports and multinode
#                                  build the same ones, alike): SRC as C11 with gcc (.cc: C++17
#                                  with g++), -O2 -g -Wall -Wextra -pthread, then ARGS, through
#                                  cc_program into DIR/NAME; its messages in DIR/build-NAME.log,
#                                  DIR/built-NAME made when it built
#   compile_slot                   waits until fewer background jobs of this shell run than
#                                  there are CPUs: the room of a pool of builds run in parallel
#   cache_place NAME DIR           a manifest names DIR as @NAME@/ (as it names the clone's root
#                                  @ROOT@/): a script whose compiles read from a directory that
#                                  moves between runs (a build/ copied elsewhere, a temporary
#                                  output directory) finds its manifests there again
compile_cache_base=${MSCCLPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mscclpp}
# (this file is sourced some 35 times in a make test, often by a fresh bash: what it runs when
# sourced forks little; each fork and exec costs 6-9 ms of CPU on a small VM)
compile_cache_root=${BASH_SOURCE[0]%/*}
[ "$compile_cache_root" = "${BASH_SOURCE[0]}" ] && compile_cache_root=.
compile_cache_root=$(cd "$compile_cache_root/../.." && pwd)
nvcc_cache_dir=$compile_cache_base/nvcc
cc_cache_dir=$compile_cache_base/cc
nvcc_cache_on=1
cc_cache_on=1
[ "${MSCCLPP_NVCC_CACHE:-on}" = off ] && nvcc_cache_on=0
[ "${MSCCLPP_CC_CACHE:-on}" = off ] && cc_cache_on=0
# cache_prune DIR: entries (and manifests) of DIR not used for 30 days are removed; the walk over
# DIR runs at most once a day (DIR/.pruned holds when it last ran)
cache_prune() {
  local last=0
  { read -r last <"$1/.pruned"; } 2>/dev/null
  case $last in '' | *[!0-9]*) last=0 ;; esac
  [ $((EPOCHSECONDS - last)) -lt 86400 ] && return 0
  find "$1" -mindepth 2 -maxdepth 2 \( -type d -o -name '*.manifest' \) -mtime +30 -exec rm -rf {} + 2>/dev/null
  echo "$EPOCHSECONDS" >"$1/.pruned" 2>/dev/null
  return 0
}
if [ $nvcc_cache_on = 1 ]; then
  { [ -d "$nvcc_cache_dir" ] || mkdir -p "$nvcc_cache_dir" 2>/dev/null; } || nvcc_cache_on=0
  [ $nvcc_cache_on = 1 ] && cache_prune "$nvcc_cache_dir"
fi
if [ $cc_cache_on = 1 ]; then
  { [ -d "$cc_cache_dir" ] || mkdir -p "$cc_cache_dir" 2>/dev/null; } || cc_cache_on=0
  [ $cc_cache_on = 1 ] && cache_prune "$cc_cache_dir"
fi
declare -A compile_cache_ids=() # the identity of each tool, by path: cache_tool_init fills it
# the directories a manifest names by a token, pairs of TOKEN and path, the latest cache_place
# first (a directory inside another is replaced before it)
compile_cache_places=("@ROOT@" "$compile_cache_root")
cache_place() { compile_cache_places=("@$1@" "$(cd "$2" && pwd)" "${compile_cache_places[@]}"); }

# cache_tokens TEXT: TEXT with each place's path written as its token where a slash, a blank or
# a line's end follows it; cache_paths TEXT: the reverse
cache_tokens() { cache_subst "$1" 1 0; }
cache_paths() { cache_subst "$1" 0 1; }
cache_subst() {
  local t=$1$'\n' i from to e
  for ((i = 0; i < ${#compile_cache_places[@]}; i += 2)); do
    from=${compile_cache_places[i + $2]} to=${compile_cache_places[i + $3]}
    for e in / ' ' $'\n'; do t=${t//"$from$e"/$to$e}; done
  done
  printf '%s' "$t"
}
compile_jobs_max= # (asked of nproc at the first compile_slot: most scripts that source this need none)
compile_slot() {
  [ -n "$compile_jobs_max" ] || compile_jobs_max=$(nproc 2>/dev/null || echo 2)
  while [ "$(jobs -rp | wc -l)" -ge "$compile_jobs_max" ]; do wait -n; done
}

# cache_tool_init TOOL: notes its version, and for nvcc that of the host compilers it runs
# (in this shell, before the key's subshell, so each tool is asked once)
cache_tool_init() {
  local t=$1 id p
  [ -n "${compile_cache_ids[$t]:-}" ] && return
  id=$("$t" --version 2>&1)
  if [ "${t##*/}" = nvcc ]; then
    # the PATH nvcc runs gcc and g++ with (its profile may put its own wrappers first)
    p=$("$t" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ PATH=//p' | head -n 1)
    id=$id$'\n'$(PATH=${p:-$PATH} gcc --version 2>&1 | head -n 1)$'\n'$(PATH=${p:-$PATH} g++ --version 2>&1 | head -n 1)
  fi
  compile_cache_ids[$t]=$id
}

# cache_args MODE ARGS...: the arguments as the key sees them: a file by its content (MODE
# path: and its path), -o and -I without their path (the files read through -I are in the
# dependency list)
cache_args() {
  local mode=$1 a skip=0 h
  shift
  for a in "$@"; do
    if [ $skip = 1 ]; then skip=0; continue; fi
    case $a in
      -o|-I) echo "$a"; skip=1 ;;
      -I*) echo "-I" ;;
      *) if [ -f "$a" ]; then
           read -r h _ < <(sha256sum <"$a")
           echo "file $h"
           [ "$mode" = path ] && echo "path $a"
         else
           echo "arg $a"
         fi ;;
    esac
  done
}

# cache_deps MODE MANIFEST TOOL ARGS...: the key's lines for the files the compile reads, each
# by its content (MODE path: and its path). When MANIFEST (written by an earlier call: each file
# an earlier TOOL -M listed, with its sha256) still matches every file it lists, they come from
# it and TOOL -M does not run (ccache's direct mode; like it, a header added where the compile
# would now find it first goes unseen until a listed file changes). Else TOOL -M ARGS lists them
# (every path after the target's colon), and MANIFEST is written again. The clone's root is
# kept in MANIFEST as @ROOT@/ (and each cache_place as its token), so a clone at another path
# checks its own files. Status 1 when -M fails.
cache_deps() {
  local mode=$1 m=$2 deps files sums="" tmp
  shift 2
  if [ -s "$m" ]; then
    sums=$(cache_paths "$(<"$m")")
    sha256sum --check --status <<<"$sums" 2>/dev/null || sums=""
  fi
  if [ -z "$sums" ]; then
    deps=$("$@" 2>/dev/null) || return 1
    deps=${deps#*:}
    read -r -d '' -a files <<<"${deps//\\$'\n'/ }" || true
    if sums=$(sha256sum "${files[@]}" 2>&1) && mkdir -p "${m%/*}" 2>/dev/null &&
      tmp=$(mktemp "$m.XXXXXX" 2>/dev/null); then
      cache_tokens "$sums" >"$tmp" && mv -f "$tmp" "$m" || rm -f "$tmp"
    fi
  fi
  if [ "$mode" = path ]; then
    printf '%s\n' "$sums"
  else
    printf '%s\n' "$sums" | cut -d' ' -f1
  fi
}

# cache_manifest DIR TEXT ARGS...: the path of the manifest of the compile whose key, less its
# files, is TEXT, with ARGS (cache_margs: less the output) as they are but for the places'
# tokens (-I's paths say where the files are looked for) and the compiler's own search path
# variables
cache_manifest() {
  local k dir=$1 text=$2
  shift 2
  k=$(cache_key "$(cache_tokens "$text
argv $(printf '%q ' "$@")
env ${CPATH:-} ${C_INCLUDE_PATH:-} ${CPLUS_INCLUDE_PATH:-}")")
  echo "$dir/${k:0:2}/$k.manifest"
}

# cache_key TEXT: prints the key of TEXT (the clone's root in it as the object names it: .)
cache_key() {
  local text=$1 key
  read -r key _ < <(sha256sum <<<"${text//"$compile_cache_root/"/./}")
  echo "$key"
}

# cache_lookup DIR KEY OUT: a hit copies the output into OUT (-: standard output, the tool's
# messages then to standard error) and prints the tool's messages; status 1 on a miss
cache_lookup() {
  local e=$1/${2:0:2}/$2
  [ -f "$e/done" ] || return 1
  if [ "$3" = - ]; then
    cat "$e/out" || return 1
    cat "$e/log" >&2
  else
    cp "$e/out" "$3" || return 1
    [ -s "$e/log" ] && cat "$e/log"
  fi
  touch "$e" 2>/dev/null
  return 0
}

# cache_store DIR KEY OUT LOG: keep OUT and LOG under KEY (written aside, then renamed into place)
cache_store() {
  local d=$1/${2:0:2} tmp
  mkdir -p "$d" 2>/dev/null || return 0
  tmp=$(mktemp -d "$d/.new.XXXXXX" 2>/dev/null) || return 0
  if cp "$3" "$tmp/out" && cp "$4" "$tmp/log" && : >"$tmp/done" && mv -T "$tmp" "$d/$2" 2>/dev/null; then
    return 0
  fi
  rm -rf "$tmp"
}

# cache_run DIR KEY OUT TOOL ARGS...: the cached result under KEY, else TOOL ARGS run (its
# messages printed) and, when it succeeds, kept; a miss runs one at a time per KEY (a lock file
# beside it: who waited finds the result of who ran)
cache_run() {
  local dir=$1 key=$2 out=$3 lock fd="" tmp="" rc
  shift 3
  cache_lookup "$dir" "$key" "$out" && return 0
  [ -d "$dir/${key:0:2}" ] || mkdir -p "$dir/${key:0:2}" 2>/dev/null
  lock=$dir/${key:0:2}/$key.lock
  if { exec {fd}>"$lock"; } 2>/dev/null && ! flock "$fd" 2>/dev/null; then
    exec {fd}>&-
    fd=""
  fi
  if cache_lookup "$dir" "$key" "$out"; then
    rc=0
  elif ! tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-compile.XXXXXX"); then
    "$@" && rc=0 || rc=$?
  elif [ "$out" = - ]; then
    "$@" >"$tmp/out" 2>"$tmp/log" && rc=0 || rc=$?
    cat "$tmp/out"
    cat "$tmp/log" >&2
    [ $rc = 0 ] && cache_store "$dir" "$key" "$tmp/out" "$tmp/log"
  else
    "$@" >"$tmp/log" 2>&1 && rc=0 || rc=$?
    cat "$tmp/log"
    [ $rc = 0 ] && cache_store "$dir" "$key" "$out" "$tmp/log"
  fi
  [ -n "$tmp" ] && rm -rf "$tmp"
  if [ -n "$fd" ]; then
    rm -f "$lock"
    exec {fd}>&-
  fi
  return $rc
}

# cache_parse ARGS...: sets cache_out (the argument after -o), cache_mode (1 when -c, -cubin
# or -ptx is among ARGS) and cache_margs (ARGS less -o OUT and those modes: what -M is given)
cache_parse() {
  local a prev=""
  cache_out="" cache_mode=0 cache_margs=()
  for a in "$@"; do
    case $prev:$a in
      -o:*) cache_out=$a ;;
      *:-o) ;;
      *:-c|*:-cubin|*:-ptx) cache_mode=1 ;;
      *) cache_margs+=("$a") ;;
    esac
    prev=$a
  done
}

nvcc_cached() {
  local nvcc=$1 deps key args
  shift
  cache_parse "$@"
  if [ $nvcc_cache_on = 0 ] || [ -z "$cache_out" ]; then "$nvcc" "$@"; return; fi
  cache_tool_init "$nvcc"
  # the files this compile reads: nvcc -M with the same flags, less the output and the mode
  args=$(cache_args content "$@")
  deps=$(cache_deps content "$(cache_manifest "$nvcc_cache_dir" "nvcc
${compile_cache_ids[$nvcc]}
cwd $PWD/
$args" "${cache_margs[@]}")" "$nvcc" -M "${cache_margs[@]}") || { "$nvcc" "$@"; return; }
  key=$({ printf '%s\n' "${compile_cache_ids[$nvcc]}"; printf '%s\n' "$args"; printf '%s\n' "$deps"; } |
    sha256sum | cut -d' ' -f1)
  cache_run "$nvcc_cache_dir" "$key" "$cache_out" "$nvcc" "$@"
}

cuobjdump_cached() {
  local tool=$1 key
  shift
  if [ $nvcc_cache_on = 0 ]; then "$tool" "$@"; return; fi
  cache_tool_init "$tool"
  key=$({ printf '%s\n' "${compile_cache_ids[$tool]}"; cache_args content "$@"; } | sha256sum | cut -d' ' -f1)
  cache_run "$nvcc_cache_dir" "$key" - "$tool" "$@"
}

cc_cached() {
  local cc=$1 deps key map args
  shift
  cache_parse "$@"
  map=-ffile-prefix-map=$compile_cache_root=.
  if [ $cc_cache_on = 0 ] || [ -z "$cache_out" ] || [ $cache_mode = 0 ]; then "$cc" "$map" "$@"; return; fi
  cache_tool_init "$cc"
  args="cc
${compile_cache_ids[$cc]}
cwd $PWD/
$(cache_args path "$@")"
  deps=$(cache_deps path "$(cache_manifest "$cc_cache_dir" "$args" "${cache_margs[@]}")" "$cc" -M "${cache_margs[@]}") ||
    { "$cc" "$map" "$@"; return; }
  key=$(cache_key "$args
$deps")
  cache_run "$cc_cache_dir" "$key" "$cache_out" "$cc" "$map" "$@"
}

cc_test_program() {
  local dir=$1 name=$2 src=$3 cc=(gcc -std=c11)
  shift 3
  case $src in *.cc) cc=(g++ -std=c++17) ;; esac
  if cc_program "${cc[0]}" "$dir/$name" "${cc[1]}" -O2 -g -Wall -Wextra -pthread "$src" "$@" >"$dir/build-$name.log" 2>&1; then
    : >"$dir/built-$name"
  fi
}

cc_program() {
  local cc=$1 out=$2 a src="" args=()
  shift 2
  for a in "$@"; do
    case $a in
      *.c|*.cc|*.cpp) if [ -z "$src" ] && [ -f "$a" ]; then src=$a; args+=("$out.o"); continue; fi ;;
    esac
    args+=("$a")
  done
  if [ -z "$src" ]; then "$cc" "$@" -o "$out"; return; fi
  cc_cached "$cc" "$@" -c -o "$out.o" && "$cc" "${args[@]}" -o "$out"
}
