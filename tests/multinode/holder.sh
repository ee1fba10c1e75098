#!/usr/bin/env bash
# holder.sh: the long-lived process that owns the namespaces of one simulated
# node (or of the switch between them). cluster.sh starts it as
#
#   setpriv --pdeathsig KILL unshare --net --mount --uts -- bash holder.sh node NAME SHMTAG TMPTAG KEEP...
#   setpriv --pdeathsig KILL unshare --net -- bash holder.sh switch BRIDGE
#
# with fd 4 open on a "ready" file: the holder sets its namespaces up, writes
# "ready" there, closes it and becomes `sleep infinity`, so that its PID
# names the node's namespaces (`nsenter -t PID -m -n -u`) for as long as the
# node lives. It dies with cluster.sh (pdeathsig), and with it, once the
# ranks inside have exited, the namespaces and everything in them: the
# node's tmpfs mounts, its veth end, the bridge.
#
# A node gets, in its own mount namespace (propagation private: nothing
# reaches the host's mounts), a fresh tmpfs on /dev/shm and on /tmp. KEEP
# paths (the build tree, the shared run directory, the repository) that lie
# under /tmp are bound back into the new /tmp at the same path, reached
# through a descriptor of the old /tmp opened before it was covered.
set -eu
mode=$1
shift
case $mode in
  switch)
    br=$1
    printf 'link set lo up\nlink add %s type bridge\nlink set %s up\n' "$br" "$br" | ip -batch -
    ;;
  node)
    name=$1 shmtag=$2 tmptag=$3
    shift 3
    exec 3</tmp
    [ -d /dev/shm ] || mkdir -p /dev/shm
    mount -t tmpfs -o mode=1777,nosuid,nodev "$shmtag" /dev/shm
    mount -t tmpfs -o mode=1777,nosuid,nodev "$tmptag" /tmp
    bound=()
    for p in "$@"; do
      case $p in /tmp/*) ;; *) continue ;; esac
      covered=0
      for b in ${bound[@]+"${bound[@]}"}; do
        case $p/ in "$b"/*) covered=1 ;; esac
      done
      [ $covered = 1 ] && continue
      mkdir -p "$p"
      # -c: no canonicalization, or mount would resolve the source to the
      # path in the new /tmp instead of following the descriptor
      mount -c --bind "/proc/self/fd/3/${p#/tmp/}" "$p"
      bound+=("$p")
    done
    exec 3<&-
    echo "$name" >/proc/sys/kernel/hostname # (hostname(1) without its fork: the node's UTS namespace)
    ip link set lo up
    ;;
  *)
    echo "holder.sh: unknown mode '$mode'" >&2
    exit 2
    ;;
esac
echo ready >&4
exec 4>&-
exec sleep infinity
