//go:build mscclpp_testhooks

package engine

// A harness for the FIFO tests (cgo cannot be used in _test.go files): several host threads
// push triggers into one context's FIFO through mscclppFifoPush while its proxy thread serves
// them with a test transport that records, for each trigger, the order in which it was served.

/*
#include <pthread.h>
#include <stdlib.h>
#include "backoff.h"
#include "engine.h"
#include "testconn.h"

#define FH_MAX 65536

typedef struct fhState {
	uint64_t served;        // triggers the op saw (the proxy thread only)
	uint32_t seenAt[FH_MAX]; // per trigger id (dstOff): 1 + the order it was served in, 0: never
	uint32_t twice;         // ids served more than once
	uint32_t spin;          // pauses per op, so that the FIFO fills
	uint64_t holdId;        // the op of this trigger id waits while hold is set (none: ~0)
	int hold, held;         // held: the op of holdId is waiting
	uint64_t curId;         // the trigger fhServeTypes pushed last
} fhState;

// Records trigger id dOff as served (the op of trigger holdId waits while hold is set).
static int fhSeen(fhState* st, uint64_t dOff)
{
	for (uint32_t i = 0; i < st->spin; i++) __asm__ __volatile__("" ::: "memory");
	if (dOff == st->holdId && __atomic_load_n(&st->hold, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&st->held, 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&st->hold, __ATOMIC_ACQUIRE)) engPause();
	}
	if (dOff < FH_MAX) {
		if (st->seenAt[dOff] != 0) st->twice++;
		else st->seenAt[dOff] = (uint32_t)(st->served + 1);
	}
	st->served++;
	return mscclppSuccess;
}

static int fhOp(engConn* c, uint64_t t, uint64_t d, uint64_t dOff, uint64_t s, uint64_t sOff, uint64_t n)
{
	(void)t, (void)d, (void)s, (void)sOff, (void)n;
	return fhSeen((fhState*)c->transport, dOff);
}

// A signal carries no trigger id: it records the one fhServeTypes is waiting for (curId).
static int fhSignal(engConn* c, uint64_t v)
{
	(void)v;
	fhState* st = (fhState*)c->transport;
	return fhSeen(st, st->curId);
}

static const engOps fhOps = {
	.name = "fifo-test",
	.op = fhOp,
	.sendSignal = fhSignal,
};

typedef struct fhHarness {
	engOps ops; // fhOps, opsComplete as the harness was made
	engOps connOps; // the connection's own table once fhConnOpsIncomplete gave it one
	engComm* comm;
	engCtx* ctx;
	engConn conn;
	struct mscclppDevConn dev;
	fhState st;
	uint64_t seqOf[FH_MAX]; // per trigger id: the sequence number its push returned
	int threads, each;
} fhHarness;

typedef struct fhArg { fhHarness* h; int t; } fhArg;

static void* fhPusher(void* p)
{
	fhArg* a = (fhArg*)p;
	fhHarness* h = a->h;
	for (int i = 0; i < h->each; i++) {
		uint64_t id = (uint64_t)a->t * (uint64_t)h->each + (uint64_t)i;
		h->seqOf[id] = mscclppFifoPush(&h->dev.fifo, mscclppData, id, 0, 1);
	}
	return NULL;
}

static fhHarness* fhNew(uint32_t spin, uint32_t proxySleepUs, int complete)
{
	fhHarness* h = (fhHarness*)calloc(1, sizeof(fhHarness));
	engBackoffCfg b = {.spin = 64, .yields = 64, .sleepMaxUs = 100};
	engBackoffCfg p = b;
	if (proxySleepUs > 0) p = (engBackoffCfg){.spin = 0, .yields = 0, .sleepMaxUs = proxySleepUs};
	h->comm = engCommNew(0, b, p);
	h->st.spin = spin;
	h->st.holdId = ~(uint64_t)0;
	h->ops = fhOps;
	h->ops.opsComplete = complete;
	h->ctx = testConnWire(h->comm, &h->ops, &h->conn, &h->dev, &h->st);
	return h;
}

// Gives the connection a table of its own whose operations do not complete before they return
// (engConnSetOps), in a context whose table may say they do.
static void fhConnOpsIncomplete(fhHarness* h)
{
	h->connOps = h->ops;
	h->connOps.opsComplete = 0;
	engConnSetOps(&h->conn, &h->connOps);
}

// Runs threads x each pushes concurrently with the proxy running, then stops the proxy (which
// serves every claimed trigger first). Returns -1 when the run could not start.
static int fhRun(fhHarness* h, int threads, int each)
{
	if (threads * each > FH_MAX || threads > 64) return -1;
	h->threads = threads;
	h->each = each;
	if (engProxyStart(h->ctx) != mscclppSuccess) return -1;
	pthread_t th[64];
	fhArg args[64];
	for (int t = 0; t < threads; t++) {
		args[t].h = h;
		args[t].t = t;
		if (pthread_create(&th[t], NULL, fhPusher, &args[t]) != 0) return -1;
	}
	for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
	engProxyStop(h->ctx);
	return 0;
}

// Starts the proxy, waits (at most 5 s) until it sleeps on its doorbell, then pushes one
// trigger and waits until it is served. Returns the nanoseconds from the push to served, or 0
// when the proxy never slept or the push failed.
static uint64_t fhWake(fhHarness* h)
{
	if (engProxyStart(h->ctx) != mscclppSuccess) return 0;
	uint64_t until = engNowNs() + 5000000000ull;
	while (!__atomic_load_n(&h->ctx->proxyAsleep, __ATOMIC_ACQUIRE))
		if (engNowNs() > until) return 0;
	uint64_t t0 = engNowNs();
	uint64_t seq = mscclppFifoPush(&h->dev.fifo, mscclppData, 0, 0, 1);
	if (seq == MSCCLPP_FIFO_PUSH_FAILED || mscclppFifoWaitServed(&h->dev.fifo, seq) != mscclppSuccess) return 0;
	return engNowNs() - t0;
}

// Stops the proxy once it sleeps again; returns the nanoseconds the stop took (0: it never slept).
static uint64_t fhStopAsleep(fhHarness* h)
{
	uint64_t until = engNowNs() + 5000000000ull;
	while (!__atomic_load_n(&h->ctx->proxyAsleep, __ATOMIC_ACQUIRE))
		if (engNowNs() > until) return 0;
	uint64_t t0 = engNowNs();
	engProxyStop(h->ctx);
	return engNowNs() - t0;
}

typedef struct fhWaiter { fhHarness* h; uint64_t seq; int rc, done; } fhWaiter;

static void* fhWaitServed(void* p)
{
	fhWaiter* w = (fhWaiter*)p;
	w->rc = mscclppFifoWaitServed(&w->h->dev.fifo, w->seq);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

// Waits (at most 5 s) until *p is non-zero, or (p NULL) until *v reaches least; returns 0 when
// it never did.
static int fhUntil(volatile int* p, uint64_t* v, uint64_t least)
{
	uint64_t until = engNowNs() + 5000000000ull;
	while (p != NULL ? !__atomic_load_n(p, __ATOMIC_ACQUIRE) : __atomic_load_n(v, __ATOMIC_ACQUIRE) < least)
		if (engNowNs() > until) return 0;
	return 1;
}

// Trigger 0 is served; trigger 1's op is held, and the pushes of triggers 2..128 (which need
// no more room) refill trigger 0's slot with trigger 128. Then mscclppFifoWaitServed(0) runs on
// a thread of its own: it must return, as trigger 0 was served (the tail is past it), while the
// slot is full again. Returns the nanoseconds it took, or 0 when it did not return within 2 s
// (the hold is released then, so nothing stays stuck), -1 when the setup failed; *rc gets the
// wait's result.
static int64_t fhWaitRefilled(fhHarness* h, int* rc)
{
	h->st.holdId = 1;
	h->st.hold = 1;
	if (engProxyStart(h->ctx) != mscclppSuccess) return -1;
	int64_t res = -1;
	if (mscclppFifoPush(&h->dev.fifo, mscclppData, 0, 0, 1) != 0 || mscclppFifoWaitServed(&h->dev.fifo, 0) != 0 ||
	    !fhUntil(NULL, &h->ctx->tail, 1) || mscclppFifoPush(&h->dev.fifo, mscclppData, 1, 0, 1) != 1 ||
	    !fhUntil(&h->st.held, NULL, 0))
		goto out;
	for (uint64_t id = 2; id <= MSCCLPP_PROXY_FIFO_SIZE; id++)
		if (mscclppFifoPush(&h->dev.fifo, mscclppData, id, 0, 1) != id) goto out;
	if (__atomic_load_n(&h->ctx->fifo[0].value[0], __ATOMIC_ACQUIRE) == 0) goto out;
	fhWaiter w = {h, 0, -1, 0};
	pthread_t th;
	if (pthread_create(&th, NULL, fhWaitServed, &w) != 0) goto out;
	uint64_t t0 = engNowNs();
	res = 0;
	while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE))
		if (engNowNs() - t0 > 2000000000ull) break;
	if (__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) res = (int64_t)(engNowNs() - t0);
	__atomic_store_n(&h->st.hold, 0, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	*rc = w.rc;
out:
	__atomic_store_n(&h->st.hold, 0, __ATOMIC_RELEASE);
	engProxyStop(h->ctx);
	return res;
}

// Pushes one trigger of each type in types[0..n) (trigger id i for the i-th) and waits until each
// is served; returns 0, or -1 when a push or a wait failed.
static int fhServeTypes(fhHarness* h, const uint64_t* types, int n)
{
	if (engProxyStart(h->ctx) != mscclppSuccess) return -1;
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		h->st.curId = (uint64_t)i;
		uint64_t seq = mscclppFifoPush(&h->dev.fifo, types[i], (uint64_t)i, 0, 1);
		if (seq == MSCCLPP_FIFO_PUSH_FAILED || mscclppFifoWaitServed(&h->dev.fifo, seq) != mscclppSuccess) rc = -1;
	}
	engProxyStop(h->ctx);
	return rc;
}

typedef struct fhOne { fhHarness* h; uint64_t seq; int done; } fhOne;

static void* fhPushOne(void* p)
{
	fhOne* a = (fhOne*)p;
	a->seq = mscclppFifoPush(&a->h->dev.fifo, mscclppData, MSCCLPP_PROXY_FIFO_SIZE, 0, 1);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void* fhCloseCtx(void* p)
{
	fhOne* a = (fhOne*)p;
	engCtxClose(a->h->ctx);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

// Waits (at most 5 s) until *done is set: the nanoseconds it took, or 0 when it was not.
static uint64_t fhDoneWithin(int* done, uint64_t t0)
{
	while (!__atomic_load_n(done, __ATOMIC_ACQUIRE))
		if (engNowNs() - t0 > 5000000000ull) return 0;
	return engNowNs() - t0;
}

// The FIFO full behind trigger 0, whose op is held: one more push, on a thread of its own, waits
// for room. Then closeIt: the context is closed (engCtxClose, as mscclppCommDestroy does, on a
// thread of its own), else nothing happens (the communicator's timeout, timeoutMs, must end the
// push). Returns the nanoseconds until the push returned (0: not within 5 s; the hold is then
// released, so nothing stays stuck; -1: the setup failed), *seq its result and *closedNs the
// nanoseconds the close took (0: not within 5 s).
static int64_t fhFullPush(fhHarness* h, int closeIt, int64_t timeoutMs, uint64_t* seq, uint64_t* closedNs)
{
	h->comm->opTimeoutMs = timeoutMs;
	h->st.holdId = 0;
	h->st.hold = 1;
	if (engProxyStart(h->ctx) != mscclppSuccess) return -1;
	int64_t res = -1;
	fhOne push = {h, 0, 0}, closer = {h, 0, 0};
	pthread_t pt, ct;
	int pushing = 0, closing = 0;
	if (mscclppFifoPush(&h->dev.fifo, mscclppData, 0, 0, 1) != 0 || !fhUntil(&h->st.held, NULL, 0)) goto out;
	for (uint64_t id = 1; id < MSCCLPP_PROXY_FIFO_SIZE; id++)
		if (mscclppFifoPush(&h->dev.fifo, mscclppData, id, 0, 1) != id) goto out;
	// t0 before the push's thread exists: the push's wait (its deadline) starts after it
	uint64_t t0 = engNowNs();
	if (pthread_create(&pt, NULL, fhPushOne, &push) != 0) goto out;
	pushing = 1;
	if (closeIt) {
		if (pthread_create(&ct, NULL, fhCloseCtx, &closer) != 0) goto out;
		closing = 1;
	}
	res = (int64_t)fhDoneWithin(&push.done, t0);
	if (closeIt) *closedNs = fhDoneWithin(&closer.done, t0);
out:
	__atomic_store_n(&h->st.hold, 0, __ATOMIC_RELEASE);
	if (pushing) pthread_join(pt, NULL);
	if (closing) pthread_join(ct, NULL);
	*seq = push.seq;
	engProxyStop(h->ctx);
	return res;
}

static void fhFree(fhHarness* h)
{
	engCtxFree(h->ctx);
	engCommFree(h->comm);
	free(h);
}
*/
import "C"

