package bootstrap

// A rank joining its communicator: registering with the root, taking the
// table, opening the ring and star, and the dialling side of every
// connection (the accepting side is accept.go).

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

// initRank registers with the root at rootAddr (ownRoot: the root itself, when
// this process started it for this rank; see root.acceptLocal), builds the ring
// and the star, and waits until the root says that every rank did.
func initRank(rootAddr netip.AddrPort, ownRoot *root, magic uint64, key [keyBytes]byte, keySource string, rank, nranks int, timeout time.Duration, opts *Options) (_ *Bootstrap, err error) {
	b := newBootstrap(magic, key, rank, nranks, timeout, opts)
	b.keySource = keySource
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	rs := &rootSession{addr: rootAddr, wait: timeout + rootGrace, local: ownRoot}
	if err := b.dialRootSession(rs); err != nil {
		return nil, err
	}
	defer b.untrack(rs.c)
	if err := b.listen(rs); err != nil { // while the root's challenge is on its way
		b.tellRoot(rs, err)
		return nil, err
	}
	if err := b.readRootChallenge(rs); err != nil {
		return nil, err
	}
	if err := b.register(rs, opts.HostID); err != nil {
		return nil, err
	}
	b.ringOnly = opts.RingOnlyOnOneHost && oneHost(b.table)
	// While the ring and star form, the root's verdict may come at any
	// time: a failure aborts this rank at once.
	verdict := b.verdictSource(rs)
	if err := b.connectAndJoin(rs, verdict, opts.Joined); err != nil {
		return nil, err
	}
	if _, err := rs.c.Write(encodeStatus(statusReady, "", &b.key, &rs.challenge)); err != nil {
		return nil, b.fail(b.rootErr(rootAddr, rs.wait, err))
	}
	if v, _ := verdict(0); v.err != nil {
		return nil, v.err
	}
	onHost := 0
	for _, e := range b.table {
		if e.hostID == opts.HostID {
			onHost++
		}
	}
	b.spin = spinBudget(onHost, sysinfo.OnlineCPUs())
	b.logf(false, "bootstrap: rank %d of %d of communicator %#x ready, listening at %s", rank, nranks, magic, b.listenAddr)
	return b, nil
}

// rootSession is a rank's connection to the root while the communicator forms.
type rootSession struct {
	addr      netip.AddrPort
	wait      time.Duration // the bootstrap timeout plus rootGrace
	local     *root         // the root of this process (rs.c is then a pipe to it), or nil
	c         net.Conn      // *fdConn, or a pipe to local
	challenge nonce         // what the root sent this rank
	hello     *hello        // this rank's registration
}

// rootVerdict is the root's last word on a forming communicator.
type rootVerdict struct {
	err      error
	fromRoot bool // the root answered (rather than the connection failing)
}

// dialRootSession connects to the root (tracked: the caller untracks rs.c).
func (b *Bootstrap) dialRootSession(rs *rootSession) error {
	deadline := time.Now().Add(rs.wait)
	var c net.Conn
	if rs.local != nil {
		if c = rs.local.acceptLocal(); c == nil {
			return b.errorf(status.RemoteError, "the root at %s was closed before all ranks connected", rs.addr)
		}
	} else {
		rc, err := dialRoot(rs.addr, deadline, rs.wait)
		if err != nil {
			return b.errorf(status.RemoteError, "%v", err)
		}
		c = rc
	}
	if !b.track(c) {
		c.Close()
		return b.failed()
	}
	rs.c = c
	c.SetDeadline(deadline)
	return nil
}

// readRootChallenge reads the root's challenge.
func (b *Bootstrap) readRootChallenge(rs *rootSession) error {
	var err error
	if rs.challenge, err = readChallenge(rs.c); err != nil {
		return b.rootErr(rs.addr, rs.wait, err)
	}
	return nil
}

// listen opens this rank's listener (on MSCCLPP_SOCKET_IFNAME's address, else the
// one the connection to the root leaves from) and starts its accept loop.
func (b *Bootstrap) listen(rs *rootSession) error {
	var lip netip.Addr
	if strings.TrimSpace(env.Get(EnvSocketIfname)) != "" {
		a, err := selectInterface()
		if err != nil {
			return err
		}
		lip = a.ip
	} else if fc, ok := rs.c.(*fdConn); ok && fc.local.IsValid() {
		lip = fc.local.Addr()
	} else {
		lip = localSource(rs.addr.Addr())
	}
	var err error
	b.ln, err = listenTCP(netip.AddrPortFrom(lip, 0), true)
	if err != nil {
		return b.errorf(status.SystemError, "cannot listen at %s: %w", lip, err)
	}
	b.listenAddr = netip.AddrPortFrom(lip, uint16(b.ln.Addr().(*net.TCPAddr).Port)).String()
	b.wg.Add(1)
	go b.acceptor().loop()
	return nil
}

// register sends this rank's registration and takes the root's table.
func (b *Bootstrap) register(rs *rootSession, hostID string) error {
	rs.hello = &hello{kind: kindRegister, magic: b.magic, nonce: newNonce(), rank: b.rank, nranks: b.nranks,
		payload: encodeRegister(b.listenAddr, hostID, uint64(os.Getpid()))}
	if _, err := rs.c.Write(rs.hello.encode(&b.key, &rs.challenge)); err != nil {
		return b.rootErr(rs.addr, rs.wait, err)
	}
	st, payload, err := readReply(rs.c, b.magic, &b.key, labelReply, &rs.hello.nonce, maxTableLen(b.nranks))
	if err != nil {
		return b.rootErr(rs.addr, rs.wait, err)
	}
	if err := b.replyErr(rs.addr, st, payload); err != nil {
		return err
	}
	nonce, table, ok := decodeTable(payload, b.nranks)
	if !ok || table[b.rank].addr != b.listenAddr {
		return b.errorf(status.RemoteError, "the root at %s sent a malformed table", rs.addr)
	}
	b.table, b.nonce = table, nonce
	rs.c.SetDeadline(deadlineIn(rs.wait))
	return nil
}

