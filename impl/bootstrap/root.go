package bootstrap

// The root's state, and what it tells the ranks it serves: the table, the
// last word, a failure (and, at its timeout, the registrations it refused).
// How it gets there is rootrun.go.

import (
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
// connections that proved the key, sends every rank the rows it needs
// before its ring forms (tableAnswers: the whole table when every rank
// shares a host; else its own host's rows and its ring and star
// neighbours', and the ranks gather the rest over the ring), waits
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

// rootAbort is the failure of a rank before it registered (the root's own
// process's, or one that told the root with a kindAbort hello): the other
// ranks must learn the reason, not only that the root went away or that the
// rank never connected.
type rootAbort struct {
	rank, nranks int
	err          error
	from         string // where a remote rank's abort came from; "" for this process's rank
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

// fail sends msg (code RemoteError or InvalidUsage) to every registered
// rank but the one on skip, and to offender (a registration not in regs).
// Before the table was sent it then lingers, answering late registrations
// alike, until every rank of the communicator was answered (told, if not
// negative, already knows) or the timeout.
func (r *root) fail(regs map[int]*rootReg, formed bool, nranks int, code status.Code, msg string, skip net.Conn, offender *rootEvent, told int) {
	r.logf(true, "bootstrap: %s", msg)
	st := byte(replyError)
	if code == status.InvalidUsage {
		st = replyUsage
	}
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText]
	}
	if !formed && nranks > 0 {
		r.lingering.Store(true)
	}
	targets := make([]*rootReg, 0, len(regs)+1)
	answered := make(map[int]bool)
	if told >= 0 {
		answered[told] = true
	}
	for rank, reg := range regs {
		answered[rank] = true
		if reg.ev.c != skip {
			targets = append(targets, reg)
		}
	}
	if offender != nil {
		answered[offender.h.rank] = true
		targets = append(targets, &rootReg{ev: *offender})
	}
	r.answer(targets, st, []byte(msg))
	if formed || nranks <= 0 {
		r.finish()
		return
	}
	for _, reg := range targets {
		r.drop(reg.ev.c)
	}
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	allAnswered := func() bool {
		for i := 0; i < nranks; i++ {
			if !answered[i] {
				return false
			}
		}
		return true
	}
	var sends sync.WaitGroup // finish closes every connection: the answers go out first
	defer r.finish()
	defer sends.Wait()
	for !allAnswered() {
		select {
		case ev := <-r.events:
			if ev.kind != evRegister {
				r.drop(ev.c)
				continue
			}
			answered[ev.h.rank] = true
			sends.Go(func() {
				r.send(ev.c, encodeReply(st, r.magic, []byte(msg), &r.key, labelReply, &ev.h.nonce))
				r.drop(ev.c)
			})
		case <-timer.C:
			return
		case <-r.stopReq:
			return
		}
	}
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

// answer sends every target a reply with status st and payload, MAC'ed for
// it, and waits until all were sent: replies of up to inlineAnswer bytes
// one after the other, without a goroutine each (all a rank is sent is its
// challenge, the table and the last answer, which the socket buffers on both
// sides hold without the rank reading: such a write does not wait for the
// rank), larger ones in parallel, in the order of targets (see regList).
//
// The rank of this process (on a pipe, see acceptLocal) gets the table first
// (it is rank 0, the lowest rank of its host: see regList) but any other answer
// last: once answered it may return and its process exit, taking the root with
// it, and every other rank's answer must be on its way by then.
func (r *root) answer(targets []*rootReg, st byte, payload []byte) {
	r.answerEach(targets, st, func(int) []byte { return payload })
}

// answerEach is answer with the payload of each target's rank made by payloadOf.
func (r *root) answerEach(targets []*rootReg, st byte, payloadOf func(rank int) []byte) {
	var wg sync.WaitGroup
	var last []func()
	for _, reg := range targets {
		label := labelReply
		if reg.tabled {
			label = labelDone
		}
		reg.tabled = true
		msg := encodeReply(st, r.magic, payloadOf(reg.ev.h.rank), &r.key, label, &reg.ev.h.nonce)
		_, tcp := reg.ev.c.(*net.TCPConn)
		switch {
		case !tcp && (label != labelReply || st != replyOK):
			last = append(last, func() { r.send(reg.ev.c, msg) })
		case !tcp || len(msg) <= inlineAnswer:
			r.send(reg.ev.c, msg)
		default:
			wg.Go(func() { r.send(reg.ev.c, msg) })
		}
	}
	wg.Wait()
	for _, f := range last {
		f()
	}
}

// inlineAnswer is the largest root reply answer writes without a goroutine of its
// own (a table of about 100 ranks): well below what a connection's send and receive
// buffers hold together by default (16 KiB and 128 KiB on Linux). A write that waits
// all the same is bounded by the handshake timeout.
const inlineAnswer = 8 << 10

// regList returns the registrations as a list: first the lowest rank of each host
// (which creates its node's shared memory once it has the table: the other ranks of
// its node wait for that), then the others, each part by rank.
func regList(regs map[int]*rootReg) []*rootReg {
	out := make([]*rootReg, 0, len(regs))
	first := make(map[string]int) // host id -> its lowest rank
	for rank, reg := range regs {
		out = append(out, reg)
		if f, ok := first[reg.ev.entry.hostID]; !ok || rank < f {
			first[reg.ev.entry.hostID] = rank
		}
	}
	lead := func(reg *rootReg) bool { return first[reg.ev.entry.hostID] == reg.ev.h.rank }
	sort.Slice(out, func(i, j int) bool {
		if li, lj := lead(out[i]), lead(out[j]); li != lj {
			return li
		}
		return out[i].ev.h.rank < out[j].ev.h.rank
	})
	return out
}

func (r *root) send(c net.Conn, msg []byte) {
	c.SetWriteDeadline(deadlineIn(r.hsTimeout))
	if _, err := c.Write(msg); err != nil {
		r.logf(true, "bootstrap root at %s: answering %s: %v", r.addr, c.RemoteAddr(), err)
	}
}

// Registrations the root refused because their key differs: the root warns
// at once with the peer's address, and names them, with what to do, in the
// error it returns at its timeout. It cannot fail the job at once: an
// unauthenticated connection cannot be told from a stranger's, and a
// stranger must not be able to end a job.

// secretAdvice is what to do when ranks' keys differ.
const secretAdvice = "set the same " + EnvSecret + " on every rank (or " + EnvSecretFile +
	", or a ~/" + CookieName + " that every node shares), or use mscclppGetUniqueId"

// noteRefused records a registration refused because its key differs.
func (r *root) noteRefused(from net.Addr) {
	r.refused.Add(1)
	ip := from.String()
	if a, ok := from.(*net.TCPAddr); ok {
		ip = a.AddrPort().Addr().Unmap().String()
	}
	r.mu.Lock()
	r.refusedFrom[ip]++
	r.mu.Unlock()
}

// refusals describes the refused registrations, "" when there were none:
// "3 connections from 10.0.0.2 (2), 10.0.0.3 (1) refused: different job
// secret; set the same ...".
func (r *root) refusals() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refusedFrom) == 0 {
		return ""
	}
	ips := make([]string, 0, len(r.refusedFrom))
	total := 0
	for ip, n := range r.refusedFrom {
		ips = append(ips, ip)
		total += n
	}
	sort.Strings(ips)
	from := ips[0]
	if len(ips) > 1 {
		parts := make([]string, len(ips))
		for i, ip := range ips {
			parts[i] = fmt.Sprintf("%s (%d)", ip, r.refusedFrom[ip])
		}
		from = strings.Join(parts, ", ")
	}
	what := "connections"
	if total == 1 {
		what = "connection"
	}
	return fmt.Sprintf("%d %s from %s refused: different job secret; %s", total, what, from, secretAdvice)
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
