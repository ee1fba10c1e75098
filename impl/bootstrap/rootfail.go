package bootstrap

// The root's failures: a timeout, and how it tells every rank what failed.

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

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
