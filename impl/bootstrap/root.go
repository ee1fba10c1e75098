package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// root is the rendezvous server of one communicator. It collects every
// rank's registration {rank, nranks, listener address, host id} from
// connections that proved the key, sends everyone the full table, waits
// until every rank reports that its ring and star connections are up, tells
// everyone that the communicator formed, and goes away.
//
// When something goes wrong first, every rank still connected gets an
// error instead: InvalidUsage for a misconfiguration (ranks that disagree
// about nranks, a rank registered twice or out of range), RemoteError for a
// rank that fails, exits or never arrives. After a failure before the table
// was sent, the root keeps answering registrations of ranks that come late
// with the same error (until every rank was answered or the timeout), so
// every rank of the job fails at once with the same message.
type root struct {
	ln        *net.TCPListener
	addr      netip.AddrPort
	magic     uint64
	key       [keyBytes]byte
	timeout   time.Duration
	hsTimeout time.Duration
	logf      logFunc

	events   chan rootEvent
	quit     chan struct{} // closed once the root stops taking registrations
	quitOnce sync.Once
	stopReq  chan struct{} // closed by stop
	stopOnce sync.Once
	abortReq chan rootAbort // the failure of this process's own rank (see abort)
	done     chan struct{}  // closed when every goroutine of the root has exited
	wg       sync.WaitGroup

	// lingering is set before the root sends a failure that it keeps
	// answering late registrations with: the process's own rank must not
	// stop it on that failure.
	lingering atomic.Bool
	// refused counts connections dropped because they did not prove the key.
	refused atomic.Int32
	// refusedFrom counts them by peer IP address (under mu).
	refusedFrom map[string]int

	mu       sync.Mutex
	conns    map[net.Conn]struct{} // a rank's TCP connection, or a pipe from this process's rank (acceptLocal)
	closed   bool
	lnClosed bool
}

type rootEventKind int

const (
	evRegister rootEventKind = iota // a registration that proved the key
	evReady                         // a registered rank's ring and star are up
	evFail                          // a registered rank failed (text says why)
	evLeft                          // a registered rank's connection ended
)

// rootEvent is something that happened on one connection.
type rootEvent struct {
	kind      rootEventKind
	c         net.Conn
	h         *hello
	challenge nonce // what the root sent this connection
	entry     peerEntry
	text      string
}

// rootReg is one registered rank.
type rootReg struct {
	ev     rootEvent
	tabled bool // the table was sent: later answers use labelDone
	ready  bool
}

