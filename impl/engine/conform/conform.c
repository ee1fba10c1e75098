/*
 * conform.c: see conform.h. In C because the suite drives the engine's C
 * path itself (engConnDo and the FIFO), as the host calls and the proxy do.
 */
#include "conform.h"

#include "../backoff.h"
#include "../engine.h"

int cfDo(void* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
         uint64_t size)
{
  return engConnDoCall((engConn*)c, type, dstHandle, dstOff, srcHandle, srcOff, size);
}

int cfFailed(void* c)
{
  engConn* x = (engConn*)c;
  return engConnFailed(x->comm, x->connId);
}

int cfProxyStart(void* c) { return engProxyStart(((engConn*)c)->ctx) == mscclppSuccess ? 0 : -1; }

void cfProxyStop(void* c) { engProxyStop(((engConn*)c)->ctx); }

int cfPushFlags(void* c, int n)
{
  engConn* x = (engConn*)c;
  struct mscclppConcurrentFifo f = {0};
  f.triggerFifo = &x->ctx->fifo[0];
  f.triggerFifoTail = &x->ctx->tail;
  f.triggerFifoHead = &x->ctx->head;
  f.connId = x->connId;
  uint64_t seq = 0;
  for (int i = 0; i < n; i++) {
    seq = mscclppFifoPush(&f, mscclppFlag, 0, 0, 1);
    if (seq == MSCCLPP_FIFO_PUSH_FAILED) return -1;
  }
  return n > 0 && mscclppFifoWaitServed(&f, seq) != mscclppSuccess ? -1 : 0;
}

uint64_t cfLoad64(const void* p) { return __atomic_load_n((const uint64_t*)p, __ATOMIC_ACQUIRE); }

uint64_t cfSignalsDone(void* c) { return __atomic_load_n(&((engConn*)c)->signalsDone, __ATOMIC_RELAXED); }

int cfWaitNext(void* c, int64_t timeoutMs) { return mscclppConnWaitNext(((engConn*)c)->dev, timeoutMs); }

uint64_t cfWaitRounds(void* c) { return __atomic_load_n(&((engConn*)c)->waitRounds, __ATOMIC_RELAXED); }

void cfSetPeerPid(void* c, int pid)
{
  ((engConn*)c)->peerPidfd = 0;
  __atomic_store_n(&((engConn*)c)->peerPid, pid, __ATOMIC_RELEASE);
}

static int cfLostOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                    uint64_t size)
{
  (void)type, (void)dstHandle, (void)dstOff, (void)srcHandle, (void)srcOff, (void)size;
  return engConnFail(c, mscclppRemoteError, "the conformance suite failed this connection");
}

static int cfLostSignal(engConn* c, uint64_t value)
{
  (void)value;
  return engConnFail(c, mscclppRemoteError, "the conformance suite failed this connection");
}

static const engOps cfLostOps = {
    .name = "lost",
    .op = cfLostOp,
    .sendSignal = cfLostSignal,
    .opsComplete = 1,
};

void cfInjectFailure(void* c) { engConnSetOps((engConn*)c, &cfLostOps); }

/* The suite's view of the signals the engine hands a transport: c's table wrapped so that each
 * signal value is checked against the last one (they must rise, in the order of the calls, as the
 * engine's lock orders them) before the transport's own entry runs; the wrapper then pauses on
 * the CPU, so that other signallers pile up and an order taken outside the lock would show. A
 * pause, not a yield: the engine holds its signal lock here, and a yield would hand the CPU to
 * whatever else runs, for a time slice, with every signaller queued behind it. One connection
 * at a time (the suite's cases run one after another). */
static struct {
  engOps ops;
  const engOps* inner;
  engConn* c;
  uint64_t last, inversions, calls;
} cfWrap;

static void cfSeen(uint64_t v)
{
  uint64_t last = __atomic_load_n(&cfWrap.last, __ATOMIC_RELAXED);
  if (v <= last) __atomic_fetch_add(&cfWrap.inversions, 1, __ATOMIC_RELAXED);
  __atomic_store_n(&cfWrap.last, v, __ATOMIC_RELAXED);
  __atomic_fetch_add(&cfWrap.calls, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < 256; i++) engPause();
}

static int cfSignal(engConn* c, uint64_t value)
{
  cfSeen(value);
  return cfWrap.inner->sendSignal(c, value);
}

static int cfPutSignal(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                       uint64_t size, uint64_t value)
{
  cfSeen(value);
  return cfWrap.inner->putSignal(c, dstHandle, dstOff, srcHandle, srcOff, size, value);
}

void cfWatch(void* c)
{
  engConn* x = (engConn*)c;
  cfWrap.inner = x->ops;
  cfWrap.c = x;
  cfWrap.ops = *x->ops;
  cfWrap.ops.sendSignal = cfSignal;
  /* the default putSignal calls signal through the table: wrap only a transport's own */
  if (x->ops->putSignal != engOpsSplitPutSignal) cfWrap.ops.putSignal = cfPutSignal;
  cfWrap.last = __atomic_load_n(&x->signalsDone, __ATOMIC_RELAXED);
  cfWrap.inversions = cfWrap.calls = 0;
  __atomic_store_n(&x->ops, &cfWrap.ops, __ATOMIC_RELEASE);
}

uint64_t cfUnwatch(uint64_t* calls)
{
  __atomic_store_n(&cfWrap.c->ops, cfWrap.inner, __ATOMIC_RELEASE);
  *calls = cfWrap.calls;
  return cfWrap.inversions;
}
