package bootstrap

// The connections of the collectives (coll.go): the ring (each rank to its
// successor) and, with 3 or more ranks, the star (each rank to rank 0),
// connected during Init; for a communicator formed with
// Options.RingOnlyOnOneHost on one host, the ring alone, at the first
// collective (connectRing): its caller gathers through the node's shared
// memory, so a communicator that never uses the bootstrap's collectives never
// connects a ring.

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

// connectCollectives opens the connections of the ring (to the successor,
// from the predecessor) and of the star (every rank to rank 0); with
// Options.RingOnlyOnOneHost on one host, none: the ring connects on first use
// (connectRing).
func (b *Bootstrap) connectCollectives() error {
	if b.ringOnly {
		return nil
	}
	return b.connect(b.nranks >= starMinRanks, false)
}

// connect opens the ring connections and, with useStar, the star's, within the
// timeout; with watch, a successor that closes the connection this rank dialled
// while it waits for its predecessor ends the wait (see watchClosed).
func (b *Bootstrap) connect(useStar, watch bool) error {
	n := b.nranks
	deadline := time.Now().Add(b.timeout)
	nextRank, prevRank := (b.rank+1)%n, (b.rank+n-1)%n
	var hub <-chan dialed
	if useStar && b.rank != 0 {
		hub = b.dialAsync(0, kindStar, deadline) // at the same time as the ring's: one wait, not two
	}
	c, err := b.dialPeer(nextRank, kindRing, deadline)
	if err != nil {
		return err
	}
	if b.next, err = newRingConn(c, nextRank); err != nil {
		return b.errorf(status.SystemError, "ring connection to rank %d: %w", nextRank, err)
	}
	var gone <-chan error
	var probe <-chan time.Time
	if watch {
		var stop func()
		gone, probe, stop = b.watchWait(c, prevRank)
		defer stop()
	}
	if hub != nil {
		d := <-hub
		if d.err != nil {
			return d.err
		}
		rc, err := newRingConn(d.c, 0)
		if err != nil {
			return b.errorf(status.SystemError, "star connection to rank 0: %w", err)
		}
		b.star = []*ringConn{rc}
	}
	spokes := 0
	if useStar && b.rank == 0 {
		b.star = make([]*ringConn, n)
		spokes = n - 1
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for b.prev == nil || spokes > 0 {
		select {
		case pc := <-b.ringCh:
			if b.prev, err = newRingConn(pc, prevRank); err != nil {
				return b.errorf(status.SystemError, "ring connection from rank %d: %w", prevRank, err)
			}
		case sc := <-b.starCh:
			if b.star[sc.rank], err = newRingConn(sc.c, sc.rank); err != nil {
				return b.errorf(status.SystemError, "star connection from rank %d: %w", sc.rank, err)
			}
			spokes--
		case <-timer.C:
			if b.prev == nil {
				return b.errorf(status.RemoteError, "rank %d (at %s) did not connect within %v", prevRank, b.table[prevRank].addr, b.timeout)
			}
			var missing []int
			for r := 1; r < n; r++ {
				if b.star[r] == nil {
					missing = append(missing, r)
				}
			}
			return b.errorf(status.RemoteError, "%s did not connect to rank 0 within %v", rankList(missing), b.timeout)
		case <-probe:
			if pid := int(b.table[prevRank].pid); b.prev == nil && sysinfo.ProcessGone(pid) {
				return b.errorf(status.RemoteError, "rank %d (pid %d) exited before it connected its ring", prevRank, pid)
			}
		case err := <-gone:
			return b.errorf(status.RemoteError, "rank %d closed its ring connection before rank %d connected (%v): it failed or exited", nextRank, prevRank, err)
		case <-b.done:
			return b.err
		}
	}
	return nil
}

// oneHost reports whether every rank of table has the same host id.
func oneHost(table []peerEntry) bool {
	for _, e := range table {
		if e.hostID != table[0].hostID {
			return false
		}
	}
	return true
}

// pidProbeEvery is how often a rank waiting for its predecessor's ring connection at
// the first collective looks whether the predecessor's process exited.
const pidProbeEvery = 10 * time.Millisecond

// connectRing connects the ring of a communicator that formed without it, at its
// first collective: every rank calls it in the same collective, so each dials its
// successor and takes its predecessor's connection from the accept loop, as Init
// would have. A rank whose successor exited fails (the listener refuses), which
// closes its sockets; a rank waiting for a predecessor whose process exited fails
// (its pid, from the root's table, is gone: all ranks share the host); and a rank
// waiting for its predecessor sees the connection it dialled to its successor close
// when that one fails (watchClosed), and fails in turn. So the death of a rank's
// process goes around the ring at once instead of after the timeout. (A rank whose
// bootstrap was closed in a process that lives on is waited for until the timeout.)
func (b *Bootstrap) connectRing() error {
	if b.next != nil {
		return nil
	}
	if err := b.connect(false, true); err != nil {
		return b.fail(err)
	}
	return nil
}

// watchWait watches, while this rank waits for its predecessor prev at the first
// collective, the connection c it dialled to its successor (gone: see watchClosed)
// and, when prev runs in another process, when to look whether that process
// exited (probe; nil otherwise). Call stop when the wait ends.
func (b *Bootstrap) watchWait(c *net.TCPConn, prev int) (gone <-chan error, probe <-chan time.Time, stop func()) {
	gone, unwatch := watchClosed(c)
	if pid := int(b.table[prev].pid); pid == os.Getpid() {
		return gone, nil, unwatch
	}
	t := time.NewTicker(pidProbeEvery)
	return gone, t.C, func() {
		t.Stop()
		unwatch()
	}
}

// errUnexpectedData is what watchClosed reports when the successor sent something on
// a connection nothing is sent on towards this rank.
var errUnexpectedData = errors.New("it sent data on a connection that carries none this way")

// watchClosed reports on gone when the other side of c closes it (or sends anything:
// the ring carries data only from a rank to its successor, so a rank's connection to
// its successor is silent this way). stop ends the watch and leaves c as it was; call
// it once, after which gone is no longer written.
func watchClosed(c *net.TCPConn) (gone <-chan error, stop func()) {
	read := make(chan error, 1) // the reader's outcome
	out := make(chan error, 1)
	halt := make(chan struct{})
	go func() {
		var one [1]byte
		_, err := c.Read(one[:])
		if err == nil {
			err = errUnexpectedData
		}
		read <- err
	}()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case err := <-read:
			out <- err
		case <-halt:
			c.SetReadDeadline(time.Unix(1, 0)) // wakes the reader
			<-read
			c.SetReadDeadline(time.Time{})
		}
	}()
	return out, func() {
		close(halt)
		<-watched
	}
}