func startRoot(addr netip.AddrPort, magic uint64, key [keyBytes]byte, timeout time.Duration, logf logFunc) (*root, error) {
	ln, err := listenTCP(addr, false)
	if err != nil {
		return nil, status.Errorf(status.SystemError, "bootstrap: the root cannot listen at %s: %w", addr, err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	r := &root{
		ln:        ln,
		addr:      netip.AddrPortFrom(addr.Addr(), port),
		magic:     magic,
		key:       key,
		timeout:   timeout,
		hsTimeout: handshakeTimeout(timeout),
		logf:      logf,
		events:    make(chan rootEvent),
		quit:      make(chan struct{}),
		stopReq:   make(chan struct{}),
		abortReq:  make(chan rootAbort, 1),
		done:      make(chan struct{}),
		conns:     make(map[net.Conn]struct{}),

		refusedFrom: make(map[string]int),
	}
	r.logf(false, "bootstrap: root of communicator %#x listening at %s", magic, r.addr)
	go r.run()
	return r, nil
}

// stop makes the root give up (connected ranks get an error); it does not wait.
func (r *root) stop() {
	r.stopOnce.Do(func() { close(r.stopReq) })
}

func (r *root) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *root) drop(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

// closeListener stops taking connections (the port is free at once).
func (r *root) closeListener() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lnClosed {
		r.lnClosed = true
		r.ln.Close()
	}
}

// acceptor is the root's accept loop: every connection goes to handshake.
func (r *root) acceptor() acceptor {
	stopped := func() bool {
		select {
		case <-r.quit:
			return true
		default:
			return false
		}
	}
	return acceptor{ln: r.ln, hsTimeout: r.hsTimeout, wg: &r.wg, who: "bootstrap root at " + r.addr.String(), logf: r.logf,
		stopped: stopped, track: func(c *net.TCPConn) bool { return r.track(c) },
		serve: func(c *net.TCPConn, ch nonce, err error) { r.handshake(c, ch, err) }}
}

// handshake checks the registration of a connection that was sent challenge ch (or
// failed to be, chErr).
func (r *root) handshake(c net.Conn, ch nonce, chErr error) {
	h, challenge, err := greet(c, ch, chErr, r.magic, &r.key)
	if err == nil && h.kind == kindAbort {
		r.remoteAbort(c, h)
		return
	}
	var e peerEntry
	if err == nil {
		var ok bool
		switch {
		case h.kind != kindRegister:
			err = stranger("it sent a kind %d hello to the root", h.kind)
		default:
			if e, ok = decodeRegister(h.payload); !ok {
				err = stranger("rank %d's registration is malformed", h.rank)
			}
		}
	}
	if err != nil {
		var s *errStranger
		isReg := errors.As(err, &s) && s.reject != 0 && s.kind == kindRegister
		hint := ""
		if isReg && s.reject == rejectKey {
			r.noteRefused(c.RemoteAddr())
			hint = "; a rank of this job with a different secret? " + secretAdvice
		}
		r.logf(true, "bootstrap root at %s: dropped a connection from %s: %v%s", r.addr, c.RemoteAddr(), err, hint)
		if isReg {
			// Unauthenticated, and telling nothing but the reason: it lets
			// a misconfigured rank fail at once with a clear message.
			c.SetWriteDeadline(deadlineIn(r.hsTimeout))
			c.Write(encodeReject(r.magic, s.reject))
		}
		r.drop(c)
		return
	}
	c.SetDeadline(time.Time{})
	ev := rootEvent{kind: evRegister, c: c, h: h, challenge: challenge, entry: e}
	select {
	case r.events <- ev:
	case <-r.quit:
		r.drop(c)
		return
	}
	r.watch(ev)
}

// watch reads a registered rank's status frames and turns them, and the
// end of its connection, into events. It runs on the goroutine of the
// registration's handshake (one goroutine and one wake-up fewer per rank
// than a goroutine of its own): the rank sends nothing before it has the
// table, which comes after run took the registration; a registration run
// refused ends the root, whose quit (or its closing c) ends the loop.
func (r *root) watch(ev rootEvent) {
	for {
		st, text, err := readStatus(ev.c, &r.key, &ev.challenge)
		out := ev
		switch {
		case err != nil && isPeerGone(err):
			out.kind = evLeft
		case err != nil:
			out.kind, out.text = evFail, fmt.Sprintf("its connection to the root failed: %v", err)
		case st == statusReady:
			out.kind = evReady
		default:
			out.kind, out.text = evFail, text
		}
		select {
		case r.events <- out:
		case <-r.quit:
			return
		}
		if out.kind != evReady {
			return
		}
	}
}

// rootState is what run knows of the communicator forming.
type rootState struct {
	nranks int
	first  rootEvent // the registration that set nranks
	formed bool      // the table was sent
	ready  int
	regs   map[int]*rootReg
	timer  *time.Timer
}

// run serves one communicator's registrations until it formed or failed.
func (r *root) run() {
	defer close(r.done)
	defer r.wg.Wait()
	r.wg.Add(1)
	go r.acceptor().loop()
	st := &rootState{regs: make(map[int]*rootReg), timer: time.NewTimer(r.timeout)}
	defer st.timer.Stop()
	for {
		select {
		case ev := <-r.events:
			if ev.kind == evRegister && r.onRegister(st, ev) || ev.kind != evRegister && r.onStatus(st, ev) {
				return
			}
		case <-st.timer.C:
			r.onTimeout(st)
			return
		case ab := <-r.abortReq:
			if st.nranks == 0 {
				st.nranks = ab.nranks
			}
			code := status.RemoteError
			if status.CodeOf(ab.err) == status.InvalidUsage {
				code = status.InvalidUsage
			}
			msg := fmt.Sprintf("rank %d, in the process of the root at %s, could not join: %v", ab.rank, r.addr, ab.err)
			if ab.from != "" {
				msg = fmt.Sprintf("rank %d (from %s) could not join the communicator at the root %s: %v", ab.rank, ab.from, r.addr, ab.err)
			}
			r.fail(st.regs, st.formed, st.nranks, code, msg, nil, nil, ab.rank)
			return
		case <-r.stopReq:
			msg := fmt.Sprintf("the root at %s was closed before all ranks connected", r.addr)
			r.closeListener()
			r.answer(regList(st.regs), replyError, []byte(msg))
			r.finish()
			return
		}
	}
}

// onStatus handles a registered rank's status frame or the end of its connection;
// true when the root is done (formed, or failed).
func (r *root) onStatus(st *rootState, ev rootEvent) bool {
	rank := ev.h.rank
	cur := st.regs[rank]
	if cur == nil || cur.ev.c != ev.c {
		r.drop(ev.c)
		return false
	}
	if ev.kind == evReady && st.formed && !cur.ready {
		cur.ready = true
		st.ready++
		if st.ready < st.nranks {
			return false
		}
		r.closeListener()
		r.answer(regList(st.regs), replyOK, nil)
		r.logf(false, "bootstrap root at %s: all %d ranks connected", r.addr, st.nranks)
		r.finish()
		return true
	}
	var msg string
	switch {
	case ev.kind == evLeft && st.formed:
		msg = fmt.Sprintf("rank %d (%s) closed its connection to the root at %s during init, before every rank had connected (it exited or failed)",
			rank, ev.entry.addr, r.addr)
	case ev.kind == evLeft:
		msg = fmt.Sprintf("rank %d (%s) closed its connection to the root at %s before the communicator formed (it exited or failed)",
			rank, ev.entry.addr, r.addr)
	case ev.kind == evReady:
		msg = fmt.Sprintf("rank %d reported ready to the root at %s before it got the table", rank, r.addr)
	default:
		msg = fmt.Sprintf("rank %d failed during init: %s", rank, ev.text)
	}
	var skip net.Conn // a rank that reported its failure hears the verdict too
	if ev.kind == evLeft {
		skip = ev.c
	}
	r.fail(st.regs, st.formed, st.nranks, status.RemoteError, msg, skip, nil, -1)
	return true
}

// onRegister checks and records a registration, and sends the table once every rank
// registered; true when the root is done (failed).
func (r *root) onRegister(st *rootState, ev rootEvent) bool {
	if st.nranks == 0 {
		st.nranks, st.first = ev.h.nranks, ev
	}
	if reason := r.badRegistration(st, ev); reason != "" {
		r.fail(st.regs, st.formed, st.nranks, status.InvalidUsage, reason, nil, &ev, -1)
		return true
	}
	rank := ev.h.rank
	st.regs[rank] = &rootReg{ev: ev}
	r.logf(false, "bootstrap root at %s: rank %d registered from %s (%d of %d)", r.addr, rank, ev.c.RemoteAddr(), len(st.regs), st.nranks)
	if len(st.regs) == st.nranks {
		table := make([]peerEntry, st.nranks)
		for i := range table {
			table[i] = st.regs[i].ev.entry
		}
		r.closeListener()
		r.answer(regList(st.regs), replyOK, encodeTable(randomNonce(), table))
		st.formed = true
		st.timer.Reset(r.timeout)
		r.logf(false, "bootstrap root at %s: all %d ranks registered", r.addr, st.nranks)
	}
	return false
}

// badRegistration says why ev does not fit the registrations so far ("" when it does).
func (r *root) badRegistration(st *rootState, ev rootEvent) string {
	rank, nranks, first := ev.h.rank, st.nranks, st.first
	switch {
	case ev.h.nranks != nranks:
		return fmt.Sprintf("nranks mismatch at the root %s: rank %d (from %s) says nranks=%d, but rank %d (from %s) registered first with nranks=%d",
			r.addr, rank, ev.c.RemoteAddr(), ev.h.nranks, first.h.rank, first.c.RemoteAddr(), nranks)
	case rank < 0 || rank >= nranks:
		return fmt.Sprintf("rank %d (from %s) is out of range for nranks=%d at the root %s", rank, ev.c.RemoteAddr(), nranks, r.addr)
	}
	if cur, ok := st.regs[rank]; ok {
		return fmt.Sprintf("rank %d registered twice at the root %s: from %s (listening at %s) and from %s (listening at %s)",
			rank, r.addr, cur.ev.c.RemoteAddr(), cur.ev.entry.addr, ev.c.RemoteAddr(), ev.entry.addr)
	}
	return ""
}

// finish stops taking registrations and closes the listener and every
// connection.
func (r *root) finish() {
	r.quitOnce.Do(func() { close(r.quit) })
	r.closeListener()
	r.mu.Lock()
	r.closed = true
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// rankList formats ranks as "rank 3" or "ranks 3,5".
func rankList(ranks []int) string {
	sort.Ints(ranks)
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(r)
	}
	if len(ranks) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ",")
}

// handshakeTimeout bounds how long a new connection may take to present its
// hello: a few seconds, and never more than the communicator's timeout.
func handshakeTimeout(timeout time.Duration) time.Duration {
	return min(timeout, maxHandshake)
}

// maxHandshake is the longest a legitimate peer takes to send its hello (a
// variable so tests can shorten it).
var maxHandshake = 3 * time.Second

// HandshakeTimeout is how long a new connection to a port of this job (the bootstrap's, or a
// transport's data port) may take to present its hello before it is dropped.
func HandshakeTimeout(timeout time.Duration) time.Duration { return handshakeTimeout(timeout) }
