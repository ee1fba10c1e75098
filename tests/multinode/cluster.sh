#!/usr/bin/env bash
# cluster.sh: run a program as N ranks spread over K simulated nodes on this
# machine, each node a set of namespaces of its own.
#
#   cluster.sh [-k NODES] [-n NRANKS] [-t SECONDS] [--placement LIST] [--launch PATH]
#              [--expect-fail RANKS] [-e VAR=VALUE]... [--keep DIR]... [--state FILE] [--] PROG [ARGS...]
#   cluster.sh [-k NODES] [--launch PATH] [--keep DIR]... [--state FILE] --jobs FILE
#   cluster.sh --check     prints nothing and exits 0 when this machine can run
#                          clusters; else prints why on one line and exits 77
#
# The cluster:
#  - a switch: a network namespace (of our own; the host's network namespace
#    is never touched) holding a bridge mn<ID>br, ID = this script's PID;
#  - K nodes: node k has its own network, mount and UTS namespaces (host
#    name mn<ID>-node<k>), a veth pair to the bridge (eth0 in the node,
#    address $MN_NET.(k+1)/24, MN_NET default 10.77.0; mn<ID>p<k> at the
#    switch), and fresh tmpfs mounts on /dev/shm and /tmp (private to the
#    node, shared by its ranks). Each namespace set is held by one
#    long-lived process (holder.sh); ranks enter it with nsenter.
#  - the ranks: tests/c/launch starts rank r (MSCCLPP_TEST_RANK, _NRANKS, a
#    timeout, output lines prefixed "[rank r] ") through rank.sh, which
#    enters the rank's node and sets MSCCLPP_TEST_ADDR to rank 0's node
#    address and a port, MSCCLPP_HOSTID to the node's identity, and
#    MSCCLPP_TEST_NODE / _NNODES / _PLACEMENT / _NODE_ADDR (see rank.sh).
#    MSCCLPP_TEST_DIR is launch's temp dir inside a run directory that every
#    node sees (a shared file system): under $MN_SHARED_BASE (default
#    /var/tmp), removed afterwards.
#
# Options:
#   -k NODES         nodes (default 2, 1..64)
#   -n NRANKS        ranks (default: NODES); at least NODES
#   --placement L    the node of every rank, comma list (rank r: field r);
#                    default: blocks, rank r on node floor(r * NODES / NRANKS)
#   -t SECONDS       the ranks' timeout (launch -t; default 60)
#   --expect-fail R, -e VAR=VALUE   as for launch; in -e values {ADDR},
#                    {ADDR+k} name rank 0's node address
#   --launch PATH    a built tests/c/launch (else it is compiled here, with $CC)
#   --keep DIR       a directory under /tmp the ranks need (the build tree,
#                    the program, LD_LIBRARY_PATH, the repository and the
#                    working directory are kept without asking)
#   --state FILE     write what the run created (holder PIDs, namespace ids,
#                    names) to FILE, for a check that nothing is left behind
#   --jobs FILE      several programs, one after another, on the one cluster (setting up and
#                    tearing down a cluster costs about 1 s of CPU: run_multinode.sh's cases of
#                    one topology share one). FILE: a job a line, its words quoted as bash's
#                    printf %q quotes them: OUT [-n NRANKS] [-t SECONDS] [--placement LIST]
#                    [--expect-fail RANKS] [-e VAR=VALUE]... [--] PROG [ARGS...] (-n defaults
#                    to NODES). A job's output goes to OUT, and to OUT.rc its exit status (as
#                    launch's below; 4 when a process of its ranks was still in the cluster
#                    after it), its start and its end (seconds since the epoch). A job starts
#                    once nothing of the one before is left in the nodes; the nodes' /dev/shm
#                    and /tmp are the same for every job. The exit status is then 0, or 3, 4
#                    or 130 as below.
#
# Everything is removed on exit, whether the ranks pass, fail, time out or
# this script is interrupted (INT, TERM, HUP): the holders are killed, and
# with the last process inside, the kernel frees the namespaces and with
# them the veths, the bridge and the tmpfs mounts. The holders die with this
# script even when it is killed outright (setpriv --pdeathsig; launch gets a
# TERM then, and kills the ranks). Afterwards
# the script checks that no process is left in any of its namespaces and
# that the host shows none of its names; otherwise it says what is left.
#
# Exit status: launch's (0 when every rank did as expected, 1, 124 after a
# timeout), 2 for bad usage, 3 when the cluster could not be set up, 4 when
# something was left behind, 77 for --check on an unfit machine, 130 when
# interrupted.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

