// Package bootstrap is the out-of-band TCP bootstrap of a communicator: the
// root rendezvous, the connections used by AllGather and Barrier, and
// point-to-point Send/Recv between ranks.
//
// A communicator forms in three steps. A root (started by NewID, or by rank 0
// of InitAddr) collects every rank's registration {rank, nranks, listener
// address, host id} and answers everyone with the full table. Each rank then
// connects to its successor's listener and accepts its predecessor, forming
// the ring, and (with 3 or more ranks) connects to rank 0, forming a star
// that small collectives use (see coll.go). Point-to-point connections are
// made lazily by the first Send to a peer, one per direction, separate from
// the others. Every connection is authenticated by a challenge-response
// over the communicator's key (see wire.go), in both directions; connections
// that do not prove the key are dropped and logged, and the root sends the
// table only to ranks that proved it.
//
// Every wait is bounded by Options.Timeout; failures are status.RemoteError
// naming the rank or root that did not answer. A failed collective aborts
// the rank, which closes its sockets so that the other ranks fail fast in
// turn.
package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

// DefaultTimeout bounds every bootstrap wait when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// MaxRanks is the largest communicator the bootstrap forms.
const MaxRanks = 1024

// rootGrace is how much longer than the root a rank waits for the root's
// answer, so that the root's own (more precise) error reaches it first.
const rootGrace = time.Second

// inlineMax is the largest AllGather slot sent and received inline (write,
// then read); larger slots are written by a second goroutine so that ranks
// never all block in write with full socket buffers.
const inlineMax = 16 << 10

// Options configures NewID, Init and InitAddr.
type Options struct {
	// Timeout bounds every wait (connect, root answer, allgather, barrier,
	// recv); 0 means DefaultTimeout. The library resolves it (the setter,
	// MSCCLPP_BOOTSTRAP_TIMEOUT, the default) in one place: impl's BootstrapTimeout.
	Timeout time.Duration
	// HostID is this rank's host identity, reported to all ranks by HostIDs.
	HostID string
	// Logf receives WARN (warn=true) and INFO lines, possibly from several
	// goroutines at once; nil discards them. Dropped strangers are reported
	// here with warn=true.
	Logf func(warn bool, format string, args ...any)
}

type logFunc func(warn bool, format string, args ...any)

func (o *Options) timeout() (time.Duration, error) {
	switch {
	case o.Timeout < 0:
		return 0, status.Errorf(status.InvalidArgument, "bootstrap: negative timeout %v", o.Timeout)
	case o.Timeout == 0:
		return DefaultTimeout, nil
	}
	return o.Timeout, nil
}

func (o *Options) logger() logFunc {
	if o.Logf == nil {
		return func(bool, string, ...any) {}
	}
	return o.Logf
}

// Bootstrap is one rank's endpoint of a formed communicator. AllGather and
// Barrier calls are serialized; Send and Recv may be called concurrently
// from any goroutine.
type Bootstrap struct {
	rank, nranks int
	magic        uint64
	key          [keyBytes]byte
	keySource    string // where an ip:port communicator's secret came from ("": a unique id)
	timeout      time.Duration
	hsTimeout    time.Duration
	logf         logFunc
	spin         time.Duration
	listenAddr   string
	table        []peerEntry

	ln     *net.TCPListener
	root   *root               // a root of this process that Close stops and waits for
	ringCh chan *net.TCPConn   // the predecessor's ring connection, from the accept loop
	starCh chan starConnection // rank 0: the other ranks' star connections

	collMu     sync.Mutex // serializes AllGather and Barrier
	next, prev *ringConn
	star       []*ringConn // rank 0: one per rank (index 0 unused); others: the one to rank 0
	seq        uint64
	sbuf, rbuf []byte

	out []outConn // outgoing point-to-point connections, by peer

	boxMu   sync.Mutex
	box     map[boxKey][][]byte
	waiters map[boxKey]chan struct{} // closed when a message for the key arrives
	inFrom  []bool                   // an incoming point-to-point connection from the peer was accepted
	inErr   []error                  // why the incoming connection from the peer ended
	queued  []int                    // bytes of the peer's messages queued, not yet received (see admit)
	qTotal  int                      // the sum of queued
	ringIn  bool                     // the predecessor's ring connection was accepted
	starIn  []bool                   // rank 0: the rank's star connection was accepted

	mu     sync.Mutex // guards conns and closed
	conns  map[*net.TCPConn]struct{}
	closed bool
	wg     sync.WaitGroup // accept loop, handshakes, point-to-point readers

	abortOnce sync.Once
	err       error         // why the bootstrap is unusable; set before done is closed
	done      chan struct{} // closed by Abort or Close
	closeOnce sync.Once
}

