//go:build mscclpp_testhooks

package engine

// A harness for this package's tests (cgo cannot be used in _test.go files): a connection
// of a test transport whose ops table delivers a wait's signal from its waitPoll hook, as a
// transport whose waits deliver queued data does, with no other thread.

/*
#include <stdlib.h>
#include "engine.h"
#include "testconn.h"

// The test transport's per-connection state (engConn.transport): how its waitPoll behaves.
typedef struct hpState {
	int polls;         // waitPoll calls of a wait that may block (w set)
	int nullPolls;     // waitPoll calls that may not (w NULL: a wait that ends)
	int deliverAt;     // the poll (w set) that delivers the signal
	int deliverOnNull; // a poll with w NULL delivers it
} hpState;

static int hpPoll(engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w)
{
	hpState* s = (hpState*)c->transport;
	if (w == NULL) {
		s->nullPolls++;
		if (!s->deliverOnNull) return ENG_POLL_IDLE;
	} else if (++s->polls < s->deliverAt) {
		return ENG_POLL_IDLE;
	}
	__atomic_store_n(epoch, want, __ATOMIC_RELEASE);
	return ENG_POLL_MOVED;
}

static int hpOp(engConn* c, uint64_t t, uint64_t d, uint64_t dOff, uint64_t s, uint64_t sOff, uint64_t n)
{
	(void)c, (void)t, (void)d, (void)dOff, (void)s, (void)sOff, (void)n;
	return mscclppSuccess;
}

static const engOps hpOps = {
	.name = "test",
	.op = hpOp,
	.waitPoll = hpPoll,
	.waitStyle = ENG_WAIT_POLL,
};

typedef struct hpHarness {
	engComm* comm;
	engCtx* ctx;
	engConn conn;
	struct mscclppDevConn dev;
	mscclppDevConnSignalEpochId epoch;
	uint64_t waitEpoch;
	hpState st;
} hpHarness;

static hpHarness* hpNew(void)
{
	hpHarness* h = (hpHarness*)calloc(1, sizeof(hpHarness));
	engBackoffCfg b = {.spin = 64, .yields = 64, .sleepMaxUs = 1000};
	h->comm = engCommNew(0, b, b);
	h->ctx = testConnWire(h->comm, &hpOps, &h->conn, &h->dev, &h->st);
	h->dev.localSignalEpochId = &h->epoch;
	h->dev.waitEpochId = &h->waitEpoch;
	return h;
}

static void hpFree(hpHarness* h)
{
	engCtxFree(h->ctx);
	engCommFree(h->comm);
	free(h);
}
*/
import "C"

// pollHarness is one connection of the test transport.
type pollHarness struct{ h *C.hpHarness }

func newPollHarness(deliverAt int, deliverOnNull bool) pollHarness {
	h := C.hpNew()
	h.st.deliverAt = C.int(deliverAt)
	if deliverOnNull {
		h.st.deliverOnNull = 1
	}
	return pollHarness{h: h}
}

// waitNext is mscclppConnWaitNext on the connection.
func (p pollHarness) waitNext(timeoutMs int64) int {
	return int(C.mscclppConnWaitNext(&p.h.dev, C.int64_t(timeoutMs)))
}

// polls is the number of waitPoll calls made with a wait's state and without.
func (p pollHarness) polls() (int, int) { return int(p.h.st.polls), int(p.h.st.nullPolls) }

func (p pollHarness) free() { C.hpFree(p.h) }