// ringConn is a connection used by collectives (ring or star).
type ringConn struct {
	c    *net.TCPConn
	raw  syscall.RawConn
	peer int
	// dlSet is when the deadline of c was last set; see setDeadline.
	dlSet time.Time
}

func newRingConn(c *net.TCPConn, peer int) (*ringConn, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &ringConn{c: c, raw: raw, peer: peer}, nil
}

// deadlineSlack is how stale a ring deadline may get before it is set again:
// setting a deadline costs a timer update, and a collective of a few µs
// should not pay it every time. A wait is therefore bounded by between
// timeout-deadlineSlack and timeout.
const deadlineSlack = time.Millisecond

// setDeadline makes sure both directions time out at about now+timeout.
func (r *ringConn) setDeadline(now time.Time, timeout time.Duration) {
	if now.Sub(r.dlSet) > deadlineSlack {
		r.dlSet = now
		r.c.SetDeadline(now.Add(timeout))
	}
}

// readAtLeast reads into buf until at least atLeast bytes arrived (never more
// than len(buf)). Before parking in the netpoller it busy-polls the socket
// for up to spin, yielding the CPU between tries: a peer that answers
// within a few µs is seen without the cost of waking a sleeping thread.
func (r *ringConn) readAtLeast(buf []byte, atLeast int, spin time.Duration) (int, error) {
	n := 0
	var opErr error
	var start time.Time
	spinning := spin > 0
	err := r.raw.Read(func(fd uintptr) bool {
		for n < atLeast {
			m, e := syscall.Read(int(fd), buf[n:])
			switch {
			case m > 0:
				n += m
			case e == syscall.EINTR:
			case e == syscall.EAGAIN:
				if !spinning {
					return false
				}
				if start.IsZero() {
					start = time.Now()
				} else if time.Since(start) > spin {
					spinning = false
					return false
				}
				syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
			case e != nil:
				opErr = e
				return true
			default:
				opErr = io.EOF
				return true
			}
		}
		return true
	})
	if err == nil {
		err = opErr
	}
	if err == io.EOF && n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// readFull reads exactly len(buf) bytes.
func (r *ringConn) readFull(buf []byte, spin time.Duration) error {
	_, err := r.readAtLeast(buf, len(buf), spin)
	return err
}
