# slurm_cluster.sh: a one-node Slurm cluster for the tests, sourced by
# run_launchers.sh. Everything lives under one temporary directory:
#   key/      munge.key (0400), munged's pid, log and seed (0700)
#   munge/    munged's socket (0755: munge wants its socket directory
#             searchable by all)
#   state/ spool/ log/   slurmctld's state, slurmd's spool, the logs
#   slurm.conf  ProctrackType=proctrack/linuxproc, TaskPlugin=task/none,
#             MpiDefault=pmix, one node "node0" on 127.0.0.1 with this host's
#             CPUs, one partition with OverSubscribe=FORCE; free ports
# cluster_cannot       prints why no cluster can run here (status 0), else status 1
# cluster_start LOG    starts munged, slurmctld, slurmd (by their own pids) and
#                      waits (at most 15 s) until sinfo shows node0 idle; sets
#                      cluster_conf; status 1 (details in LOG) on failure
# cluster_stop         cancels what is left of the jobs, stops the three
#                      daemons, removes the directory; safe to call twice

cluster_dir="" cluster_conf="" cluster_pids=()

cluster_cannot() {
  local t
  if [ "$(id -u)" != 0 ]; then echo "Slurm's daemons need root (uid $(id -u))"; return 0; fi
  for t in munged mungekey slurmctld slurmd srun sinfo squeue scancel; do
    if ! command -v "$t" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$t" ]; then
      echo "$t not found (Debian: slurm-wlm, munge)"
      return 0
    fi
  done
  return 1
}

# a TCP port on 127.0.0.1 nobody listens on
cluster_port() {
  local p i
  for i in $(seq 1 200); do
    p=$((20000 + RANDOM % 10000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

cluster_write_conf() {
  local d=$1 ctld_port slurmd_port plugins
  ctld_port=$(cluster_port) && slurmd_port=$(cluster_port) || return 1
  [ "$ctld_port" = "$slurmd_port" ] && slurmd_port=$((ctld_port + 1))
  plugins=$(dirname "$(find /usr/lib -name mpi_pmix.so -path '*slurm*' 2>/dev/null | head -n 1)")
  cat >"$d/slurm.conf" <<CONF
ClusterName=mscclpptest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
${plugins:+PluginDir=$plugins}
NodeName=node0 NodeAddr=127.0.0.1 NodeHostname=$(hostname) CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=node0 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
}

cluster_start() {
  local log=$1 d i
  d=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-slurm.XXXXXX") || return 1
  cluster_dir=$d
  chmod 711 "$d" && mkdir -m 700 "$d/key" && mkdir -m 755 "$d/munge" && mkdir "$d/state" "$d/spool" "$d/log" || return 1
  cluster_conf=$d/slurm.conf
  {
    mungekey -c -k "$d/key/munge.key" && chmod 400 "$d/key/munge.key" && cluster_write_conf "$d"
  } >"$log" 2>&1 || return 1
  munged -F --socket="$d/munge/munge.socket" --key-file="$d/key/munge.key" --log-file="$d/key/munged.log" \
    --pid-file="$d/key/munged.pid" --seed-file="$d/key/munged.seed" >>"$log" 2>&1 &
  cluster_pids+=($!)
  for i in $(seq 1 100); do [ -S "$d/munge/munge.socket" ] && break; sleep 0.05; done
  slurmctld -D -i -f "$cluster_conf" >"$d/log/slurmctld.out" 2>&1 &
  cluster_pids+=($!)
  slurmd -D -N node0 -f "$cluster_conf" >"$d/log/slurmd.out" 2>&1 &
  cluster_pids+=($!)
  local t0=$SECONDS
  for i in $(seq 1 150); do
    if SLURM_CONF=$cluster_conf sinfo -h -o '%t' 2>/dev/null | grep -qx idle; then
      echo "# cluster up in $((SECONDS - t0)) s (sinfo: node0 idle)" >>"$log"
      return 0
    fi
    sleep 0.1
  done
  {
    echo "-- node0 not idle in 15 s"
    SLURM_CONF=$cluster_conf sinfo 2>&1
    tail -n 20 "$d/key/munged.log" "$d/log/"* 2>&1
  } >>"$log"
  return 1
}

cluster_stop() {
  local p i
  if [ -n "$cluster_conf" ] && [ -f "$cluster_conf" ]; then
    SLURM_CONF=$cluster_conf scancel --quiet --full --partition=test >/dev/null 2>&1
    for i in $(seq 1 50); do
      [ -z "$(SLURM_CONF=$cluster_conf squeue -h 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  for p in "${cluster_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${cluster_pids[@]}"; do
    for i in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  cluster_pids=()
  [ -n "$cluster_dir" ] && rm -rf "$cluster_dir"
  cluster_dir="" cluster_conf=""
}