// outConn is the connection this rank sends point-to-point messages to one
// peer on.
type outConn struct {
	mu  sync.Mutex
	c   *net.TCPConn
	err error
}

type boxKey struct{ peer, tag int }

// starConnection is a star connection accepted by rank 0.
type starConnection struct {
	c    *net.TCPConn
	rank int
}

func checkArgs(rank, nranks int, opts *Options) (time.Duration, error) {
	if nranks <= 0 || nranks > MaxRanks {
		return 0, status.Errorf(status.InvalidArgument, "bootstrap: nranks %d out of range 1..%d", nranks, MaxRanks)
	}
	if rank < 0 || rank >= nranks {
		return 0, status.Errorf(status.InvalidArgument, "bootstrap: rank %d out of range for %d ranks", rank, nranks)
	}
	if len(opts.HostID) > maxHostIDLen {
		return 0, status.Errorf(status.InvalidArgument, "bootstrap: host id of %d bytes is longer than %d", len(opts.HostID), maxHostIDLen)
	}
	return opts.timeout()
}

func newBootstrap(magic uint64, key [keyBytes]byte, rank, nranks int, timeout time.Duration, opts *Options) *Bootstrap {
	return &Bootstrap{
		rank:      rank,
		nranks:    nranks,
		magic:     magic,
		key:       key,
		timeout:   timeout,
		hsTimeout: handshakeTimeout(timeout),
		logf:      opts.logger(),
		ringCh:    make(chan *net.TCPConn, 1),
		starCh:    make(chan starConnection, nranks),
		starIn:    make([]bool, nranks),
		out:       make([]outConn, nranks),
		box:       make(map[boxKey][][]byte),
		waiters:   make(map[boxKey]chan struct{}),
		inFrom:    make([]bool, nranks),
		inErr:     make([]error, nranks),
		queued:    make([]int, nranks),
		conns:     make(map[*net.TCPConn]struct{}),
		done:      make(chan struct{}),
		table:     []peerEntry{{hostID: opts.HostID}},
	}
}

// Init joins the communicator of id as rank of nranks; it is collective and
// returns once every rank is connected to its ring neighbours (and the
// star), or with the same failure on every rank. The key is the id's
// random secret.
func Init(id ID, rank, nranks int, opts Options) (*Bootstrap, error) {
	timeout, err := checkArgs(rank, nranks, &opts)
	if err != nil {
		return nil, err
	}
	f, err := id.decode()
	if err != nil {
		return nil, err
	}
	r := localRoot(f.magic)
	if nranks == 1 {
		if r != nil { // nobody else will register
			r.stop()
			<-r.done
		}
		return newBootstrap(f.magic, f.secret, 0, 1, timeout, &opts), nil
	}
	b, err := initRank(f.addr, f.magic, f.secret, "", rank, nranks, timeout, &opts)
	if err != nil {
		if r != nil { // the other ranks learn why from the root
			r.abort(rank, nranks, err)
		}
		return nil, err
	}
	b.root = r
	return b, nil
}

