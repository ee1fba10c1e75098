package bootstrap

// The accepting side of every bootstrap connection, one loop for a rank's
// listener and the root's: accept, track, and hand each connection to its
// owner's handshake, which starts with the same challenge and hello (greet).

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// acceptor is one listener's accept loop and what it needs from its owner.
type acceptor struct {
	ln        *net.TCPListener
	hsTimeout time.Duration                    // how long a connection has to present its hello
	wg        *sync.WaitGroup                  // counts the loop (added by the caller) and every serve
	who       string                           // names the owner in log lines
	logf      logFunc                          // where accept errors are reported
	stopped   func() bool                      // the owner is going away: an accept error ends the loop quietly
	track     func(*net.TCPConn) bool          // records a connection; false: the owner closed, the loop ends
	serve     func(*net.TCPConn, nonce, error) // the rest of the handshake (see greet) and what follows, in its own goroutine
}

// loop accepts until the listener closes; run it as a goroutine after wg.Add(1).
func (a acceptor) loop() {
	defer a.wg.Done()
	for {
		c, err := a.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || a.stopped() {
				return
			}
			a.logf(true, "%s: accept: %v", a.who, err)
			time.Sleep(5 * time.Millisecond) // back off from e.g. EMFILE
			continue
		}
		if !a.track(c) {
			c.Close()
			return
		}
		// The challenge goes out from here, not from the connection's goroutine:
		// the peer's next step does not wait for that goroutine to start. Forty
		// bytes into a new connection's empty buffer do not block.
		ch, err := challenge(c, a.hsTimeout)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.serve(c, ch, err)
		}()
	}
}

// challenge starts every handshake: it gives the connection hsTimeout to present its
// hello (the deadline stays set for the answer) and sends it a fresh challenge.
func challenge(c net.Conn, hsTimeout time.Duration) (nonce, error) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c.SetDeadline(deadlineIn(hsTimeout))
	ch, err := writeChallenge(c)
	if err != nil {
		return ch, stranger("sending it a challenge failed: %v", err)
	}
	return ch, nil
}

// greet is the second step of every handshake: read the hello that answers ch
// (sent by challenge, which failed with chErr when not nil).
func greet(c net.Conn, ch nonce, chErr error, magic uint64, key *[keyBytes]byte) (*hello, nonce, error) {
	if chErr != nil {
		return nil, ch, chErr
	}
	h, err := readHello(c, magic, key, &ch)
	return h, ch, err
}

// acceptor is this rank's accept loop: ring, star and point-to-point connections.
func (b *Bootstrap) acceptor() acceptor {
	return acceptor{ln: b.ln, hsTimeout: b.hsTimeout, wg: &b.wg, who: fmt.Sprintf("bootstrap rank %d", b.rank), logf: b.logf,
		stopped: func() bool { return b.failed() != nil }, track: func(c *net.TCPConn) bool { return b.track(c) }, serve: b.serveConn}
}

// serveConn checks a connection to this rank's listener and hands it to the
// ring or to a point-to-point reader.
func (b *Bootstrap) serveConn(c *net.TCPConn, ch nonce, chErr error) {
	h, _, err := greet(c, ch, chErr, b.magic, &b.key)
	if err == nil {
		err = b.claim(h)
	}
	if err != nil {
		if b.failed() == nil {
			b.logf(true, "bootstrap rank %d: dropped a connection from %s: %v", b.rank, c.RemoteAddr(), err)
		}
		b.untrack(c)
		return
	}
	ack := hello{kind: kindAck, magic: b.magic, rank: b.rank, nranks: b.nranks}
	if _, err := c.Write(ack.encode(&b.key, &h.nonce)); err != nil {
		if h.kind == kindP2P {
			b.endPeer(h.rank, err)
		}
		b.untrack(c)
		return
	}
	c.SetDeadline(time.Time{})
	switch h.kind {
	case kindRing:
		b.ringCh <- c // buffered, and claimed only once
		return
	case kindStar:
		b.starCh <- starConnection{c, h.rank} // buffered, and claimed once per rank
		return
	}
	b.readPeer(h.rank, c)
}

// claim checks a peer's hello and reserves its slot.
func (b *Bootstrap) claim(h *hello) error {
	if h.nranks != b.nranks {
		return stranger("it says nranks=%d, this communicator has %d", h.nranks, b.nranks)
	}
	if h.rank < 0 || h.rank >= b.nranks || h.rank == b.rank {
		return stranger("it claims to be rank %d", h.rank)
	}
	b.boxMu.Lock()
	defer b.boxMu.Unlock()
	switch h.kind {
	case kindRing:
		if prev := (b.rank + b.nranks - 1) % b.nranks; h.rank != prev {
			return stranger("rank %d offered a ring connection, but the ring predecessor is rank %d", h.rank, prev)
		}
		if b.ringIn {
			return stranger("rank %d offered a second ring connection", h.rank)
		}
		b.ringIn = true
	case kindStar:
		if b.rank != 0 {
			return stranger("rank %d offered a star connection, but this is rank %d, not 0", h.rank, b.rank)
		}
		if b.nranks < starMinRanks || b.starIn[h.rank] {
			return stranger("rank %d offered an unexpected star connection", h.rank)
		}
		b.starIn[h.rank] = true
	case kindP2P:
		if b.inFrom[h.rank] {
			return stranger("rank %d offered a second point-to-point connection", h.rank)
		}
		b.inFrom[h.rank] = true
	default:
		return stranger("it sent a kind %d hello to a rank", h.kind)
	}
	return nil
}
