package bootstrap

// The root's run: it listens (startRoot), takes every connection through
// the handshake (from TCP, or from the rank of its own process over the
// in-memory pipe of acceptLocal: the same code over another net.Conn), and
// turns registrations, status frames and its timeout into answers (root.go).

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// startRoot listens at addr (port 0: any) and starts the root of the communicator of
// magic and key in a goroutine of its own.
func startRoot(addr netip.AddrPort, magic uint64, key [keyBytes]byte, timeout time.Duration, logf logFunc) (*root, error) {
	ln, err := ListenTCP(addr, false)
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

// abort makes the root fail the communicator with err, the reason why rank
// (of nranks, in this process) could not join: every registered rank gets
// it at once, and, like any failure before the table, ranks that register
// later get it too until every rank was answered or the timeout. It does
// not wait; a root that already finished ignores it.
func (r *root) abort(rank, nranks int, err error) {
	select {
	case r.abortReq <- rootAbort{rank: rank, nranks: nranks, err: err}:
	default: // one is enough
	}
}

// remoteAbort takes the kindAbort hello h of a rank that cannot join (authenticated by greet)
// and fails the communicator with its reason (printed quoted), as abort does for this
// process's rank. One that names no rank of the communicator it names is dropped.
func (r *root) remoteAbort(c net.Conn, h *hello) {
	if h.nranks <= 0 || h.rank < 0 || h.rank >= h.nranks {
		r.logf(true, "bootstrap root at %s: dropped a connection from %s: its abort names no rank (rank %d of %d ranks)",
			r.addr, c.RemoteAddr(), h.rank, h.nranks)
		r.drop(c)
		return
	}
	code, text := status.RemoteError, "no reason given"
	if len(h.payload) > 0 {
		if status.Code(h.payload[0]) == status.InvalidUsage {
			code = status.InvalidUsage
		}
		text = logx.PeerText(string(h.payload[1:]))
	}
	select {
	case r.abortReq <- rootAbort{rank: h.rank, nranks: h.nranks, err: status.Errorf(code, "%s", text), from: c.RemoteAddr().String()}:
	default: // one is enough
	}
	r.drop(c)
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

// acceptLocal serves the rank of this process (rank 0 of InitAddr, which started the
// root) on an in-memory pipe instead of a TCP connection: the same handshake (challenge,
// hello, table, status, verdict) over the same code, without the sockets, the accept
// and the netpoller's wake-ups on both sides. It returns the rank's end, or nil when the
// root already finished.
func (r *root) acceptLocal() net.Conn {
	mine, theirs := net.Pipe()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		mine.Close()
		theirs.Close()
		return nil
	}
	r.conns[theirs] = struct{}{}
	r.wg.Add(1) // under mu: before finish marks the root closed, so before run's wg.Wait
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		ch, err := challenge(theirs, r.hsTimeout) // a pipe's write waits for the rank to read
		r.handshake(theirs, ch, err)
	}()
	return mine
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
			e.token = h.nonce
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
			out.kind, out.text = evFail, logx.PeerText(text) // the rank's own words: printed quoted
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
			told := ab.rank
			switch {
			case ab.from != "" && ab.rank >= st.nranks: // a rank of another size: not one of this communicator
				msg = fmt.Sprintf("a rank (from %s) of %d ranks, not of this communicator's %d, could not join the communicator at the root %s: %v",
					ab.from, ab.nranks, st.nranks, r.addr, ab.err)
				told = -1
			case ab.from != "":
				msg = fmt.Sprintf("rank %d (from %s) could not join the communicator at the root %s: %v", ab.rank, ab.from, r.addr, ab.err)
			}
			r.fail(st.regs, st.formed, st.nranks, code, msg, nil, nil, told)
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
		if reason := r.fdShortfall(st.nranks); reason != "" {
			r.fail(st.regs, st.formed, st.nranks, status.InvalidUsage, reason, nil, &ev, -1)
			return true
		}
	}
	if reason := r.badRegistration(st, ev); reason != "" {
		r.fail(st.regs, st.formed, st.nranks, status.InvalidUsage, reason, nil, &ev, -1)
		return true
	}
	rank := ev.h.rank
	st.regs[rank] = &rootReg{ev: ev}
	r.logf(false, "bootstrap root at %s: rank %d registered from %s (%d of %d)", r.addr, rank, ev.c.RemoteAddr(), len(st.regs), st.nranks)
	if len(st.regs) == st.nranks {
		rows := make([]peerEntry, st.nranks)
		for i := range rows {
			rows[i] = st.regs[i].ev.entry
		}
		r.closeListener()
		r.answerEach(regList(st.regs), replyOK, tableAnswers(rootNonce(), rows))
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

// onTimeout answers every rank with what did not happen within the timeout; before
// the table was sent it lingers as fail does.
func (r *root) onTimeout(st *rootState) {
	var msg string
	switch {
	case st.formed:
		var missing []int
		for i := 0; i < st.nranks; i++ {
			if !st.regs[i].ready {
				missing = append(missing, i)
			}
		}
		msg = fmt.Sprintf("%s did not connect to their ring neighbours within %v of getting the table from the root at %s",
			rankList(missing), r.timeout, r.addr)
	case st.nranks == 0:
		msg = fmt.Sprintf("no rank connected to the root at %s within %v", r.addr, r.timeout)
	default:
		var missing []int
		for i := 0; i < st.nranks; i++ {
			if _, ok := st.regs[i]; !ok {
				missing = append(missing, i)
			}
		}
		msg = fmt.Sprintf("%s never connected to the root at %s within %v", rankList(missing), r.addr, r.timeout)
	}
	code := byte(replyError)
	if refusals := r.refusals(); refusals != "" && !st.formed {
		// Most likely the missing ranks: a misconfiguration.
		msg += "; " + refusals
		code = replyUsage
	}
	if !st.formed && st.nranks > 0 {
		// Like any failure before the table: ranks whose registration is on its way (a
		// loaded machine) or that come late hear why, not only that the root went away.
		c := status.RemoteError
		if code == replyUsage {
			c = status.InvalidUsage
		}
		r.fail(st.regs, false, st.nranks, c, msg, nil, nil, -1)
		return
	}
	r.logf(true, "bootstrap: %s", msg)
	r.closeListener()
	r.answer(regList(st.regs), code, []byte(msg))
	r.finish()
}