// InitAddr is mscclppCommInitRank: rank 0 starts the root listening at addr
// (ip:port, [ipv6]:port or host:port) and every rank connects there. As no
// id is exchanged, the magic is derived from the resolved address and the
// key from the address and the user's bootstrap secret (MSCCLPP_BOOTSTRAP_SECRET,
// MSCCLPP_BOOTSTRAP_SECRET_FILE or ~/.mscclpp_cookie; see secret.go), so all
// ranks must name the same root and share the secret. A single rank needs
// no secret.
func InitAddr(addr string, rank, nranks int, opts Options) (*Bootstrap, error) {
	timeout, err := checkArgs(rank, nranks, &opts)
	if err != nil {
		return nil, err
	}
	ap, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	if ap.Port() == 0 {
		return nil, status.Errorf(status.InvalidArgument, "bootstrap: address %q has port 0; the root needs a fixed port", addr)
	}
	magic := addrMagic(ap)
	if nranks == 1 {
		return newBootstrap(magic, [keyBytes]byte{}, 0, 1, timeout, &opts), nil
	}
	key, source, err := addrKey(ap, opts.logger())
	if err != nil {
		return nil, err
	}
	var r *root
	if rank == 0 {
		if r, err = startRoot(ap, magic, key, timeout, opts.logger()); err != nil {
			return nil, err
		}
	}
	b, err := initRank(ap, magic, key, source, rank, nranks, timeout, &opts)
	if err != nil {
		// A root that answers late ranks with this failure is left to
		// finish by itself (at most the timeout). Otherwise this rank's
		// own failure is the communicator's: the root tells every rank
		// why (and then also finishes by itself).
		if r != nil && !r.lingering.Load() {
			r.abort(rank, nranks, err)
		}
		return nil, err
	}
	b.root = r
	return b, nil
}

// initRank registers with the root at rootAddr, builds the ring and the
// star, and waits until the root says that every rank did.
func initRank(rootAddr netip.AddrPort, magic uint64, key [keyBytes]byte, keySource string, rank, nranks int, timeout time.Duration, opts *Options) (_ *Bootstrap, err error) {
	b := newBootstrap(magic, key, rank, nranks, timeout, opts)
	b.keySource = keySource
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	rootWait := timeout + rootGrace
	rootDeadline := time.Now().Add(rootWait)
	rc, err := dialRoot(rootAddr, rootDeadline, rootWait)
	if err != nil {
		return nil, b.errorf(status.RemoteError, "%v", err)
	}
	if !b.track(rc) {
		rc.Close()
		return nil, b.failed()
	}
	defer b.untrack(rc)
	rc.SetNoDelay(true)
	rc.SetDeadline(rootDeadline)
	challenge, err := readChallenge(rc)
	if err != nil {
		return nil, b.rootErr(rootAddr, rootWait, err)
	}

	// This rank's listener.
	var lip netip.Addr
	if strings.TrimSpace(env.Get(EnvSocketIfname)) != "" {
		a, err := selectInterface()
		if err != nil {
			return nil, err
		}
		lip = a.ip
	} else {
		lip = rc.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	}
	b.ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(lip, 0)))
	if err != nil {
		return nil, b.errorf(status.SystemError, "cannot listen at %s: %w", lip, err)
	}
	b.listenAddr = netip.AddrPortFrom(lip, uint16(b.ln.Addr().(*net.TCPAddr).Port)).String()
	b.wg.Add(1)
	go b.acceptLoop()

	// Register and wait for the table.
	h := hello{kind: kindRegister, magic: magic, nonce: newNonce(), rank: rank, nranks: nranks,
		payload: encodeRegister(b.listenAddr, opts.HostID)}
	if _, err := rc.Write(h.encode(&key, &challenge)); err != nil {
		return nil, b.rootErr(rootAddr, rootWait, err)
	}
	st, payload, err := readReply(rc, magic, &key, labelReply, &h.nonce, maxTableLen(nranks))
	if err != nil {
		return nil, b.rootErr(rootAddr, rootWait, err)
	}
	if err := b.replyErr(rootAddr, st, payload); err != nil {
		return nil, err
	}
	table, ok := decodeTable(payload, nranks)
	if !ok || table[rank].addr != b.listenAddr {
		return nil, b.errorf(status.RemoteError, "the root at %s sent a malformed table", rootAddr)
	}
	b.table = table
	rc.SetDeadline(deadlineIn(rootWait))

	// While the ring and star form, the root's verdict may come at any
	// time: a failure aborts this rank at once.
	type rootVerdict struct {
		err      error
		fromRoot bool // the root answered (rather than the connection failing)
	}
	verdict := make(chan rootVerdict, 1)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		st, payload, err := readReply(rc, magic, &key, labelDone, &h.nonce, maxErrorText)
		v := rootVerdict{fromRoot: err == nil}
		if err == nil {
			err = b.replyErr(rootAddr, st, payload)
		} else if b.failed() == nil {
			err = b.rootErr(rootAddr, rootWait, err)
		}
		if err != nil {
			err = b.fail(err)
		}
		v.err = err
		verdict <- v
	}()
	if err := b.connectCollectives(); err != nil {
		if ferr := b.failed(); ferr != nil {
			return nil, ferr // the failure already recorded (e.g. the root's verdict) is the cause; err its consequence
		}
		{
			// This rank's own failure (often the consequence of another
			// rank's): the others learn it through the root, and the root
			// answers with the first failure it saw, the likely root cause.
			rc.SetWriteDeadline(deadlineIn(abortWriteTimeout))
			if _, werr := rc.Write(encodeStatus(statusFail, err.Error(), &key, &challenge)); werr == nil {
				select {
				case v := <-verdict:
					if v.fromRoot && v.err != nil {
						return nil, v.err
					}
				case <-time.After(min(b.hsTimeout, time.Second)):
				}
			}
		}
		return nil, err
	}
	if _, err := rc.Write(encodeStatus(statusReady, "", &key, &challenge)); err != nil {
		return nil, b.fail(b.rootErr(rootAddr, rootWait, err))
	}
	if v := <-verdict; v.err != nil {
		return nil, v.err
	}

	local := 0
	for _, e := range table {
		if e.hostID == opts.HostID {
			local++
		}
	}
	b.spin = spinBudget(local, sysinfo.OnlineCPUs())
	b.logf(false, "bootstrap: rank %d of %d of communicator %#x ready, listening at %s", rank, nranks, magic, b.listenAddr)
	return b, nil
}