import "time"

// fifoHarness is one context whose FIFO several threads push into.
type fifoHarness struct{ h *C.fhHarness }

// newFifoHarness makes the context; its op pauses spin times per trigger, and a non-zero
// proxySleepUs makes an idle proxy sleep at once, looking again only every proxySleepUs.
func newFifoHarness(spin, proxySleepUs int) fifoHarness {
	return fifoHarness{h: C.fhNew(C.uint32_t(spin), C.uint32_t(proxySleepUs), 0)}
}

// newCompleteFifoHarness is newFifoHarness with a transport whose operations complete before
// they return (engOps.opsComplete).
func newCompleteFifoHarness() fifoHarness { return fifoHarness{h: C.fhNew(0, 0, 1)} }

// newMixedFifoHarness is newCompleteFifoHarness whose one connection was then given a table of
// its own that does not complete its operations before they return (Conn.SetOps).
func newMixedFifoHarness() fifoHarness {
	f := newCompleteFifoHarness()
	C.fhConnOpsIncomplete(f.h)
	return f
}

// serveTypes pushes one trigger of each type (trigger id = its index) and waits until each is
// served; false when a push or a wait failed.
func (f fifoHarness) serveTypes(types ...uint64) bool {
	ts := make([]C.uint64_t, len(types))
	for i, t := range types {
		ts[i] = C.uint64_t(t)
	}
	return C.fhServeTypes(f.h, &ts[0], C.int(len(ts))) == 0
}

