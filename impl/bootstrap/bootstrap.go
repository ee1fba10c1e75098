// Package bootstrap is the out-of-band TCP bootstrap of a communicator: the
// root rendezvous, the connections used by AllGather and Barrier, and
// point-to-point Send/Recv between ranks.
//
// A communicator forms in three steps. A root (started by NewID, or by rank 0
// of InitAddr) collects every rank's registration {rank, nranks, listener
// address, host id} (rank 0 of InitAddr, which started the root, registers
// through an in-memory pipe with the same handshake; every other rank over
// TCP) and answers each with the rows it needs (table.go). Each rank then
// connects to its successor's listener and accepts its predecessor, forming
// the ring, and (with 3 or more ranks) connects to rank 0, forming a star
// that small collectives use (see coll.go). Point-to-point connections are
// made lazily by the first Send to a peer, one per direction, separate from
// the others. Every connection is authenticated by a challenge-response
// over the communicator's key (see auth.go), in both directions; connections
// that do not prove the key are dropped and logged, and the root sends the
// table only to ranks that proved it. Every connection is a net.Conn of Go's
// net package; the one exception, rank 0 of InitAddr talking to the root of
// its own process, runs the same code over a net.Pipe.
//
// The files, by responsibility: wire.go (frame layouts), auth.go and
// secret.go (authentication, and where keys come from), id.go and addr.go
// (unique ids, addresses), root.go and rootrun.go (the root), join.go (a
// joining rank), table.go (the rows of the ranks), accept.go and dial.go
// (the two sides of a connection to a rank), ring.go, coll.go and duplex.go
// (the collectives' connections and algorithms), p2p.go (Send and Recv),
// warm.go (work done once per process at load).
//
// Every wait is bounded by Options.Timeout; failures are status.RemoteError
// naming the rank or root that did not answer. A failed collective aborts
// the rank, which closes its sockets so that the other ranks fail fast in
// turn.
package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
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
	// Joined, when set, runs on a rank of two or more once the root answered
	// (Nonce answers; HostIDs and Pids for this rank's host and its ring
	// neighbours, the others after the gather of table.go), while the rank connects its
	// ring and star (in another goroutine). The root answers a rank only when every rank has
	// reported ready, which each does after its Joined: what Joined did on
	// every rank is done when Init returns. Its error fails the
	// communicator on every rank, as a failed connection does.
	Joined func(b *Bootstrap) error
	// RingOnlyOnOneHost makes no star connections when every rank has the
	// same HostID: for a caller that moves the collectives of a single-host
	// communicator elsewhere (impl: through the node's shared memory), the
	// star would only cost init 2 (N-1) handshakes. AllGather and Barrier
	// then take the ring at every size, and the ring itself connects at the
	// first of them (on every rank: they are collective) instead of during
	// Init, which then costs no ring handshake either.
	RingOnlyOnOneHost bool
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
	ringOnly     bool        // no star, and the ring connects at the first collective (see Options.RingOnlyOnOneHost)
	table        []peerEntry // by rank; a row not known yet has addr "" (see table.go)
	gatherSlot   int         // the slot of gatherTable while rows are missing, else 0
	nonce        uint64      // the root's: names this instance of the communicator
	rootAddr     string      // where this rank reached the root ("" for one rank)

	ln     *net.TCPListener
	root   *root               // a root of this process that Close stops and waits for
	ringCh chan *net.TCPConn   // the predecessor's ring connection, from the accept loop
	starCh chan starConnection // rank 0: the other ranks' star connections

	collMu     sync.Mutex // serializes AllGather and Barrier
	collKeep   bool       // a failed collective does not fail b (gatherTable, under collMu)
	next, prev *ringConn
	star       []*ringConn // rank 0: one per rank (index 0 unused); others: the one to rank 0
	seq        uint64
	sbuf, rbuf []byte

	out []outConn // outgoing point-to-point connections, by peer

	handlers sync.Map // tag -> *tagHandler: messages answered on arrival, not queued (SetTagHandler)

	boxMu   sync.Mutex
	box     map[boxKey][][]byte
	waiters map[boxKey]chan struct{} // closed when a message for the key arrives
	inFrom  []bool                   // an incoming point-to-point connection from the peer was accepted
	inErr   []error                  // why the incoming connection from the peer ended
	queued  []int                    // bytes of the peer's messages queued, not yet received (see admit)
	qTotal  int                      // the sum of queued
	qLimit  queueLimits              // the bounds of queued and qTotal (see admit)
	runs    map[boxKey]*handlerRun   // the handler calls of each (peer, tag) with a handler (see handle)
	refused int                      // messages for a handler refused (too long, or its queue full)
	ringIn  bool                     // the predecessor's ring connection was accepted
	starIn  []bool                   // rank 0: the rank's star connection was accepted

	mu     sync.Mutex // guards conns, closed and root
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // accept loop, handshakes, point-to-point readers

	abortOnce sync.Once
	err       error         // why the bootstrap is unusable; set before done is closed
	done      chan struct{} // closed by Abort or Close
	closeOnce sync.Once

	dialCtx    context.Context // cancelled with done: a dial in progress gives up
	dialCancel context.CancelFunc
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
	if !hostIDOK(opts.HostID) {
		return 0, status.Errorf(status.InvalidArgument, "bootstrap: host id %q has a NUL byte", opts.HostID)
	}
	return opts.timeout()
}