// verdictSource reads the root's verdict: on a blocking root socket with no
// ring to form, inline (see verdict.go); otherwise in the background, and a
// failure aborts this rank at once.
func (b *Bootstrap) verdictSource(rs *rootSession) verdictSource {
	if fc, ok := rs.c.(*fdConn); ok && b.ringOnly {
		iv := &inlineVerdict{b: b, rs: rs, fc: fc}
		b.joinPoll.Store(iv)
		return iv.get
	}
	verdict := make(chan rootVerdict, 1)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		v := b.readVerdict(rs)
		if v.err != nil {
			v.err = b.fail(v.err)
		}
		verdict <- v
	}()
	return goVerdict(verdict)
}

// connectAndJoin connects the ring and star (in a goroutine) while joined, when set, runs
// beside them: what joined waits for (the node's segment, mapped by another rank) overlaps
// the connections forming instead of coming before them. The first failure of either is
// reported through the root (joinFailed) and fails b, which ends the other half; both have
// returned when connectAndJoin does. A failure of joined is returned as it is (the root's
// answer may name another rank's), as before the two ran side by side.
func (b *Bootstrap) connectAndJoin(rs *rootSession, verdict verdictSource, joined func(*Bootstrap) error) error {
	var once sync.Once
	var first error
	joinedFirst := false
	report := func(err error, fromJoined bool) {
		once.Do(func() { first, joinedFirst = b.fail(b.joinFailed(rs, verdict, err)), fromJoined })
	}
	connected := make(chan struct{})
	if b.ringOnly {
		close(connected) // nothing to connect (connectCollectives)
	} else {
		go func() {
			defer close(connected)
			if err := b.connectCollectives(); err != nil {
				report(err, false)
			}
		}()
	}
	var jerr error
	if joined != nil {
		jerr = joined(b)
		if jerr != nil {
			report(jerr, true) // tells the others, through the root
		}
	}
	b.joinPoll.Store(nil)
	<-connected
	if joinedFirst {
		return jerr
	}
	return first
}

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

// dialRoot connects to the root, retrying (the root may not listen yet)
// until deadline; wait is as in rootErr. Ranks started together usually
// find the root a fraction of a millisecond to several (ranks outnumbering
// CPUs) before it listens: the retries come after 50 µs, 100 µs, ... (sysinfo.Nap:
// time.Sleep would wait a millisecond at least), see nextRootRetry.
func dialRoot(addr netip.AddrPort, deadline time.Time, wait time.Duration) (*fdConn, error) {
	backoff := 50 * time.Microsecond
	start := time.Now()
	var last error // the last error other than a timeout
	for {
		c, err := dialFD(addr, deadline)
		if err == nil {
			return c, nil
		}
		if !isTimeout(err) {
			last = err
		}
		left := time.Until(deadline)
		if left <= 0 {
			if last != nil {
				return nil, status.Errorf(status.RemoteError, "no answer from the root at %s within the bootstrap timeout (%v); last attempt: %v", addr, wait-rootGrace, last)
			}
			return nil, status.Errorf(status.RemoteError, "no answer from the root at %s within the bootstrap timeout (%v)", addr, wait-rootGrace)
		}
		sysinfo.Nap(min(backoff, left))
		backoff = nextRootRetry(backoff, time.Since(start))
	}
}

// nextRootRetry is the pause after one of backoff when the root has refused
// connections for elapsed: doubling up to 1 ms while the root may just be
// starting (a root that starts a moment after its ranks is found within a
// millisecond, not up to 4 ms late), then up to 4 ms (a root started much
// later: fewer connection attempts).
func nextRootRetry(backoff, elapsed time.Duration) time.Duration {
	limit := time.Millisecond
	if elapsed > rootStartWindow {
		limit = 4 * time.Millisecond
	}
	return min(2*backoff, limit)
}

// rootStartWindow is how long after its first attempt a rank retries the root every
// millisecond at most.
const rootStartWindow = 100 * time.Millisecond

// rootErr explains a failed exchange with the root; wait is the bootstrap
// timeout plus rootGrace, and messages name the timeout the user set.
func (b *Bootstrap) rootErr(addr netip.AddrPort, wait time.Duration, err error) error {
	var nb *errNotBootstrap
	switch {
	case errors.As(err, &nb):
		return b.errorf(status.InvalidUsage, "the address %s is not the bootstrap root of this communicator: %v", addr, err)
	case errors.Is(err, errForged):
		return b.errorf(status.InvalidUsage, "the root at %s is not trusted: %v (a root with another bootstrap secret, or not the root of this job; %s)",
			addr, err, b.keyAdvice())
	case isTimeout(err):
		return b.errorf(status.RemoteError, "no answer from the root at %s within the bootstrap timeout (%v)", addr, wait-rootGrace)
	case isPeerGone(err):
		return b.errorf(status.RemoteError, "the root at %s closed the connection before the communicator formed", addr)
	}
	return b.errorf(status.RemoteError, "talking to the root at %s: %w", addr, err)
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
