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
  [ "$(cut -d' ' -f1-4 "$f" 2>/dev/null)" = "mscclpp-perf-id 1 late 4" ] ||
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
