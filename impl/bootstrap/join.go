package bootstrap

// A rank joining its communicator: registering with the root, taking the
// rows it needs, connecting its ring and star (ring.go) while Options.Joined
// runs, gathering the other rows (table.go), reporting ready, and taking the
// root's last word.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/logx"
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
	b.ringOnly = opts.RingOnlyOnOneHost && b.gatherSlot == 0 && oneHost(b.table)
	// While the ring and star form, the root's verdict may come at any
	// time: a failure aborts this rank at once.
	verdict := b.verdictSource(rs)
	if err := b.connectAndJoin(rs, verdict, opts.Joined); err != nil {
		return nil, err
	}
	if err := b.gatherTable(); err != nil {
		return nil, b.fail(b.joinFailed(rs, verdict, err))
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
	c         net.Conn      // a TCP connection, or a pipe to local
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
	familyEnv() // read, and a malformed value reported, at every init as ENVIRONMENT.md says, whatever the address
	if strings.TrimSpace(ifnameEnv()) != "" {
		a, err := selectInterface()
		if err != nil {
			return err
		}
		lip = a.ip
	} else if ta, ok := rs.c.LocalAddr().(*net.TCPAddr); ok {
		lip = ta.AddrPort().Addr().Unmap()
	} else {
		lip = localSource(rs.addr.Addr())
	}
	var err error
	b.ln, err = ListenTCP(netip.AddrPortFrom(lip, 0), true)
	if err != nil {
		return b.errorf(status.SystemError, "cannot listen at %s: %w", lip, err)
	}
	b.listenAddr = netip.AddrPortFrom(lip, uint16(b.ln.Addr().(*net.TCPAddr).Port)).String()
	b.wg.Add(1)
	go b.acceptor().loop()
	return nil
}

// tellRoot tells the root why this rank cannot join (err: its own setting, found before it
// registered), so that every rank fails at once with the reason instead of waiting for this
// one until the timeout. Best effort, bounded by the handshake timeout; the root of this
// process learns it through root.abort instead.
func (b *Bootstrap) tellRoot(rs *rootSession, err error) {
	if rs.local != nil {
		return
	}
	rs.c.SetDeadline(deadlineIn(b.hsTimeout))
	if b.readRootChallenge(rs) != nil {
		return
	}
	text := err.Error()
	if len(text) > maxHelloPayload-1 {
		text = text[:maxHelloPayload-1]
	}
	h := hello{kind: kindAbort, magic: b.magic, nonce: newNonce(), rank: b.rank, nranks: b.nranks,
		payload: append([]byte{byte(status.CodeOf(err))}, text...)}
	_, _ = rs.c.Write(h.encode(&b.key, &rs.challenge))
}

// localSource is the address a TCP connection from this host to its own address a
// leaves from: a itself (the kernel's route to a local address prefers it), or for
// an unspecified address (which reaches this host) its family's loopback.
func localSource(a netip.Addr) netip.Addr {
	a = a.Unmap()
	switch {
	case !a.IsUnspecified():
		return a
	case a.Is4():
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	return netip.IPv6Loopback()
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
	t, ok := decodeTable(payload, b.nranks)
	if rows := t.rows; !ok || rows[b.rank].addr != b.listenAddr || rows[b.rank].token != rs.hello.nonce ||
		rows[(b.rank+1)%b.nranks].addr == "" || rows[0].addr == "" {
		return b.errorf(status.RemoteError, "the root at %s sent a malformed table", rs.addr)
	}
	b.table, b.nonce, b.rootAddr, b.gatherSlot = t.rows, t.nonce, rs.addr.String(), t.slot
	rs.c.SetDeadline(deadlineIn(rs.wait))
	return nil
}

// verdictSource returns the root's verdict; with wait > 0 it gives up after
// wait (false: no verdict came), with 0 it waits until the session's deadline.
type verdictSource func(wait time.Duration) (rootVerdict, bool)

// verdictSource reads the root's verdict in the background: a failure the
// root reports while the ring and star form (or Options.Joined runs) aborts
// this rank at once.
func (b *Bootstrap) verdictSource(rs *rootSession) verdictSource {
	ch := make(chan rootVerdict, 1)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		v := b.readVerdict(rs)
		if v.err != nil {
			v.err = b.fail(v.err)
		}
		ch <- v
	}()
	var got *rootVerdict // what the channel delivered (it delivers once)
	return func(wait time.Duration) (rootVerdict, bool) {
		if got != nil {
			return *got, true
		}
		var timeout <-chan time.Time
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case v := <-ch:
			got = &v
			return v, true
		case <-timeout:
			return rootVerdict{}, false
		}
	}
}

