package bootstrap

// The ring of a communicator formed with Options.RingOnlyOnOneHost on one host:
// its Init makes no ring connection (the caller does not use the bootstrap's
// collectives there), and the first collective connects it.

import (
	"errors"
	"net"
	"os"
	"time"
)

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