// replyErr turns a root reply that is not replyOK into this rank's error.
func (b *Bootstrap) replyErr(rootAddr netip.AddrPort, st byte, payload []byte) error {
	switch st {
	case replyOK:
		return nil
	case replyUsage:
		return b.errorf(status.InvalidUsage, "%s", payload)
	case replyReject:
		if payload[0] == rejectMagic {
			return b.errorf(status.InvalidUsage, "the root at %s serves another communicator (does every rank name the same root address?)", rootAddr)
		}
		return b.errorf(status.InvalidUsage, "the root at %s refused this rank's key: %s", rootAddr, b.keyAdvice())
	}
	return b.errorf(status.RemoteError, "%s", payload)
}

// keyAdvice says where the key of this rank came from, for a key that the
// other side does not share.
func (b *Bootstrap) keyAdvice() string {
	if b.keySource == "" {
		return "the unique id differs from the root's (every rank must use the id made by one mscclppGetUniqueId)"
	}
	return fmt.Sprintf("this rank's bootstrap secret (from %s) differs from the root's: %s", b.keySource, secretAdvice)
}

// connectCollectives opens the connections of the ring (to the successor,
// from the predecessor) and of the star (every rank to rank 0).
func (b *Bootstrap) connectCollectives() error {
	n := b.nranks
	deadline := time.Now().Add(b.timeout)
	nextRank, prevRank := (b.rank+1)%n, (b.rank+n-1)%n
	c, err := b.dialPeer(nextRank, kindRing, deadline)
	if err != nil {
		return err
	}
	if b.next, err = newRingConn(c, nextRank); err != nil {
		return b.errorf(status.SystemError, "ring connection to rank %d: %w", nextRank, err)
	}
	useStar := n >= starMinRanks
	if useStar && b.rank != 0 {
		c, err := b.dialPeer(0, kindStar, deadline)
		if err != nil {
			return err
		}
		hub, err := newRingConn(c, 0)
		if err != nil {
			return b.errorf(status.SystemError, "star connection to rank 0: %w", err)
		}
		b.star = []*ringConn{hub}
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
		case <-b.done:
			return b.err
		}
	}
	return nil
}

