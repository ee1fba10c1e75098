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
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// root is the rendezvous server of one communicator: it collects every
// rank's registration {rank, nranks, listener address, host id}, then sends
// everyone the full table (or, when the timeout passes first, an error
// naming the missing ranks) and goes away.
type root struct {
	ln        *net.TCPListener
	addr      netip.AddrPort
	magic     uint64
	secret    [secretBytes]byte
	timeout   time.Duration
	hsTimeout time.Duration
	logf      logFunc

	events   chan rootEvent
	quit     chan struct{} // closed once the root stops taking registrations
	quitOnce sync.Once
	stopReq  chan struct{} // closed by stop
	stopOnce sync.Once
	done     chan struct{} // closed when every goroutine of the root has exited
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  map[*net.TCPConn]struct{}
	closed bool
}

// rootEvent is a registration that passed the secret check, or (left) the
// loss of a registered connection.
type rootEvent struct {
	c     *net.TCPConn
	h     *hello
	entry peerEntry
	left  bool
}

func startRoot(addr netip.AddrPort, magic uint64, secret [secretBytes]byte, timeout time.Duration, logf logFunc) (*root, error) {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
	if err != nil {
		return nil, status.Errorf(status.SystemError, "bootstrap: the root cannot listen at %s: %w", addr, err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	r := &root{
		ln:        ln,
		addr:      netip.AddrPortFrom(addr.Addr(), port),
		magic:     magic,
		secret:    secret,
		timeout:   timeout,
		hsTimeout: handshakeTimeout(timeout),
		logf:      logf,
		events:    make(chan rootEvent),
		quit:      make(chan struct{}),
		stopReq:   make(chan struct{}),
		done:      make(chan struct{}),
		conns:     make(map[*net.TCPConn]struct{}),
	}
	r.logf(false, "bootstrap: root of communicator %#x listening at %s", magic, r.addr)
	go r.run()
	return r, nil
}

// stop makes the root give up (connected ranks get an error); it does not wait.
func (r *root) stop() {
	r.stopOnce.Do(func() { close(r.stopReq) })
}

func (r *root) track(c *net.TCPConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *root) drop(c *net.TCPConn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

func (r *root) acceptLoop() {
	defer r.wg.Done()
	for {
		c, err := r.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-r.quit:
				return
			default:
			}
			r.logf(true, "bootstrap root at %s: accept: %v", r.addr, err)
			time.Sleep(5 * time.Millisecond) // back off from e.g. EMFILE
			continue
		}
		if !r.track(c) {
			c.Close()
			return
		}
		r.wg.Add(1)
		go r.handshake(c)
	}
}

// handshake reads and checks one connection's registration.
func (r *root) handshake(c *net.TCPConn) {
	defer r.wg.Done()
	c.SetNoDelay(true)
	c.SetReadDeadline(deadlineIn(r.hsTimeout))
	h, err := readHello(c, r.magic, &r.secret)
	var e peerEntry
	if err == nil {
		var ok bool
		switch {
		case h.kind != kindRegister:
			err = stranger("it sent a kind %d hello to the root", h.kind)
		case h.nranks < 1 || h.nranks > MaxRanks:
			err = stranger("it says nranks=%d", h.nranks)
		default:
			if e, ok = decodeRegister(h.payload); !ok {
				err = stranger("its registration is malformed")
			}
		}
	}
	if err != nil {
		r.logf(true, "bootstrap root at %s: dropped a connection from %s: %v", r.addr, c.RemoteAddr(), err)
		r.drop(c)
		return
	}
	c.SetReadDeadline(time.Time{})
	select {
	case r.events <- rootEvent{c: c, h: h, entry: e}:
	case <-r.quit:
		r.drop(c)
	}
}

// watch turns the loss of a registered connection into an event, so a rank
// that dies before the communicator forms frees its slot.
func (r *root) watch(ev rootEvent) {
	defer r.wg.Done()
	var b [1]byte
	ev.c.Read(b[:]) // a registered rank sends nothing more: any return means trouble or the end
	ev.left = true
	select {
	case r.events <- ev:
	case <-r.quit:
	}
}

func (r *root) run() {
	defer close(r.done)
	defer r.wg.Wait()
	r.wg.Add(1)
	go r.acceptLoop()
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	nranks := 0
	regs := make(map[int]rootEvent)
	for {
		select {
		case ev := <-r.events:
			rank := ev.h.rank
			if ev.left {
				if cur, ok := regs[rank]; ok && cur.c == ev.c {
					delete(regs, rank)
					r.logf(true, "bootstrap root at %s: rank %d (%s) closed its connection before the communicator formed",
						r.addr, rank, ev.c.RemoteAddr())
					r.drop(ev.c)
					if len(regs) == 0 {
						nranks = 0 // let the next registration set it afresh
					}
				}
				continue
			}
			if nranks == 0 {
				nranks = ev.h.nranks
			}
			var reason string
			switch {
			case ev.h.nranks != nranks:
				reason = fmt.Sprintf("rank %d says nranks=%d but the communicator at %s has %d ranks", rank, ev.h.nranks, r.addr, nranks)
			case rank < 0 || rank >= nranks:
				reason = fmt.Sprintf("rank %d is out of range for %d ranks", rank, nranks)
			default:
				if cur, ok := regs[rank]; ok {
					reason = fmt.Sprintf("rank %d is already registered at the root %s (from %s)", rank, r.addr, cur.c.RemoteAddr())
				}
			}
			if reason != "" {
				r.logf(true, "bootstrap root at %s: rejected a registration from %s: %s", r.addr, ev.c.RemoteAddr(), reason)
				r.wg.Add(1)
				go func() {
					defer r.wg.Done()
					r.send(ev.c, encodeReply(replyError, r.magic, []byte(reason)))
					r.drop(ev.c)
				}()
				continue
			}
			regs[rank] = ev
			r.logf(false, "bootstrap root at %s: rank %d registered from %s (%d of %d)", r.addr, rank, ev.c.RemoteAddr(), len(regs), nranks)
			r.wg.Add(1)
			go r.watch(ev)
			if len(regs) == nranks {
				table := make([]peerEntry, nranks)
				for i := range table {
					table[i] = regs[i].entry
				}
				r.finish(regs, encodeReply(replyOK, r.magic, encodeTable(table)))
				r.logf(false, "bootstrap root at %s: all %d ranks registered", r.addr, nranks)
				return
			}
		case <-timer.C:
			var msg string
			if nranks == 0 {
				msg = fmt.Sprintf("no rank connected to the root at %s within %v", r.addr, r.timeout)
			} else {
				var missing []int
				for i := 0; i < nranks; i++ {
					if _, ok := regs[i]; !ok {
						missing = append(missing, i)
					}
				}
				msg = fmt.Sprintf("%s never connected to the root at %s within %v", rankList(missing), r.addr, r.timeout)
			}
			r.logf(true, "bootstrap: %s", msg)
			r.finish(regs, encodeReply(replyError, r.magic, []byte(msg)))
			return
		case <-r.stopReq:
			msg := fmt.Sprintf("the root at %s was closed before all ranks connected", r.addr)
			r.finish(regs, encodeReply(replyError, r.magic, []byte(msg)))
			return
		}
	}
}

// finish stops taking registrations, closes the listener (first, so the
// port is free by the time any rank learns the outcome), sends reply to
// every registered rank and closes every connection.
func (r *root) finish(regs map[int]rootEvent, reply []byte) {
	r.quitOnce.Do(func() { close(r.quit) })
	r.ln.Close()
	var wg sync.WaitGroup
	for _, ev := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.send(ev.c, reply)
		}()
	}
	wg.Wait()
	r.mu.Lock()
	r.closed = true
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

func (r *root) send(c *net.TCPConn, msg []byte) {
	c.SetWriteDeadline(deadlineIn(r.hsTimeout))
	if _, err := c.Write(msg); err != nil {
		r.logf(true, "bootstrap root at %s: answering %s: %v", r.addr, c.RemoteAddr(), err)
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
