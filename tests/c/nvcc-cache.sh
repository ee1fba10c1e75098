# nvcc-cache.sh: sourced (bash) by the checks that run nvcc and cuobjdump (check-cuda.sh):
# a content-addressed cache of their outputs, like Go's build cache, so that a second run
# over the same input costs no compile. A result is found again only when the same
# compiler (nvcc --version, and the host gcc and g++ nvcc runs, by --version) saw the same
# flags and the same input: the content of every file the compile read (nvcc -M's list:
# the source, our headers, CUDA's and the system's), not their paths. A hit replays the
# tool's output file and messages; what the check then asserts about them (the PTX's
# fences, the SASS check, a broken header failing it) runs every time. Only successes are
# kept: a failure runs again next time.
#
# Where: $MSCCLPP_CACHE_DIR/nvcc, default ${XDG_CACHE_HOME:-$HOME/.cache}/mscclpp/nvcc (outside
# the clone, so a fresh clone finds it). MSCCLPP_NVCC_CACHE=off runs every tool, reading and
# writing nothing. Entries not used for 30 days are removed; removing the directory clears it.
#
#   nvcc_cached NVCC ARGS...       nvcc ARGS (with -o OUT), or its cached result
#   cuobjdump_cached TOOL ARGS...  TOOL ARGS whose result is its standard output
nvcc_cache_dir=${MSCCLPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mscclpp}/nvcc
nvcc_cache_on=1
[ "${MSCCLPP_NVCC_CACHE:-on}" = off ] && nvcc_cache_on=0
if [ $nvcc_cache_on = 1 ]; then
  mkdir -p "$nvcc_cache_dir" 2>/dev/null || nvcc_cache_on=0
  find "$nvcc_cache_dir" -mindepth 2 -maxdepth 2 -type d -mtime +30 -exec rm -rf {} + 2>/dev/null
fi
declare -A nvcc_cache_ids=() # the identity of each tool, by path: cache_tool_init fills it

# cache_tool_init TOOL: notes its version, and for nvcc that of the host compilers it runs
# (in this shell, before the key's subshell, so each tool is asked once)
cache_tool_init() {
  local t=$1 id p
  [ -n "${nvcc_cache_ids[$t]:-}" ] && return
  id=$("$t" --version 2>&1)
  if [ "${t##*/}" = nvcc ]; then
    # the PATH nvcc runs gcc and g++ with (its profile may put its own wrappers first)
    p=$("$t" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ PATH=//p' | head -n 1)
    id=$id$'\n'$(PATH=${p:-$PATH} gcc --version 2>&1 | head -n 1)$'\n'$(PATH=${p:-$PATH} g++ --version 2>&1 | head -n 1)
  fi
  nvcc_cache_ids[$t]=$id
}

# cache_args ARGS...: the arguments as the key sees them: a file by its content, -o and -I
# without their path (the files read through -I are in the dependency list)
cache_args() {
  local a skip=0
  for a in "$@"; do
    if [ $skip = 1 ]; then skip=0; continue; fi
    case $a in
      -o|-I) echo "$a"; skip=1 ;;
      -I*) echo "-I" ;;
      *) if [ -f "$a" ]; then echo "file $(sha256sum <"$a" | cut -d' ' -f1)"; else echo "arg $a"; fi ;;
    esac
  done
}

# cache_lookup KEY OUT: a hit copies the output into OUT (-: standard output, the tool's
# messages then to standard error) and prints the tool's messages; status 1 on a miss
cache_lookup() {
  local e=$nvcc_cache_dir/${1:0:2}/$1
  [ -f "$e/done" ] || return 1
  if [ "$2" = - ]; then
    cat "$e/out" || return 1
    cat "$e/log" >&2
  else
    cp "$e/out" "$2" || return 1
    cat "$e/log"
  fi
  touch "$e" 2>/dev/null
  return 0
}

# cache_store KEY OUT LOG: keep OUT and LOG under KEY (written aside, then renamed into place)
cache_store() {
  local d=$nvcc_cache_dir/${1:0:2} tmp
  mkdir -p "$d" 2>/dev/null || return 0
  tmp=$(mktemp -d "$d/.new.XXXXXX" 2>/dev/null) || return 0
  if cp "$2" "$tmp/out" && cp "$3" "$tmp/log" && : >"$tmp/done" && mv -T "$tmp" "$d/$1" 2>/dev/null; then
    return 0
  fi
  rm -rf "$tmp"
}

nvcc_cached() {
  local nvcc=$1 out="" a prev="" margs=() key deps log rc
  shift
  for a in "$@"; do
    [ "$prev" = -o ] && out=$a
    prev=$a
  done
  if [ $nvcc_cache_on = 0 ] || [ -z "$out" ]; then "$nvcc" "$@"; return; fi
  # the files this compile reads: nvcc -M with the same flags, less the output and the mode
  prev=""
  for a in "$@"; do
    case $prev:$a in
      -o:*) ;;
      *:-o|*:-c|*:-cubin|*:-ptx) ;;
      *) margs+=("$a") ;;
    esac
    prev=$a
  done
  cache_tool_init "$nvcc"
  if ! deps=$("$nvcc" -M "${margs[@]}" 2>/dev/null); then "$nvcc" "$@"; return; fi
  key=$({
    printf '%s\n' "${nvcc_cache_ids[$nvcc]}"
    cache_args "$@"
    # every path after the target's colon, each by its content
    printf '%s\n' "${deps#*:}" | tr -s ' \\' '\n\n' | sed '/^$/d' | xargs -d '\n' sha256sum 2>&1 | cut -d' ' -f1
  } | sha256sum | cut -d' ' -f1)
  cache_lookup "$key" "$out" && return 0
  log=$(mktemp "${TMPDIR:-/tmp}/mscclpp-nvcc-log.XXXXXX") || { "$nvcc" "$@"; return; }
  "$nvcc" "$@" >"$log" 2>&1
  rc=$?
  cat "$log"
  [ $rc = 0 ] && cache_store "$key" "$out" "$log"
  rm -f "$log"
  return $rc
}

cuobjdump_cached() {
  local tool=$1 key tmp rc
  shift
  if [ $nvcc_cache_on = 0 ]; then "$tool" "$@"; return; fi
  cache_tool_init "$tool"
  key=$({ printf '%s\n' "${nvcc_cache_ids[$tool]}"; cache_args "$@"; } | sha256sum | cut -d' ' -f1)
  cache_lookup "$key" - && return 0
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-cuobjdump.XXXXXX") || { "$tool" "$@"; return; }
  "$tool" "$@" >"$tmp/out" 2>"$tmp/log"
  rc=$?
  cat "$tmp/out"
  cat "$tmp/log" >&2
  [ $rc = 0 ] && cache_store "$key" "$tmp/out" "$tmp/log"
  rm -rf "$tmp"
  return $rc
}
