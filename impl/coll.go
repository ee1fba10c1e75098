package impl

import (
	"sync/atomic"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Collectives of a communicator whose ranks all share one node go through the node's
// shared-memory segment instead of TCP: a rank writes its slot, publishes a sequence number,
// and reads each peer's slot once the peer's sequence number reached it. Collective k uses
// the slots of parity k%2: a rank can only start collective k+2 (overwriting those slots)
// after every peer published k+1, which each does only after it finished reading k.
//
// A gather of more than a slot (Segment.CollSlotBytes) per rank is a run of such rounds, one
// per slot-sized chunk, each with its own sequence number: while slower peers still read
// chunk j from one parity's slots, a rank already writes chunk j+1 into the other's. The
// segment's size does not depend on the gather's, so a gather of any size needs no memory
// beyond the caller's buffer. Every round records the gather's whole size per rank, so
// ranks that call with different sizes fail at their first round instead of pairing chunks
// of different collectives.

// shmCollectives reports whether AllGather of size bytes per rank goes through shared memory:
// of any size, when every rank is on this node.
func (c *Comm) shmCollectives(size int) bool {
	return c.host.Node != nil && c.nranks > 1 && len(c.host.LocalOf) == c.nranks
}

// allGatherShm is AllGather through the node segment (local index == rank on a single node),
// in slot-sized chunks; size 0 is a barrier (one round, no data).
func (c *Comm) allGatherShm(buf []byte, size int) error {
	slot := c.host.Node.CollSlotBytes()
	for off := 0; ; off += slot {
		n := min(size-off, slot)
		if err := c.shmRound(buf, size, off, n); err != nil {
			return err
		}
		if off+n >= size {
			return nil
		}
	}
}

// shmRound is one round of the node-segment protocol: bytes off..off+n of every rank's
// size-byte block of buf.
func (c *Comm) shmRound(buf []byte, size, off, n int) error {
	c.collSeq++
	k, parity := c.collSeq, int(c.collSeq&1)
	mine := c.rank*size + off
	copy(c.host.Node.CollSlot(c.rank, parity), buf[mine:mine+n])
	atomic.StoreUint64(c.host.Node.CollSize(c.rank, parity), uint64(size))
	engine.PublishSeq(c.host.Node.CollSeq(c.rank), k, c.host.Node.CollSleepers(c.rank))
	deadline := time.Now().Add(c.timeout) // per round: a long gather that makes progress never times out
	for p := 0; p < c.nranks; p++ {
		if p == c.rank {
			continue
		}
		if err := c.waitSeq(p, k, deadline, size > n); err != nil {
			c.boot.Abort(err) // peers waiting over TCP learn it too
			return c.remoteFailure(err)
		}
		if got := atomic.LoadUint64(c.host.Node.CollSize(p, parity)); got != uint64(size) {
			err := status.Errorf(status.InvalidUsage, "collective %d: rank %d gathers %d bytes per rank, this rank %d (every rank must call the same collectives with the same size)", k, p, got, size)
			c.boot.Abort(err)
			return err
		}
		theirs := p*size + off
		copy(buf[theirs:theirs+n], c.host.Node.CollSlot(p, parity)[:n])
	}
	return nil
}

// waitSeq waits until rank p published collective k (engine.WaitSeq: the back-off of every
// host wait, whose sleeping phase p's engine.PublishSeq ends at once; brief for the chunk
// rounds of a large gather: a short spin and yield phase), and fails when p's process is
// gone, a remote error was recorded, or deadline passes.
func (c *Comm) waitSeq(p int, k uint64, deadline time.Time, brief bool) error {
	pid := c.host.Node.Pid(p)
	switch c.host.Eng.WaitSeq(c.host.Node.CollSeq(p), k, pid, time.Until(deadline), c.host.Node.CollSleepers(p), brief) {
	case engine.SeqReached:
		return nil
	case engine.SeqGone:
		return status.Errorf(status.RemoteError, "rank %d (pid %d) exited before collective %d", p, pid, k)
	case engine.SeqRemote:
		return c.host.Eng.Err()
	default:
		return status.Errorf(status.RemoteError, "rank %d did not reach collective %d within %v", p, k, c.timeout)
	}
}
