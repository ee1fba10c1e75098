package impl

// The node's shared-memory segment, mapped while the bootstrap forms: a rank
// maps it once the root's table names the ranks of its node, before it
// reports ready, so that the root's last answer (which waits for every rank's
// ready) also says that every local rank has mapped it; nobody waits for the
// others a second time.

import (
	"fmt"
	"os"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/nodeshm"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

// nodeJoin is the segment a rank mapped from inside the bootstrap (Options.Joined).
type nodeJoin struct {
	start time.Time
	seg   *nodeshm.Segment // nil until joined (and for a communicator of one)
	local map[int]int      // localRanks of the bootstrap's host ids, once joined
}

// options are the bootstrap options of a communicator that maps its node segment while
// it forms.
func (j *nodeJoin) options() bootstrap.Options {
	o := bootOptions()
	o.Joined = j.joined
	return o
}

func (j *nodeJoin) joined(b *bootstrap.Bootstrap) error {
	local, leader := localRanks(b.HostIDs(), b.Rank())
	seg, err := openNode(b, local, leader, j.start, nodeshm.Join, true)
	if err != nil {
		return fmt.Errorf("rank %d: %w", b.Rank(), err)
	}
	j.seg, j.local = seg, local
	return nil
}

// drop gives up the segment of a communicator that did not form: the other local ranks
// may never map it, so its name goes too.
func (j *nodeJoin) drop() {
	if j.seg != nil {
		j.seg.Unlink()
		j.seg.Close()
		j.seg = nil
	}
}

// localRanks maps the ranks on the node of rank (same host id) to their index there, and
// names the node's lowest rank, which creates the segment.
func localRanks(hostIDs []string, rank int) (map[int]int, int) {
	n := 0
	for _, h := range hostIDs {
		if h == hostIDs[rank] {
			n++
		}
	}
	local, leader := make(map[int]int, n), -1 // sized once
	for r, h := range hostIDs {
		if h == hostIDs[rank] {
			if leader < 0 {
				leader = r
			}
			local[r] = len(local)
		}
	}
	return local, leader
}

type segOpener func(name string, leader bool, nLocal, maxConns int, deadline time.Time, alive func() error) (*nodeshm.Segment, error)

// openNode maps the node segment of b's communicator with open (nodeshm.Open or Join) and
// records this rank's pid in it. The root's per-instance nonce names the segment, so a
// communicator re-formed at the same address never meets a stale segment of an earlier
// one; every rank's pid (in the root's table too) lets local ranks notice one that exits
// while they wait for it. With leaderOnly (nodeshm.Join, whose only wait is for the
// leader to create the segment) only the leader's exit is watched for: the bootstrap reports
// the others, and each check of a process costs a kill and a read of /proc/PID/stat, paid
// on every turn of the wait.
func openNode(b *bootstrap.Bootstrap, local map[int]int, leader int, start time.Time, open segOpener, leaderOnly bool) (*nodeshm.Segment, error) {
	rank, pids := b.Rank(), b.Pids()
	alive := func() error {
		if err := b.Failed(); err != nil {
			return err // the communicator failed elsewhere (from Joined: its leader may never get here)
		}
		for r := range local {
			if leaderOnly && r != leader {
				continue
			}
			if pid := pids[r]; r != rank && sysinfo.ProcessGone(pid) {
				return status.Errorf(status.RemoteError, "rank %d (pid %d) on this node exited during mscclppCommInitRank", r, pid)
			}
		}
		return nil
	}
	name := nodeshm.Name(b.Magic(), b.Nonce(), leader)
	seg, err := open(name, leader == rank, len(local), engine.MaxConns, start.Add(b.Timeout()), alive)
	if err != nil {
		return nil, err
	}
	seg.SetPid(local[rank], os.Getpid())
	return seg, nil
}
