# idfile_case.sh: the launch-id-file case, sourced by run_launchers.sh (uses
# its perf, args, clean_env, out, check_run, pass, fail). Four ranks that
# know only their rank and size from the environment (OMPI_COMM_WORLD_RANK /
# _SIZE, no PMIx) meet through --id-file DIR/id --job-id JOB, i.e. DIR/id.JOB:
#  1. a stale file at DIR/id.stale (right format, an id nobody serves, fresh
#     mtime) is ignored: ranks 1-3 start first, then rank 0; all exit 0 and
#     rank 0 says it removed the earlier run's file
#  2. rank 0 alone: its file appears with mode 0600 and the right first
#     words, and its mtime moves on (kept fresh); ranks 1-3 started after
#     that still join
#  3. three reruns with the same --job-id
# After each run DIR is empty: no id, temporary or probe file left.
#
# idfile_attacks_case (launch-id-file-attacks): what another user, or another
# job, can leave on a shared path, each refused with a clear message:
#  1. another user's file (mode 0600, fresh, well-formed; chown nobody): a
#     reader refuses it and says whose it is; rank 0 refuses to use or remove it
#  2. links: a symbolic link at the id file's name (to a file of this user)
#     is refused by a reader and by rank 0; a link planted at the name the
#     reader's probe had (NAME.probe.RANK.PID, PID known through exec) is
#     never followed: the job runs and the linked file keeps its content
#  3. two jobs on one path: while job A's rank 0 waits for its ranks, job B's
#     rank 0 refuses A's live file and says so; A's file is untouched and A
#     then completes
#  4. a future-dated file (mtime +1 h) and a stale one (-1 h) are refused by a
#     reader, which says why

# idfile_run JOB LOG FIRST...: start the ranks named in FIRST, then the others; wait for all
idfile_run() {
  local job=$1 log=$2 r pids=() rc=0
  shift 2
  local order=("$@")
  for r in 0 1 2 3; do [[ " ${order[*]} " == *" $r "* ]] || order+=("$r"); done
  for r in "${order[@]}"; do
    "${clean_env[@]}" OMPI_COMM_WORLD_RANK="$r" OMPI_COMM_WORLD_SIZE=4 MSCCLPP_BOOTSTRAP_TIMEOUT=20 \
      timeout -k 5 40 "$perf" "${args[@]}" --id-file "$idfile_dir/id" --job-id "$job" >"$log.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do wait "${pids[$r]}" || rc=1; done
  return $rc
}

idfile_left() { # LOG: DIR must be empty
  if [ -n "$(ls -A "$idfile_dir")" ]; then
    echo "-- left in $idfile_dir: $(ls -A "$idfile_dir")" >>"$1"
    return 1
  fi
}

idfile_case() {
  local name=launch-id-file log=$out/launch-id-file.log ok=1 rc i r
  idfile_dir=$out/idfile.d
  rm -rf "$idfile_dir" && mkdir -p "$idfile_dir" || return
  : >"$log"
  # 1. a stale file
  printf 'mscclpp-perf-id 1 stale 4 %0256d\n' 0 >"$idfile_dir/id.stale"
  echo "== stale file, ranks 1-3 first" >>"$log"
  idfile_run stale "$log.r" 1 2 3
  rc=$?
  cat "$log.r".* >>"$log"
  check_run "$log.r.0" "$rc" "unique id: the file $idfile_dir/id.stale" || ok=0
  grep -q "removed $idfile_dir/id.stale, left by an earlier run" "$log.r.0" ||
    { echo "-- rank 0 did not say it removed the stale file" >>"$log"; ok=0; }
  idfile_left "$log" || ok=0
  # 2. rank 0 alone first: mode, content, kept fresh; the others join late
  echo "== rank 0 first, the others once its file was rewritten" >>"$log"
  local f=$idfile_dir/id.late m0="" m1="" pid0
  "${clean_env[@]}" OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=4 MSCCLPP_BOOTSTRAP_TIMEOUT=20 \
    timeout -k 5 40 "$perf" "${args[@]}" --id-file "$idfile_dir/id" --job-id late >"$log.r.0" 2>&1 &
  pid0=$!
  for i in $(seq 1 200); do [ -f "$f" ] && m0=$(stat -c %Y.%y "$f" 2>/dev/null) && [ -n "$m0" ] && break; sleep 0.05; done
  [ "$(stat -c %a "$f" 2>/dev/null)" = 600 ] || { echo "-- $f: mode $(stat -c %a "$f" 2>&1), want 600" >>"$log"; ok=0; }
  [ "$(cut -d' ' -f1-4 "$f" 2>/dev/null)" = "mscclpp-perf-id 3 late 4" ] ||
    { echo "-- $f: first words '$(cut -d' ' -f1-4 "$f" 2>&1)'" >>"$log"; ok=0; }
  for i in $(seq 1 100); do m1=$(stat -c %Y.%y "$f" 2>/dev/null) && [ "$m1" != "$m0" ] && break; sleep 0.05; done
  [ -n "$m0" ] && [ "$m1" != "$m0" ] || { echo "-- $f was not rewritten in 5 s ($m0, $m1)" >>"$log"; ok=0; }
  local pids=()
  for r in 1 2 3; do
    "${clean_env[@]}" OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=4 MSCCLPP_BOOTSTRAP_TIMEOUT=20 \
      timeout -k 5 40 "$perf" "${args[@]}" --id-file "$idfile_dir/id" --job-id late >"$log.r.$r" 2>&1 &
    pids+=($!)
  done
  rc=0
  wait "$pid0" || rc=1
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  cat "$log.r".* >>"$log"
  check_run "$log.r.0" "$rc" "unique id: the file $f" || ok=0
  idfile_left "$log" || ok=0
  # 3. three reruns, the same job id
  for i in 1 2 3; do
    echo "== rerun $i" >>"$log"
    idfile_run again "$log.r"
    rc=$?
    cat "$log.r".* >>"$log"
    check_run "$log.r.0" "$rc" "unique id: the file $idfile_dir/id.again" || ok=0
    idfile_left "$log" || ok=0
  done
  rm -f "$log.r".*
  if [ $ok = 1 ]; then pass "$name"; else fail "$name" "$log"; fi
}

