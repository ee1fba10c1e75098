package bootstrap

import "fmt"

// Messages on a tag with a handler (SetTagHandler) are answered as they arrive, by the
// bootstrap's own goroutines, not queued for a Recv. A peer decides how many it sends, so what
// they may cost here is bounded: a message longer than the handler's limit is read past and
// refused without being held in memory; per peer and tag one handler call runs at a time and at
// most handlerQueue messages wait for it, each counted in the peer's queue room (admit) until
// its call returned; more are refused. A refusal is logged once per bootstrap.

// handlerQueue is how many messages of one peer and tag may wait for its running handler call.
const handlerQueue = 4

// TagHandler handles a message from peer on the bootstrap's own goroutine, without a Recv.
type TagHandler func(peer int, msg []byte)

// tagHandler is a handler and the longest message it takes.
type tagHandler struct {
	h      TagHandler
	maxLen int
}

// handlerRun is the handler calls of one (peer, tag): whether one runs, and the messages
// waiting for it (boxMu).
type handlerRun struct {
	running bool
	waiting [][]byte
}

// SetTagHandler makes messages with tag, of at most maxLen bytes, go to h as they arrive
// instead of the queue Recv reads (longer ones are refused); nil restores the queue. For
// requests a rank answers whatever its application threads are doing (a report of a rank whose
// threads are stuck).
func (b *Bootstrap) SetTagHandler(tag, maxLen int, h TagHandler) {
	if h == nil {
		b.handlers.Delete(tag)
		return
	}
	b.handlers.Store(tag, &tagHandler{h: h, maxLen: maxLen})
}

// handlerLimit is the longest message the handler of tag takes, or -1 when tag has none.
func (b *Bootstrap) handlerLimit(tag int) int {
	if v, ok := b.handlers.Load(tag); ok {
		return v.(*tagHandler).maxLen
	}
	return -1
}

// handle hands msg to its tag's handler: at once in a goroutine when no call for (peer, tag)
// runs, after it when one does, not at all when handlerQueue messages wait already. It reports
// false when tag has no handler (msg is for the queue).
func (b *Bootstrap) handle(peer, tag int, msg []byte) bool {
	v, ok := b.handlers.Load(tag)
	if !ok {
		return false
	}
	k := boxKey{peer, tag}
	b.boxMu.Lock()
	r := b.runs[k]
	if r == nil {
		r = &handlerRun{}
		b.runs[k] = r
	}
	switch {
	case !r.running:
		r.running = true
		b.boxMu.Unlock()
		go b.runHandler(k, v.(*tagHandler).h, msg)
	case len(r.waiting) < handlerQueue:
		r.waiting = append(r.waiting, msg)
		b.boxMu.Unlock()
	default:
		b.doneLocked(peer, len(msg))
		b.boxMu.Unlock()
		b.refuseHandled(peer, tag, len(msg), -1)
	}
	return true
}

// runHandler calls h on msg, then on the messages that arrived for k meanwhile, one at a time;
// each message's queue room is returned once its call returned.
func (b *Bootstrap) runHandler(k boxKey, h TagHandler, msg []byte) {
	for {
		h(k.peer, msg)
		b.boxMu.Lock()
		b.doneLocked(k.peer, len(msg))
		r := b.runs[k]
		if len(r.waiting) == 0 {
			r.running = false
			b.boxMu.Unlock()
			return
		}
		msg = r.waiting[0]
		r.waiting[0] = nil
		r.waiting = r.waiting[1:]
		b.boxMu.Unlock()
	}
}

// doneLocked returns the queue room of a handled message of n bytes from peer (boxMu held;
// a message to itself took none).
func (b *Bootstrap) doneLocked(peer, n int) {
	if peer != b.rank {
		b.releaseLocked(peer, n)
	}
}

// refuseHandled counts a message of n bytes from peer for tag's handler that was refused:
// longer than limit, or (limit -1) with handlerQueue messages waiting already. The first is
// logged.
func (b *Bootstrap) refuseHandled(peer, tag, n, limit int) {
	b.boxMu.Lock()
	b.refused++
	first := b.refused == 1
	b.boxMu.Unlock()
	if !first {
		return
	}
	why := fmt.Sprintf("%d messages of rank %d on this tag wait for its handler already", handlerQueue, peer)
	if limit >= 0 {
		why = fmt.Sprintf("more than the %d bytes its handler takes", limit)
	}
	b.logf(true, "bootstrap rank %d: refused a message of %d bytes from rank %d on tag %d: %s (further refusals are not logged)",
		b.rank, n, peer, tag, why)
}

// Refused is how many messages for tag handlers were refused (too long, or too many waiting).
func (b *Bootstrap) Refused() int {
	b.boxMu.Lock()
	defer b.boxMu.Unlock()
	return b.refused
}