// readVerdict reads the root's last word from rs; err != nil is this rank's
// error (not yet recorded with fail).
func (b *Bootstrap) readVerdict(rs *rootSession) rootVerdict {
	st, payload, err := readReply(rs.c, b.magic, &b.key, labelDone, &rs.hello.nonce, maxErrorText)
	v := rootVerdict{fromRoot: err == nil}
	if err == nil {
		err = b.replyErr(rs.addr, st, payload)
	} else if b.failed() == nil {
		err = b.rootErr(rs.addr, rs.wait, err)
	}
	v.err = err
	return v
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
	<-connected
	if joinedFirst {
		return jerr
	}
	return first
}

// joinFailed is the error of a rank whose ring or star failed with err.
func (b *Bootstrap) joinFailed(rs *rootSession, verdict verdictSource, err error) error {
	if ferr := b.failed(); ferr != nil {
		return ferr // the failure already recorded (e.g. the root's verdict) is the cause; err its consequence
	}
	// This rank's own failure (often the consequence of another rank's): the
	// others learn it through the root, and the root answers with the first
	// failure it saw, the likely root cause.
	rs.c.SetWriteDeadline(deadlineIn(abortWriteTimeout))
	if _, werr := rs.c.Write(encodeStatus(statusFail, err.Error(), &b.key, &rs.challenge)); werr == nil {
		if v, ok := verdict(min(b.hsTimeout, time.Second)); ok && v.fromRoot && v.err != nil {
			return v.err
		}
	}
	return err
}

// replyErr turns a root reply that is not replyOK into this rank's error.
func (b *Bootstrap) replyErr(rootAddr netip.AddrPort, st byte, payload []byte) error {
	switch st {
	case replyOK:
		return nil
	case replyUsage:
		return b.errorf(status.InvalidUsage, "%s", rootText(payload))
	case replyReject:
		if payload[0] == rejectMagic {
			return b.errorf(status.InvalidUsage, "the root at %s serves another communicator (does every rank name the same root address?)", rootAddr)
		}
		return b.errorf(status.InvalidUsage, "the root at %s refused this rank's key: %s", rootAddr, b.keyAdvice())
	}
	return b.errorf(status.RemoteError, "%s", rootText(payload))
}

// keyAdvice says where the key of this rank came from, for a key that the
// other side does not share.
func (b *Bootstrap) keyAdvice() string {
	if b.keySource == "" {
		return "the unique id differs from the root's (every rank must use the id made by one mscclppGetUniqueId)"
	}
	return fmt.Sprintf("this rank's bootstrap secret (from %s) differs from the root's: %s", b.keySource, secretAdvice)
}

// dialRoot connects to the root, retrying (the root may not listen yet)
// until deadline; wait is as in rootErr. Ranks started together usually
// find the root a fraction of a millisecond to several (ranks outnumbering
// CPUs) before it listens: the retries come after 50 µs, 100 µs, ... (sysinfo.Nap:
// time.Sleep would wait a millisecond at least), see nextRootRetry.
func dialRoot(addr netip.AddrPort, deadline time.Time, wait time.Duration) (net.Conn, error) {
	backoff := 50 * time.Microsecond
	start := time.Now()
	var last error // the last error other than a timeout
	told := false  // that nobody listens, while the retries go on
	refused := false
	d := net.Dialer{Deadline: deadline}
	for {
		c, err := d.Dial("tcp", addr.String())
		if err == nil {
			c.(*net.TCPConn).SetNoDelay(true)
			return c, nil
		}
		if !isTimeout(err) {
			last = err
		}
		refused = refused || errors.Is(err, syscall.ECONNREFUSED) // a last try cut by the deadline reads "i/o timeout"
		if refused && !told && time.Since(start) >= nobodyListensAfter {
			told = true
			logx.Alertf("bootstrap: nobody listens at %s (every connection refused for %.1f s): is the root running, "+
				"and is this its address? Retrying until the bootstrap timeout (%v) ends", addr, time.Since(start).Seconds(), wait-rootGrace)
		}
		left := time.Until(deadline)
		if left <= 0 {
			if refused {
				return nil, status.Errorf(status.RemoteError, "no answer from the root at %s within the bootstrap timeout (%v): nobody listens at %s (every connection was refused)", addr, wait-rootGrace, addr)
			}
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

// nobodyListensAfter is how long a rank's connections to the root are refused before it says
// that nobody listens there (a few retries at the longest pause, past any root's start).
const nobodyListensAfter = time.Second

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
