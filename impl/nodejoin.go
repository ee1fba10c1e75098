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
	local, leader := make(map[int]int, n), -1 // sized once: growing it cost 1 % of an init at N=16
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
// the others, and each check of a process costs a kill and a read of /proc/PID/stat, which
// a rank waiting for a busy leader at N=16 paid 15 times a millisecond.
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

// runBootstrap runs f, the bootstrap of rank, and waits for it (a panic in f becomes an
// InternalError, as the C entry points report theirs).
//
// Rank 0 (whose process runs the root, which answers the other ranks from goroutines of its
// own) hands f to a goroutine: the goroutine of a C thread that called into the library is
// locked to that thread, so each of its waits on a channel hands the scheduler's P between
// the thread and another one (two more thread switches each, which cost most when ranks
// outnumber CPUs). A plain goroutine blocks and wakes on whichever thread is free, and the
// calling thread waits once. The goroutine is the idle init worker when there is one (see
// initWorker), else a new one.
//
// Every other rank runs f on the calling thread: on one host its bootstrap waits only in
// system calls on its connection to the root and on the node segment, made without holding
// a P (sysinfo.BlockingSyscall6), so there is nothing to hand over, and the two thread
// switches of a hand-off to the worker and back are saved (perf, 16 ranks on 2 CPUs: 23 %
// less CPU per such rank; rank 0 on its calling thread used 35 % more). Across hosts it
// also waits on channels while its ring and star connect; there the two measured alike
// (4 simulated nodes x 4 ranks, 8 runs each: init 21.4 ms inline, 20.5 ms handed off).
func runBootstrap[T any](rank int, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	job := func() {
		defer func() {
			if r := recover(); r != nil {
				var zero T
				ch <- result{zero, status.Errorf(status.InternalError, "internal error (recovered panic): %v", r)}
			}
		}()
		v, err := f()
		ch <- result{v, err}
	}
	switch {
	case rank != 0:
		job()
	default:
		select {
		case initJobs <- job: // the idle worker took it
		default:
			go job()
		}
	}
	r := <-ch
	return r.v, r.err
}

// initJobs hands a job to the init worker while it is idle (unbuffered: a send succeeds only
// when the worker waits for one).
var initJobs = make(chan func())

// initWorker runs the jobs runBootstrap hands it, one at a time, for the life of the process. It
// is the goroutine that warmed the bootstrap up at load (warm), whose stack has already grown
// through a dial and a handshake: a new goroutine would be created for each init and start
// with a few KiB, growing by copying as the bootstrap's calls deepen. (Stack growth is 4-6 %
// of an init's CPU; most of it is in the bootstrap's own goroutines, not this one.)
func initWorker() {
	for job := range initJobs {
		job()
	}
}