die_usage() {
  echo "cluster.sh: $*" >&2
  echo "usage: cluster.sh [-k NODES] [-n NRANKS] [-t SECONDS] [--placement LIST] [--launch PATH] [--expect-fail RANKS] [-e VAR=VALUE]... [--keep DIR]... [--state FILE] [--] PROG [ARGS...]" >&2
  echo "       cluster.sh [-k NODES] [--launch PATH] [--keep DIR]... [--state FILE] --jobs FILE" >&2
  exit 2
}

# requirements: prints why not on one line and returns 1 when unfit
requirements() {
  if [ "$(id -u)" != 0 ]; then
    echo "not root (namespaces, mounts and veths need root)"
    return 1
  fi
  local c
  for c in unshare nsenter ip mount; do
    if ! command -v "$c" >/dev/null 2>&1; then
      case $c in
        ip) echo "ip (iproute2) not found" ;;
        *) echo "$c (util-linux) not found" ;;
      esac
      return 1
    fi
  done
  local err
  if ! err=$(unshare --net --mount --uts true 2>&1); then
    echo "unshare --net --mount --uts does not work here: ${err//$'\n'/ }"
    return 1
  fi
  # in a throwaway namespace: can we make a bridge and a veth pair?
  if ! err=$(unshare --net sh -c 'ip link add b0 type bridge && ip link add v0 type veth peer name v1 && ip link set v0 master b0' 2>&1); then
    echo "no bridge or veth in a network namespace: ${err//$'\n'/ }"
    return 1
  fi
  return 0
}

if [ "${1:-}" = --check ]; then
  why=$(requirements) && exit 0
  echo "$why"
  exit 77
fi

nodes=2 launch= state= jobs=
keeps=()
# job_options ARGS...: a job's own options (the command line's, or a line of --jobs): sets
# nranks, timeout, placement, expect, lenvs and job_args (PROG and its arguments); dies on bad
# usage with status 2 (in a job of --jobs: the job fails, with the message in its output)
job_options() {
  nranks= timeout=60 placement= expect= lenvs=()
  while [ $# -gt 0 ]; do
    case $1 in
      -n) [ $# -ge 2 ] || die_usage "-n needs a value"; nranks=$2; shift 2 ;;
      -t) [ $# -ge 2 ] || die_usage "-t needs a value"; timeout=$2; shift 2 ;;
      --placement) [ $# -ge 2 ] || die_usage "--placement needs a value"; placement=$2; shift 2 ;;
      --expect-fail) [ $# -ge 2 ] || die_usage "--expect-fail needs a value"; expect=$2; shift 2 ;;
      -e) [ $# -ge 2 ] || die_usage "-e needs a value"; lenvs+=("$2"); shift 2 ;;
      --) shift; break ;;
      -*) die_usage "unknown option $1" ;;
      *) break ;;
    esac
  done
  [ $# -ge 1 ] || die_usage "no program"
  [ -n "$nranks" ] || nranks=$nodes
  case $nranks in '' | *[!0-9]*) die_usage "-n wants a number of ranks, got '$nranks'" ;; esac
  [ "$nranks" -ge "$nodes" ] || die_usage "$nranks ranks cannot fill $nodes nodes (want NRANKS >= NODES)"
  if [ -z "$placement" ]; then
    for ((r = 0; r < nranks; r++)); do placement+="${placement:+,}$((r * nodes / nranks))"; done
  else
    IFS=, read -ra pl <<<"$placement"
    [ ${#pl[@]} = "$nranks" ] || die_usage "--placement '$placement' names ${#pl[@]} ranks, want $nranks"
    for k in "${pl[@]}"; do
      case $k in '' | *[!0-9]*) die_usage "--placement: '$k' is not a node" ;; esac
      [ "$k" -lt "$nodes" ] || die_usage "--placement: node $k out of 0..$((nodes - 1))"
    done
  fi
  job_args=("$@")
  case ${job_args[0]} in */*) job_args[0]=$(cd "${job_args[0]%/*}/" && pwd)/${job_args[0]##*/} ;; esac
}
# the cluster's options first; the rest (a job's options and its program) for job_options
args=()
while [ $# -gt 0 ]; do
  case $1 in
    -k) [ $# -ge 2 ] || die_usage "-k needs a value"; nodes=$2; shift 2 ;;
    --launch) [ $# -ge 2 ] || die_usage "--launch needs a value"; launch=$2; shift 2 ;;
    --keep) [ $# -ge 2 ] || die_usage "--keep needs a value"; keeps+=("$2"); shift 2 ;;
    --state) [ $# -ge 2 ] || die_usage "--state needs a value"; state=$2; shift 2 ;;
    --jobs) [ $# -ge 2 ] || die_usage "--jobs needs a value"; jobs=$2; shift 2 ;;
    -n | -t | --placement | --expect-fail | -e) [ $# -ge 2 ] || die_usage "$1 needs a value"; args+=("$1" "$2"); shift 2 ;;
    --) args+=("$@"); break ;;
    -*) die_usage "unknown option $1" ;;
    *) args+=("$@"); break ;;
  esac
