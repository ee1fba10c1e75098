package bootstrap

// The dialling side of a connection to a peer's listener (ring, star,
// point-to-point); the accepting side is accept.go.

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// dialed is the outcome of dialAsync.
type dialed struct {
	c   *net.TCPConn
	err error
}

// dialAsync runs dialPeer in a goroutine of b (Close waits for it) and delivers its outcome.
func (b *Bootstrap) dialAsync(peer int, kind byte, deadline time.Time) <-chan dialed {
	out := make(chan dialed, 1)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		c, err := b.dialPeer(peer, kind, deadline)
		out <- dialed{c, err}
	}()
	return out
}

// verdictWait bounds how long a rank whose ring or star dial was refused during init waits for
// the root's verdict before it reports the refusal itself.
const verdictWait = time.Second

// awaitVerdict waits up to d for b to fail and returns why (nil if it did not). During init
// every peer's listener is open from before it registered until it fails, so a refused dial
// means the peer failed, and the root tells every rank why (say, a third rank died, which the
// refusing peer heard first): that reason, not "connection refused", is the one to report.
func (b *Bootstrap) awaitVerdict(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-b.done:
		return b.err
	case <-t.C:
		return nil
	}
}

// dialPeer opens a ring or point-to-point connection to peer and waits for
// its acknowledgement.
func (b *Bootstrap) dialPeer(peer int, kind byte, deadline time.Time) (*net.TCPConn, error) {
	addr := b.table[peer].addr
	what := "ring"
	if kind == kindP2P {
		what = "point-to-point"
	}
	d := net.Dialer{Deadline: deadline}
	c, err := d.DialContext(b.dialCtx, "tcp", addr)
	if err != nil {
		if ferr := b.failed(); ferr != nil {
			return nil, ferr // aborted while dialling (dialCtx)
		}
		if kind != kindP2P && errors.Is(err, syscall.ECONNREFUSED) {
			if ferr := b.awaitVerdict(verdictWait); ferr != nil {
				return nil, ferr
			}
		}
		if isTimeout(err) {
			return nil, b.errorf(status.RemoteError, "cannot open a %s connection to rank %d at %s within %v", what, peer, addr, b.timeout)
		}
		return nil, b.errorf(status.RemoteError, "cannot open a %s connection to rank %d at %s: %w", what, peer, addr, err)
	}
	tc := c.(*net.TCPConn)
	if !b.track(tc) {
		tc.Close()
		return nil, b.failed()
	}
	tc.SetNoDelay(true)
	tc.SetDeadline(deadline)
	challenge, err := readChallenge(tc)
	var ack *hello
	h := hello{kind: kind, magic: b.magic, nonce: newNonce(), rank: b.rank, nranks: b.nranks}
	if err == nil {
		_, err = tc.Write(h.encode(&b.key, &challenge))
	}
	if err == nil {
		ack, err = readHello(tc, b.magic, &b.key, &h.nonce)
	}
	if err == nil && (ack.kind != kindAck || ack.rank != peer) {
		err = fmt.Errorf("unexpected answer (kind %d from rank %d)", ack.kind, ack.rank)
	}
	if err != nil {
		b.untrack(tc)
		if e := b.failed(); e != nil {
			return nil, e
		}
		return nil, b.errorf(status.RemoteError, "rank %d at %s did not accept a %s connection: %w", peer, addr, what, err)
	}
	tc.SetDeadline(time.Time{})
	return tc, nil
}
