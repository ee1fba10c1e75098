package bootstrap

// The root's answers to the ranks it serves: the table, the last word, a failure.

import (
	"net"
	"sort"
	"sync"
)

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
	var wg sync.WaitGroup
	var last []func()
	for _, reg := range targets {
		label := labelReply
		if reg.tabled {
			label = labelDone
		}
		reg.tabled = true
		msg := encodeReply(st, r.magic, payload, &r.key, label, &reg.ev.h.nonce)
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