done
case $nodes in '' | *[!0-9]*) die_usage "-k wants a number of nodes, got '$nodes'" ;; esac
[ "$nodes" -ge 1 ] && [ "$nodes" -le 64 ] || die_usage "-k must be in 1..64"
if [ -n "$jobs" ]; then
  [ ${#args[@]} -eq 0 ] || die_usage "--jobs takes no program on the command line"
  [ -r "$jobs" ] || die_usage "--jobs: cannot read '$jobs'"
else
  job_options ${args[@]+"${args[@]}"}
fi

# (MN_REQUIREMENTS_MET=1: the caller ran --check a moment ago, for its many clusters; each check
# makes and tears down a namespace with a bridge and a veth pair)
if [ "${MN_REQUIREMENTS_MET:-}" != 1 ] && ! why=$(requirements); then
  echo "cluster.sh: cannot build simulated nodes here: $why" >&2
  exit 3
fi

id=$$
net=${MN_NET:-10.77.0}
br=mn${id}br
base=${MN_SHARED_BASE:-/var/tmp}
[ -d "$base" ] && [ -w "$base" ] || base=${TMPDIR:-/tmp}
rundir=$(mktemp -d "$base/mscclpp-mn$id.XXXXXX") || exit 3

pdeath=() pdeath_launch=()
if setpriv --help 2>/dev/null | grep -q -- --pdeathsig; then
  pdeath=(setpriv --pdeathsig KILL)
  pdeath_launch=(setpriv --pdeathsig TERM) # launch then kills the ranks and exits
fi
reaper=
holders=() # node holders, by node
switch_pid=
lpid=
nsids=() # "net:[...]" etc. of every namespace we made
interrupted=0
cleaned=0

# ---- teardown ----

# the processes (other than us) in any namespace of nsids: "pid ns" lines.
# The kernel reuses a namespace's id once the namespace is gone, for the
# namespaces of another cluster made at the same time: a process counts only
# when it is ours, a holder or one that carries this run's MSCCLPP_HOSTID
# (rank.sh sets it; whatever a rank starts inherits it).
procs_inside() {
  [ ${#nsids[@]} -gt 0 ] || return 0
  local -A ns=()
  local n p link
  for n in "${nsids[@]}"; do ns[$n]=1; done
  # ls -l of the ns links: ".../proc/PID/ns/net -> net:[4026532...]" (matched by this shell,
  # not grep and sed: this runs after every job and at every teardown)
  ls -l /proc/[0-9]*/ns/net /proc/[0-9]*/ns/mnt /proc/[0-9]*/ns/uts 2>/dev/null | while read -r link; do
    n=${link##* -> }
    [ -n "${ns[$n]:-}" ] || continue
    p=${link#*/proc/} p=${p%%/*}
    ours "$p" && echo "$p $n"
  done
}

ours() { # PID: one of our holders, or a process of our ranks
  local h
  for h in $switch_pid ${holders[@]+"${holders[@]}"}; do [ "$1" = "$h" ] && return 0; done
  tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -q "^MSCCLPP_HOSTID=mn$id-node"
}

# what the host shows of this run: names in the host's links and mounts
# (the lines picked by this shell, not grep and sed: it runs at every teardown)
host_traces() {
  local l
  ip -o link show 2>/dev/null | while IFS= read -r l; do [[ $l == *"mn$id"* ]] && echo "link: $l"; done
  while IFS= read -r l; do [[ $l == *"mn$id-"* ]] && echo "mount: $l"; done 2>/dev/null </proc/self/mountinfo
  ip netns list 2>/dev/null | while IFS= read -r l; do [[ $l == *"mn$id"* ]] && echo "netns: $l"; done
  return 0
}

cleanup() {
  [ $cleaned = 1 ] && return
  cleaned=1
  trap '' INT TERM HUP
  if [ -n "$lpid" ] && kill -0 "$lpid" 2>/dev/null; then
    kill -TERM "$lpid" 2>/dev/null
    local i
    for ((i = 0; i < 100; i++)); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$lpid" 2>/dev/null
    wait "$lpid" 2>/dev/null
  fi
  local p
  for p in $switch_pid ${holders[@]+"${holders[@]}"}; do kill -KILL "$p" 2>/dev/null; done
  for p in $switch_pid ${holders[@]+"${holders[@]}"}; do wait "$p" 2>/dev/null; done
  # what is still inside: ranks launch could not kill, their children
  local left= t
  for ((t = 0; t < 40; t++)); do
    left=$(procs_inside)
    [ -z "$left" ] && break
    if [ "$t" = 10 ]; then # 0.5 s on: kill the stragglers (all started by this run)
      echo "$left" | while read -r p _; do kill -KILL "$p" 2>/dev/null; done
    fi
    sleep 0.05
  done
  local traces
  traces=$(host_traces)
  rm -rf "$rundir"
  if [ -n "$reaper" ]; then
    kill -TERM "$reaper" 2>/dev/null
    wait "$reaper" 2>/dev/null
  fi
  if [ -n "$left" ] || [ -n "$traces" ]; then
    echo "cluster.sh: LEFT BEHIND after the run:"
    [ -n "$left" ] && echo "$left" | sed 's/^/  process in our namespace: /'
    [ -n "$traces" ] && echo "$traces" | sed 's/^/  on the host: /'
    return 1
  fi
  return 0
}

on_exit() {
  local rc=$?
  if ! cleanup && [ $rc -eq 0 ]; then rc=4; fi
  exit $rc
}
trap on_exit EXIT

on_signal() {
  interrupted=1
  if [ -n "$lpid" ]; then
    kill -TERM "$lpid" 2>/dev/null # launch kills the ranks and reports
  else
    exit 130
  fi
}
trap on_signal INT TERM HUP

setup_fail() {
  echo "cluster.sh: $*" >&2
  local f
  for f in "$rundir"/holder-*.log; do
    [ -s "$f" ] && sed "s|^|  $(basename "$f" .log): |" "$f" >&2
  done
  exit 3
}

# ---- the kept paths: what the ranks must see inside a node's private /tmp ----
keeps+=("$root" "$rundir" "$PWD" "$here")
if [ -n "$jobs" ]; then
  # every job's program, as job_options reads its line (quoted as printf %q does); a line of bad
  # usage keeps nothing (its job fails below)
  while IFS= read -r line; do
    eval "words=($line)"
    (job_options "${words[@]:1}") >/dev/null 2>&1 || continue
    job_options "${words[@]:1}"
    case ${job_args[0]} in /*) keeps+=("${job_args[0]%/*}") ;; esac
  done <"$jobs"
else
  case ${job_args[0]} in /*) keeps+=("$(dirname "${job_args[0]}")") ;; esac
fi
IFS=: read -ra ldp <<<"${LD_LIBRARY_PATH:-}"
for d in ${ldp[@]+"${ldp[@]}"}; do [ -n "$d" ] && keeps+=("$d"); done
kept=()
for d in "${keeps[@]}"; do
  [ -e "$d" ] || continue
  d=$(cd "$d" 2>/dev/null && pwd -P) || continue
  case $d in /tmp/*) kept+=("$d") ;; esac
done
# shortest first: a directory is bound before the ones inside it
mapfile -t kept < <(printf '%s\n' ${kept[@]+"${kept[@]}"} | awk 'NF' | sort -u | awk '{ print length, $0 }' | sort -n | cut -d' ' -f2-)

# ---- the run directory goes away even when this script is killed outright ----
if [ ${#pdeath_launch[@]} -gt 0 ]; then
  # shellcheck disable=SC2016
  ${pdeath_launch[@]+"${pdeath_launch[@]}"} bash -c 'sleep infinity & s=$!; trap "kill \$s; rm -rf \"$0\"; exit 0" TERM; wait' \
    "$rundir" </dev/null >/dev/null 2>&1 &
  reaper=$!
fi

# ---- launch ----
if [ -z "$launch" ]; then
  launch=$rundir/launch
  ${CC:-cc} -std=c11 -O2 -o "$launch" "$root/tests/c/launch.c" >"$rundir/build-launch.log" 2>&1 ||
    setup_fail "cannot compile tests/c/launch.c: $(cat "$rundir/build-launch.log")"
fi
[ -x "$launch" ] || setup_fail "launch '$launch' is not executable"

# ---- holders ----

# Each holder writes "ready" on its fd 4, a FIFO this script reads: a read that returns the
# line once the holder is set up, or the end of file at once when it died (no polling). The
# holders start together: each blocks opening its FIFO until this script opens the other end,
# which it does for all of them before it reads any.
fifos=("$rundir/ready-switch")
for ((k = 0; k < nodes; k++)); do fifos+=("$rundir/ready-node$k"); done
mkfifo "${fifos[@]}" || setup_fail "cannot make the FIFOs ${fifos[*]}"
${pdeath[@]+"${pdeath[@]}"} unshare --net -- bash "$here/holder.sh" switch "$br" \
  4>"$rundir/ready-switch" 2>"$rundir/holder-switch.log" </dev/null &
switch_pid=$!
for ((k = 0; k < nodes; k++)); do
  ${pdeath[@]+"${pdeath[@]}"} unshare --net --mount --uts --propagation private -- \
    bash "$here/holder.sh" node "mn$id-node$k" "mn$id-shm$k" "mn$id-tmp$k" ${kept[@]+"${kept[@]}"} \
    4>"$rundir/ready-node$k" 2>"$rundir/holder-node$k.log" </dev/null &
  holders+=($!)
done
ready_fds=()
for f in "${fifos[@]}"; do
  exec {fd}<"$f"
  ready_fds+=("$fd")
done
whats=("the switch namespace")
for ((k = 0; k < nodes; k++)); do whats+=("node $k"); done
for i in "${!ready_fds[@]}"; do
  line= rc=0
  read -r -t 10 -u "${ready_fds[i]}" line || rc=$?
  exec {ready_fds[i]}<&-
  [ "$line" = ready ] && continue
  [ $rc -gt 128 ] && setup_fail "${whats[i]} not ready after 10 s"
  setup_fail "${whats[i]} did not start"
done
# the namespace ids, read at once, with this shell's own (one readlink for all)
ns_links=("/proc/$switch_pid/ns/net")
for ((k = 0; k < nodes; k++)); do
  for t in net mnt uts; do ns_links+=("/proc/${holders[$k]}/ns/$t"); done
done
mapfile -t ids < <(readlink "${ns_links[@]}" /proc/self/ns/net /proc/self/ns/mnt)
[ ${#ids[@]} = $((${#ns_links[@]} + 2)) ] || setup_fail "a holder died: its namespaces are gone (readlink ${ns_links[*]})"
nsids+=("${ids[@]:0:${#ns_links[@]}}")
self_net=${ids[${#ns_links[@]}]} self_mnt=${ids[${#ns_links[@]} + 1]}
for n in "${nsids[@]}"; do
  [ "$n" = "$self_net" ] || [ "$n" = "$self_mnt" ] && setup_fail "a holder shares the host's namespace ($n)"
done

# ---- the network: one veth per node to the bridge ----
{
  for ((k = 0; k < nodes; k++)); do
    echo "link add mn${id}p$k type veth peer name eth0 netns ${holders[$k]}"
    echo "link set mn${id}p$k master $br"
    echo "link set mn${id}p$k up"
  done
} >"$rundir/switch.batch"
nsenter -t "$switch_pid" -n ip -batch "$rundir/switch.batch" >>"$rundir/holder-switch.log" 2>&1 ||
  setup_fail "cannot wire the switch (ip -batch $(tr '\n' ';' <"$rundir/switch.batch"))"
for ((k = 0; k < nodes; k++)); do
  printf 'addr add %s.%d/24 dev eth0\nlink set eth0 up\n' "$net" $((k + 1)) >"$rundir/node$k.batch"
  nsenter -t "${holders[$k]}" -n ip -batch "$rundir/node$k.batch" >>"$rundir/holder-node$k.log" 2>&1 ||
    setup_fail "cannot configure eth0 on node $k"
done

if [ -n "$state" ]; then
  {
    echo "id $id"
    echo "rundir $rundir"
    echo "pids $switch_pid ${holders[*]}"
    echo "namespaces ${nsids[*]}"
    echo "names $br mn${id}p* mn$id-node* mn$id-shm* mn$id-tmp*"
  } >"$state"
fi

# ---- the ranks ----
ncpus=$(nproc 2>/dev/null || echo 1) # (for rank.sh: asked once here, not by every rank)
wd=$PWD
case $wd in /tmp | /tmp/*) wd=$(cd "$wd" && pwd -P) ;; esac
# run_ranks: the job job_options set (nranks, timeout, placement, expect, lenvs, job_args) as
# ranks on the nodes, through launch; sets rc (launch's status, 130 when interrupted)
run_ranks() {
  local addr_vars= largs=(-n "$nranks" -t "$timeout") e
  [ -n "$expect" ] && largs+=(--expect-fail "$expect")
  for e in ${lenvs[@]+"${lenvs[@]}"}; do
    largs+=(-e "$e")
    addr_vars+=" ${e%%=*}"
  done
  echo "# cluster mn$id: $nodes nodes ($net.1..$net.$nodes), $nranks ranks, placement $placement"
  MN_PLACEMENT=$placement MN_NODE_PIDS="${holders[*]}" MN_ROOT_IP=$net.$((${placement%%,*} + 1)) MN_RUN_ID=$id \
    MN_NCPUS=$ncpus MN_WD=$wd MN_ADDR_VARS=$addr_vars MN_SHARED=$rundir MN_NET_PREFIX=$net TMPDIR=$rundir \
    ${pdeath_launch[@]+"${pdeath_launch[@]}"} "$launch" "${largs[@]}" -- bash "$here/rank.sh" "${job_args[@]}" &
  lpid=$!
  while :; do
    wait "$lpid"
    rc=$?
    # a trapped signal ends `wait` early: keep waiting while launch winds down
    if [ $rc -gt 128 ] && kill -0 "$lpid" 2>/dev/null; then continue; fi
    break
  done
  lpid=
  [ $interrupted = 1 ] && [ $rc -eq 0 ] && rc=130
}

if [ -z "$jobs" ]; then
  run_ranks
  exit $rc
fi

# --jobs: one job after another. After each, what its ranks left in the nodes (a process that
# is not a holder) is waited for, as cleanup below does at the end: killed after 0.5 s (all
# started by this run; noted in the job's output), and still there after 2 s it fails the job
# (status 4) before the next one starts.
ranks_left() { procs_inside | while read -r p n; do ours_holder "$p" || echo "$p $n"; done; }
ours_holder() {
  local h
  for h in $switch_pid ${holders[@]+"${holders[@]}"}; do [ "$1" = "$h" ] && return 0; done
  return 1
}
while IFS= read -r line && [ $interrupted = 0 ]; do
  eval "words=($line)"
  jout=${words[0]}
  jstart=$EPOCHREALTIME
  rc=2
  # (in a subshell: a job's bad usage ends it, not the cluster)
  if (job_options "${words[@]:1}") >"$jout" 2>&1; then
    job_options "${words[@]:1}"
    run_ranks >"$jout" 2>&1
  fi
  for ((t = 0; t < 40; t++)); do
    left=$(ranks_left)
    [ -z "$left" ] && break
    if [ "$t" = 10 ]; then
      echo "$left" | sed 's/^/cluster.sh: killing what the job left: process in our namespace: /' >>"$jout"
      echo "$left" | while read -r p _; do kill -KILL "$p" 2>/dev/null; done
    fi
    sleep 0.05
  done
  if [ -n "$left" ]; then
    echo "cluster.sh: LEFT BEHIND after the job:" >>"$jout"
    echo "$left" | sed 's/^/  process in our namespace: /' >>"$jout"
    [ $rc -eq 0 ] && rc=4
  fi
  echo "$rc $jstart $EPOCHREALTIME" >"$jout.rc"
done <"$jobs"
[ $interrupted = 1 ] && exit 130
exit 0