func newBootstrap(magic uint64, key [keyBytes]byte, rank, nranks int, timeout time.Duration, opts *Options) *Bootstrap {
	b := &Bootstrap{
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
		runs:      make(map[boxKey]*handlerRun),
		inFrom:    make([]bool, nranks),
		inErr:     make([]error, nranks),
		queued:    make([]int, nranks),
		qLimit:    queueLimits{perPeer: maxQueuedPerPeer, total: maxQueuedTotal},
		conns:     make(map[net.Conn]struct{}),
		done:      make(chan struct{}),
		table:     []peerEntry{{hostID: opts.HostID, pid: uint64(os.Getpid()), token: newNonce()}},
		nonce:     randomNonce(), // a communicator of one; the root's table brings the others'

	}
	b.dialCtx, b.dialCancel = context.WithCancel(context.Background())
	return b
}

// Init joins the communicator of id as rank of nranks; it is collective and
// returns once every rank is connected to its ring neighbours (and the
// star; with Options.RingOnlyOnOneHost on one host, once every rank has
// registered and run Options.Joined), or with the same failure on every rank. The key is the id's
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
	b, err := initRank(f.addr, nil, f.magic, f.secret, "", rank, nranks, timeout, &opts)
	if err != nil {
		if r != nil { // the other ranks learn why from the root
			r.abort(rank, nranks, err)
		}
		return nil, err
	}
	b.adoptRoot(r)
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
	if _, err := checkArgs(rank, nranks, &opts); err != nil {
		return nil, err
	}
	ap, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	return InitAddrPort(ap, addr, rank, nranks, opts)
}

// InitAddrPort is InitAddr with addr already parsed into ap (ParseAddr).
func InitAddrPort(ap netip.AddrPort, addr string, rank, nranks int, opts Options) (*Bootstrap, error) {
	timeout, err := checkArgs(rank, nranks, &opts)
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
	b, err := initRank(ap, r, magic, key, source, rank, nranks, timeout, &opts)
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
	b.adoptRoot(r)
	return b, nil
}

// errorf makes an error with code c whose message names this rank.
func (b *Bootstrap) errorf(c status.Code, format string, args ...any) error {
	return status.Errorf(c, "bootstrap rank %d of %d: "+format, append([]any{b.rank, b.nranks}, args...)...)
}

// track records c so that Abort closes it; false if already aborted.
func (b *Bootstrap) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

// untrack forgets and closes c.
func (b *Bootstrap) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	c.Close()
}

// Rank returns this rank.
func (b *Bootstrap) Rank() int { return b.rank }

// Size returns the number of ranks.
func (b *Bootstrap) Size() int { return b.nranks }

// Timeout returns the bound of every wait of this bootstrap, fixed when it formed.
func (b *Bootstrap) Timeout() time.Duration { return b.timeout }

// Magic returns the communicator magic shared by all ranks.
func (b *Bootstrap) Magic() uint64 { return b.magic }

// Nonce names this instance of the communicator (the same on every rank; random per
// instance, so one re-formed at the same address never meets state of an earlier one).
func (b *Bootstrap) Nonce() uint64 { return b.nonce }

// forcedRootNonce, when not 0, is the nonce the roots of this process hand out (tests: a
// malicious root that reuses another instance's).
var forcedRootNonce atomic.Uint64

// rootNonce is the nonce a root hands out with its table.
func rootNonce() uint64 {
	if n := forcedRootNonce.Load(); n != 0 {
		return n
	}
	return randomNonce()
}

// randomNonce is a random 64-bit value (never 0).
func randomNonce() uint64 {
	var buf [8]byte
	for {
		_, _ = rand.Read(buf[:]) // never fails (Go 1.24+)
		if v := binary.LittleEndian.Uint64(buf[:]); v != 0 {
			return v
		}
	}
}

// ListenAddr returns the address of this rank's listener ("" for one rank).
func (b *Bootstrap) ListenAddr() string { return b.listenAddr }

// Failed returns why the bootstrap is unusable (it failed to form, was
// aborted or closed, or, while Options.Joined runs, the root reported
// another rank's failure), or nil.
func (b *Bootstrap) Failed() error { return b.failed() }

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
		b.dialCancel()
		b.mu.Lock()
		b.closed = true
		conns := b.conns
		b.conns = nil
		root := b.root
		b.mu.Unlock()
		if b.ln != nil {
			b.ln.Close()
		}
		for c := range conns {
			c.Close()
		}
		if root != nil {
			root.stop()
		}
	})
	return b.err
}

// adoptRoot makes r, the root this process started (or nil), b's once b formed. Under b.mu:
// an Abort from another goroutine (b escapes through Options.Joined) may race with the end
// of Init; one that came first finds no root, so the root is stopped here.
func (b *Bootstrap) adoptRoot(r *root) {
	b.mu.Lock()
	b.root = r
	closed := b.closed
	b.mu.Unlock()
	if closed && r != nil {
		r.stop()
	}
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