// dialRoot connects to the root, retrying (the root may not listen yet)
// until deadline; wait is as in rootErr.
func dialRoot(addr netip.AddrPort, deadline time.Time, wait time.Duration) (*net.TCPConn, error) {
	backoff := 250 * time.Microsecond
	var last error // the last error other than a timeout
	for {
		d := net.Dialer{Deadline: deadline}
		c, err := d.Dial("tcp", addr.String())
		if err == nil {
			return c.(*net.TCPConn), nil
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
		time.Sleep(min(backoff, left))
		backoff = min(2*backoff, 4*time.Millisecond)
	}
}

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

// errorf makes an error with code c whose message names this rank.
func (b *Bootstrap) errorf(c status.Code, format string, args ...any) error {
	return status.Errorf(c, "bootstrap rank %d of %d: "+format, append([]any{b.rank, b.nranks}, args...)...)
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
	c, err := d.Dial("tcp", addr)
	if err != nil {
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

// track records c so that Abort closes it; false if already aborted.
func (b *Bootstrap) track(c *net.TCPConn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

// untrack forgets and closes c.
func (b *Bootstrap) untrack(c *net.TCPConn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	c.Close()
}

func (b *Bootstrap) acceptLoop() {
	defer b.wg.Done()
	for {
		c, err := b.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || b.failed() != nil {
				return
			}
			b.logf(true, "bootstrap rank %d: accept: %v", b.rank, err)
			time.Sleep(5 * time.Millisecond) // back off from e.g. EMFILE
			continue
		}
		if !b.track(c) {
			c.Close()
			return
		}
		b.wg.Add(1)
		go b.serveConn(c)
	}
}

// serveConn checks a connection to this rank's listener and hands it to the
// ring or to a point-to-point reader.
func (b *Bootstrap) serveConn(c *net.TCPConn) {
	defer b.wg.Done()
	c.SetNoDelay(true)
	c.SetDeadline(deadlineIn(b.hsTimeout))
	challenge, err := writeChallenge(c)
	var h *hello
	if err == nil {
		h, err = readHello(c, b.magic, &b.key, &challenge)
	} else {
		err = stranger("sending it a challenge failed: %v", err)
	}
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

// Rank returns this rank.
func (b *Bootstrap) Rank() int { return b.rank }

// Size returns the number of ranks.
func (b *Bootstrap) Size() int { return b.nranks }

// Magic returns the communicator magic shared by all ranks.
func (b *Bootstrap) Magic() uint64 { return b.magic }

// HostIDs returns every rank's Options.HostID, indexed by rank.
func (b *Bootstrap) HostIDs() []string {
	ids := make([]string, len(b.table))
	for i, e := range b.table {
		ids[i] = e.hostID
	}
	return ids
}

// ListenAddr returns the address of this rank's listener ("" for one rank).
func (b *Bootstrap) ListenAddr() string { return b.listenAddr }

// failed returns why the bootstrap is unusable, or nil.
func (b *Bootstrap) failed() error {
	select {
	case <-b.done:
		return b.err
	default:
		return nil
	}
}

// fail records err as the reason the bootstrap is unusable (the first call
// wins), closes every socket so blocked calls and peers learn at once, and
// returns the recorded reason.
func (b *Bootstrap) fail(err error) error {
	b.abortOnce.Do(func() {
		b.err = err
		close(b.done)
		b.mu.Lock()
		b.closed = true
		conns := b.conns
		b.conns = nil
		b.mu.Unlock()
		if b.ln != nil {
			b.ln.Close()
		}
		for c := range conns {
			c.Close()
		}
		if b.root != nil {
			b.root.stop()
		}
	})
	return b.err
}

// Abort marks the bootstrap broken: every pending and later call returns
// err (a RemoteError if nil), and its sockets are closed so peers learn fast.
func (b *Bootstrap) Abort(err error) {
	if err == nil {
		err = b.errorf(status.RemoteError, "aborted")
	}
	b.fail(err)
}

// Close closes every socket and listener, including a root of this process
// that still listens, and waits for the bootstrap's goroutines; it is
// idempotent, and later calls return status.InvalidUsage.
func (b *Bootstrap) Close() error {
	b.fail(b.errorf(status.InvalidUsage, "used after Close"))
	b.closeOnce.Do(func() {
		b.wg.Wait()
		if b.root != nil {
			b.root.stop()
			<-b.root.done
		}
	})
	return nil
}