# idfile_line JOB: a well-formed line of a two-rank job (an id nobody serves)
idfile_line() { printf 'mscclpp-perf-id 3 %s 2 - 0123456789abcdef %0256d\n' "$1" 0; }

# idfile_reader LOG JOB [SECONDS]: rank 1 of 2 waits a few seconds for JOB's file (and is stopped)
idfile_reader() {
  "${clean_env[@]}" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 \
    timeout -k 2 "${3:-3}" "$perf" "${args[@]}" --id-file "$idfile_dir/id" --job-id "$2" >"$1" 2>&1
}

# idfile_rank0 LOG JOB: rank 0 of 2, which must give up at once
idfile_rank0() {
  "${clean_env[@]}" OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 MSCCLPP_BOOTSTRAP_TIMEOUT=5 \
    timeout -k 2 10 "$perf" "${args[@]}" --id-file "$idfile_dir/id" --job-id "$2" >"$1" 2>&1
}

# idfile_expect LOG TEXT WHAT: LOG says TEXT
idfile_expect() {
  grep -qF -- "$2" "$1" && return 0
  { echo "-- $3: no \"$2\" in:"; cat "$1"; } >>"$log"
  return 1
}

idfile_attacks_case() {
  local name=launch-id-file-attacks log=$out/launch-id-file-attacks.log ok=1 rc f r pid0 before
  local want_sizes="8 64 512 4096 32768" # what check_run wants of two ranks
  idfile_dir=$out/idfile-attacks.d
  rm -rf "$idfile_dir" && mkdir -p "$idfile_dir" || return
  : >"$log"
  local t=$out/idfile-attacks.out
  # 1. another user's file
  f=$idfile_dir/id.uid
  idfile_line uid >"$f" && chmod 600 "$f"
  if [ "$(id -u)" = 0 ] && chown nobody "$f" 2>>"$log"; then
    echo "== another user's file" >>"$log"
    idfile_reader "$t" uid
    idfile_expect "$t" "refusing $f: it belongs to uid $(id -u nobody), not to this user (uid 0)" "reader, another user's file" || ok=0
    idfile_rank0 "$t" uid
    rc=$?
    idfile_expect "$t" "$f belongs to uid $(id -u nobody), not to this user (uid 0): refusing to use or remove it" "rank 0, another user's file" || ok=0
    [ $rc -ne 0 ] && [ -f "$f" ] || { echo "-- rank 0 exit $rc, or it removed another user's file" >>"$log"; ok=0; }
  else
    echo "-- not root (or no user nobody): the other user's file was not tried" >>"$log"
  fi
  rm -f "$f"
  # 2. links
  echo "== a link at the id file's name" >>"$log"
  local precious=$out/idfile-precious
  echo precious >"$precious" && chmod 600 "$precious"
  ln -s "$precious" "$idfile_dir/id.link"
  idfile_reader "$t" link
  idfile_expect "$t" "refusing $idfile_dir/id.link: it is a symbolic link" "reader, link" || ok=0
  idfile_rank0 "$t" link
  rc=$?
  idfile_expect "$t" "$idfile_dir/id.link is a symbolic link: refusing to write through it or remove it" "rank 0, link" || ok=0
  [ $rc -ne 0 ] && [ -L "$idfile_dir/id.link" ] || { echo "-- rank 0 exit $rc, or the link is gone" >>"$log"; ok=0; }
  rm -f "$idfile_dir/id.link"
  echo "== a link at the reader's probe name" >>"$log"
  "${clean_env[@]}" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 MSCCLPP_BOOTSTRAP_TIMEOUT=20 timeout -k 5 40 \
    sh -c 'ln -s "$1" "$2.probe.1.$$" && shift 2 && exec "$@"' sh "$precious" "$idfile_dir/id.probe" \
    "$perf" "${args[@]}" --id-file "$idfile_dir/id" --job-id probe >"$t.1" 2>&1 &
  r=$!
  "${clean_env[@]}" OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 MSCCLPP_BOOTSTRAP_TIMEOUT=20 \
    timeout -k 5 40 "$perf" "${args[@]}" --id-file "$idfile_dir/id" --job-id probe >"$t" 2>&1
  rc=$?
  wait $r || rc=1
  cat "$t" "$t.1" >>"$log"
  check_run "$t" "$rc" "unique id: the file $idfile_dir/id.probe" || { ok=0; cat "$t" >>"$log"; }
  [ "$(cat "$precious")" = precious ] || { echo "-- the linked file was changed: '$(cat "$precious")'" >>"$log"; ok=0; }
  rm -f "$idfile_dir"/id.probe.probe.1.* "$precious"
  # 3. two jobs on one path
  echo "== two jobs on one path" >>"$log"
  f=$idfile_dir/id.two
  "${clean_env[@]}" OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 MSCCLPP_BOOTSTRAP_TIMEOUT=30 \
    timeout -k 5 40 "$perf" "${args[@]}" --id-file "$idfile_dir/id" --job-id two >"$t.a0" 2>&1 &
  pid0=$!
  for r in $(seq 1 200); do [ -s "$f" ] && break; sleep 0.05; done
  before=$(cut -d' ' -f5 "$f" 2>/dev/null)
  idfile_rank0 "$t" two
  rc=$?
  idfile_expect "$t" "$f is in use: another live job rewrites it" "job B's rank 0" || ok=0
  [ $rc -ne 0 ] || { echo "-- job B's rank 0 exit $rc" >>"$log"; ok=0; }
  [ -n "$before" ] && [ "$(cut -d' ' -f5 "$f" 2>/dev/null)" = "$before" ] ||
    { echo "-- job A's file changed hands: nonce '$before', now '$(cut -d' ' -f5 "$f" 2>&1)'" >>"$log"; ok=0; }
  "${clean_env[@]}" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 MSCCLPP_BOOTSTRAP_TIMEOUT=30 \
    timeout -k 5 40 "$perf" "${args[@]}" --id-file "$idfile_dir/id" --job-id two >"$t.a1" 2>&1
  rc=$?
  wait $pid0 || rc=1
  cat "$t.a0" "$t.a1" >>"$log"
  check_run "$t.a0" "$rc" "unique id: the file $f" || ok=0
  # 4. future-dated and stale files
  for when in future stale; do
    echo "== a $when file" >>"$log"
    f=$idfile_dir/id.$when
    idfile_line "$when" >"$f" && chmod 600 "$f"
    if [ $when = future ]; then touch -d '+1 hour' "$f"; else touch -d '-1 hour' "$f"; fi
    idfile_reader "$t" "$when" 4
    if [ $when = future ]; then
      idfile_expect "$t" "refusing $f: its mtime is" "reader, future-dated file" || ok=0
      idfile_expect "$t" "ahead of the file system's clock (future-dated)" "reader, future-dated file" || ok=0
    else
      idfile_expect "$t" "refusing $f: it was written" "reader, stale file" || ok=0
      idfile_expect "$t" "before this rank started (stale" "reader, stale file" || ok=0
    fi
    rm -f "$f"
  done
  rm -f "$t" "$t".*
  idfile_left "$log" || ok=0
  if [ $ok = 1 ]; then pass "$name"; else fail "$name" "$log"; fi
}
