package bootstrap

// A rank that cannot join: how it tells the root why (its own setting is bad, found before it
// registered: tellRoot; the root's own process's rank: root.abort), how the root fails the
// communicator with that reason at once, and how a joining rank turns a failure or the root's
// answer into its error.

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// rootAbort is the failure of a rank before it registered (the root's own
// process's, or one that told the root with a kindAbort hello): the other
// ranks must learn the reason, not only that the root went away or that the
// rank never connected.
type rootAbort struct {
	rank, nranks int
	err          error
	from         string // where a remote rank's abort came from; "" for this process's rank
}

// remoteAbort takes the kindAbort hello h of a rank that cannot join (authenticated by greet)
// and fails the communicator with its reason, as abort does for this process's rank.
func (r *root) remoteAbort(c net.Conn, h *hello) {
	code, text := status.RemoteError, "no reason given"
	if len(h.payload) > 0 {
		if status.Code(h.payload[0]) == status.InvalidUsage {
			code = status.InvalidUsage
		}
		text = string(h.payload[1:])
	}
	select {
	case r.abortReq <- rootAbort{rank: h.rank, nranks: h.nranks, err: status.Errorf(code, "%s", text), from: c.RemoteAddr().String()}:
	default: // one is enough
	}
	r.drop(c)
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
