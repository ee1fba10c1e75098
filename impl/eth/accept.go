package eth

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// The data port's side of a join: the accept loop takes the connections peers dial, admits
// those that present one of this rank's tokens, and await hands a join the one it waits for.

// acceptLoop takes connections and keeps those that present one of this rank's tokens. An
// accept that fails for want of a descriptor or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) leaves
// the connection queued: the loop backs off (at most acceptBackoff) and tries again (the
// descriptors may come free), at once when a join starts waiting (await kicks it), and a join
// fails with that error as soon as an accept fails while it waits, instead of after a timeout
// per connection.
func (e *eth) acceptLoop() {
	defer e.wg.Done()
	backoff := time.Duration(0)
	for {
		c, err := e.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if !acceptRetriable(err) {
				logx.Warnf("rank %d: Ethernet transport: accept: %v", e.h.Rank, err)
				return
			}
			e.mu.Lock()
			if e.acceptErr == nil {
				logx.Warnf("rank %d: Ethernet transport: accept: %v (%s); retrying", e.h.Rank, err, fdLimit())
			}
			e.acceptErr = err
			e.acceptFails++
			e.cond.Broadcast()
			e.mu.Unlock()
			backoff = min(max(2*backoff, time.Millisecond), acceptBackoff)
			select {
			case <-time.After(backoff):
			case <-e.kick:
			case <-e.quit:
				return
			}
			continue
		}
		if backoff != 0 {
			backoff = 0
			e.mu.Lock()
			e.acceptErr = nil
			e.mu.Unlock()
		}
		e.wg.Add(1)
		go e.admit(c)
	}
}

// acceptBackoff is the longest pause of the accept loop between two accepts that failed for want
// of descriptors: also about the longest a join waits to learn of it.
const acceptBackoff = 100 * time.Millisecond

// acceptRetriable says whether an accept error is a shortage that may pass (the connection
// stays queued), not the listener's end.
func acceptRetriable(err error) bool {
	for _, e := range []error{unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM, unix.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// fdLimit describes the process's open-file limit, for the message of an EMFILE.
func fdLimit() string {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) != nil {
		return "open-file limit unknown"
	}
	return fmt.Sprintf("open-file limit RLIMIT_NOFILE %d, ulimit -n", l.Cur)
}

func (e *eth) admit(c *net.TCPConn) {
	defer e.wg.Done()
	var hello [helloBytes]byte
	// a peer dials right after the bootstrap told it where: the short deadline of the bootstrap's
	// own handshakes, not the whole timeout, so that a silent stranger holds nothing for long
	c.SetReadDeadline(time.Now().Add(bootstrap.HandshakeTimeout(e.timeout)))
	if _, err := io.ReadFull(c, hello[:]); err != nil || string(hello[:4]) != "MSEH" {
		e.drops.dropped(fmt.Sprintf("from %s that sent no valid hello", c.RemoteAddr()))
		c.Close()
		return
	}
	var tok [tokenBytes]byte
	copy(tok[:], hello[8:])
	e.mu.Lock()
	defer e.mu.Unlock()
	idx, ok := e.tokens[tok]
	if !ok || e.closed {
		e.drops.dropped(fmt.Sprintf("from %s with an unknown token", c.RemoteAddr()))
		c.Close()
		return
	}
	delete(e.tokens, tok) // one use
	c.SetReadDeadline(time.Time{})
	e.arrived[idx] = c
	e.cond.Broadcast()
}

// await waits for the connection of join idx from peer (at from), at most the timeout.
func (e *eth) await(idx, peer int, from netip.AddrPort) (*net.TCPConn, error) {
	deadline := time.Now().Add(e.timeout)
	t := time.AfterFunc(e.timeout, func() { e.mu.Lock(); e.cond.Broadcast(); e.mu.Unlock() })
	defer t.Stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	fails := e.acceptFails
	if e.acceptErr != nil {
		select { // try again now: the descriptors may be free, or this join fails at once
		case e.kick <- struct{}{}:
		default:
		}
	}
	for e.arrived[idx] == nil {
		if e.acceptFails != fails && e.acceptErr != nil && !errors.Is(e.acceptErr, unix.ECONNABORTED) {
			return nil, status.Errorf(status.SystemError, "Ethernet transport: cannot accept the connection of rank %d (%s): accept: %v (%s)",
				peer, from.Addr(), e.acceptErr, fdLimit())
		}
		if time.Now().After(deadline) || e.closed {
			return nil, status.Errorf(status.RemoteError, "Ethernet transport: rank %d (%s) did not connect within %v", peer, from.Addr(), e.timeout)
		}
		e.cond.Wait()
	}
	c := e.arrived[idx]
	delete(e.arrived, idx)
	return c, nil
}