// wake starts the proxy, lets it fall asleep, and times one push until served (0: failed).
func (f fifoHarness) wake() time.Duration { return time.Duration(C.fhWake(f.h)) }

// stopAsleep times the stop of a sleeping proxy (0: it never slept).
func (f fifoHarness) stopAsleep() time.Duration { return time.Duration(C.fhStopAsleep(f.h)) }

// run pushes threads x each triggers concurrently and serves them all; false if it could not start.
func (f fifoHarness) run(threads, each int) bool {
	return C.fhRun(f.h, C.int(threads), C.int(each)) == 0
}

// waitRefilled times mscclppFifoWaitServed of a served trigger whose slot a later push refilled
// (fhWaitRefilled): the duration (0: no return within 2 s), false when the setup failed, and
// the wait's result.
func (f fifoHarness) waitRefilled() (time.Duration, bool, int) {
	var rc C.int
	d := C.fhWaitRefilled(f.h, &rc)
	return time.Duration(d), d >= 0, int(rc)
}

// served is the number of triggers the transport's op was called for.
func (f fifoHarness) served() uint64 { return uint64(f.h.st.served) }

// twice is the number of triggers the op saw more than once.
func (f fifoHarness) twice() int { return int(f.h.st.twice) }

// trigger returns, for trigger id, the sequence number its push returned and 1 + the order in
// which the proxy served it (0: never).
func (f fifoHarness) trigger(id int) (seq uint64, servedAt uint32) {
	return uint64(f.h.seqOf[id]), uint32(f.h.st.seenAt[id])
}

// fullPush times a push that waits for room in a full FIFO (fhFullPush) until it returns: the
// duration (0: not within 5 s), false when the setup failed, its result, and (closeIt) how long
// the context's close took (0: not within 5 s).
func (f fifoHarness) fullPush(closeIt bool, timeout time.Duration) (time.Duration, bool, uint64, time.Duration) {
	var seq, closed C.uint64_t
	ms := int64(-1)
	if timeout > 0 {
		ms = timeout.Milliseconds()
	}
	ci := C.int(0)
	if closeIt {
		ci = 1
	}
	d := C.fhFullPush(f.h, ci, C.int64_t(ms), &seq, &closed)
	return time.Duration(d), d >= 0, uint64(seq), time.Duration(closed)
}

func (f fifoHarness) free() { C.fhFree(f.h) }
