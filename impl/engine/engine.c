/*
 * engine.c: the C half of the public data-path API (include/mscclpp.h):
 * host-initiated operations on connections, host waits, and the host side of
 * the trigger FIFO (see engine.h). In C so that a put + signal costs a
 * function call and a copy, not a call into the Go runtime. What a transport
 * does for them goes through its ops table (transport.h) only.
 */
#include "engine.h"

#include "backoff.h"
#include "report.h"

/* A child forked after the library loaded must not use the data path: its
 * connections, FIFOs and proxy flags are copies of the parent's (a put would
 * write into the peer, a wait would wait on a proxy that does not exist in
 * the child). Every entry point makes the fork check of every entry point first
 * (errForked, impl/status/errs.h: one load). */

#define ENG_NOT_OURS "not a connection returned by mscclppGetAllDeviceConnections, or its communicator was destroyed"
#define ENG_CUDA_MODE \
  "this connection runs in CUDA mode: its counters and FIFO are in device memory, so its methods are for device code"

/* The refusal of ctxEnter and connEnter: leaves ctx (when entered) and records why. */
static __attribute__((noinline)) void* enterRefuse(engCtx* ctx, const char* fn, const char* why)
{
  if (ctx != NULL) engLeave(ctx);
  engFail(NULL, mscclppInvalidUsage, "%s: %s", fn, why);
  return NULL;
}

/* Enters the live context behind a FIFO (engEnter) after the fork check: the one validation of a
 * device connection or FIFO handed to the data path. NULL, with the process-wide last error set,
 * when there is none; hostOnly refuses CUDA-mode contexts. On success the caller must engLeave. */
static inline __attribute__((always_inline)) engCtx* ctxEnter(struct mscclppConcurrentFifo* fifo, const char* fn,
                                                             const char* what, int hostOnly)
{
  if (errForked(fn)) return NULL;
  if (__builtin_expect(fifo == NULL, 0)) return (engCtx*)enterRefuse(NULL, fn, what);
  engCtx* ctx = engEnter(fifo->triggerFifo);
  if (__builtin_expect(ctx == NULL, 0)) return (engCtx*)enterRefuse(NULL, fn, ENG_NOT_OURS);
  if (hostOnly && __builtin_expect(ctx->devHead != NULL, 0)) return (engCtx*)enterRefuse(ctx, fn, ENG_CUDA_MODE);
  return ctx;
}

/* Enters the live context of a device connection (ctxEnter) and finds its engine
 * connection; NULL, with the process-wide last error set, when there is none.
 * On success the caller must engLeave(c->ctx).
 * Inlined: on the host data path each call between a wait that returns and the signal
 * that answers it adds to the one-way latency. */
static inline __attribute__((always_inline)) engConn* connEnter(struct mscclppDevConn* dev, const char* fn,
                                                                int hostOnly)
{
  engCtx* ctx = ctxEnter(dev != NULL ? &dev->fifo : NULL, fn, "conn is NULL", hostOnly);
  if (__builtin_expect(ctx == NULL, 0)) return NULL;
  int id = dev->fifo.connId;
  if (__builtin_expect(id < 0 || id >= ENG_MAX_CONNS, 0)) return (engConn*)enterRefuse(ctx, fn, "fifo.connId out of range");
  engConn* c = ctx->conns[id];
  if (__builtin_expect(c == NULL, 0))
    return (engConn*)enterRefuse(ctx, fn, "connection not set up: call mscclppConnectionSetup first");
  return c;
}

int engCheckPut(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff, uint64_t size,
                const engReg** src, const engReg** dst)
{
  if (srcHandle == 0 || dstHandle == 0) /* handle 0 is the connection's signal slot: only signals write it */
    return engConnFail(c, mscclppInvalidArgument,
                       "put from handle %llu to handle %llu: handle 0 is the signal slot, not data",
                       (unsigned long long)srcHandle, (unsigned long long)dstHandle);
  if (c->nLocal <= 0 || c->nRemote <= 0 || srcHandle >= (uint64_t)c->nLocal || dstHandle >= (uint64_t)c->nRemote)
    return engConnFail(c, mscclppInvalidArgument, "put from handle %llu to handle %llu: only %d local and %d remote handles",
                       (unsigned long long)srcHandle, (unsigned long long)dstHandle, c->nLocal, c->nRemote);
  const engReg* s = &c->local[srcHandle];
  const engReg* d = &c->remote[dstHandle];
  if (srcOff > s->size || size > s->size - srcOff)
    return engConnFail(c, mscclppInvalidArgument,
                       "put reads %llu bytes at offset %llu of local handle %llu, which has %llu bytes",
                       (unsigned long long)size, (unsigned long long)srcOff, (unsigned long long)srcHandle,
                       (unsigned long long)s->size);
  if (dstOff > d->size || size > d->size - dstOff)
    return engConnFail(c, mscclppInvalidArgument,
                       "put writes %llu bytes at offset %llu of remote handle %llu, which has %llu bytes",
                       (unsigned long long)size, (unsigned long long)dstOff, (unsigned long long)dstHandle,
                       (unsigned long long)d->size);
  *src = s;
  *dst = d;
  return mscclppSuccess;
}

/* drainFifo's wait, from head: the triggers pushed before the call not served yet. */
static __attribute__((noinline)) int drainFifoWait(engConn* c, uint64_t head)
{
  engCtx* ctx = c->ctx;
  engWait w;
  engWaitInit(&w, -1);
  while (__atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE) < head) {
    if (engWaitStep(&w, &c->comm->waitCfg) == ENG_WAIT_GO) continue;
    if (!__atomic_load_n(&ctx->running, __ATOMIC_ACQUIRE))
      return engConnFail(c, mscclppInvalidUsage,
                         "signal or flush with triggers queued in the FIFO and no proxy running (call mscclppProxyLaunch)");
    if (__atomic_load_n(&ctx->closing, __ATOMIC_ACQUIRE))
      return engConnFail(c, mscclppInvalidUsage, "communicator destroyed during a signal or flush");
  }
  return mscclppSuccess;
}

/* A host Flag or Sync covers every earlier put, including triggers pushed into the
 * FIFO: wait until the proxy has served everything pushed before this call. */
static inline int drainFifo(engConn* c)
{
  engCtx* ctx = c->ctx;
  if (ctx->devHead != NULL) return mscclppSuccess;
  uint64_t head = __atomic_load_n(&ctx->head, __ATOMIC_ACQUIRE);
  if (__builtin_expect(__atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE) >= head, 1)) return mscclppSuccess;
  return drainFifoWait(c, head);
}

/* mscclppConnOp's work on the entered connection c. */
static inline int connOp(engConn* c, uint64_t type, uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize)
{
  int rc = mscclppSuccess;
  if (type & (mscclppFlag | mscclppSync)) rc = drainFifo(c);
  if (rc == mscclppSuccess) rc = c->ops->op(c, type, 1, dstDataOffset, 1, srcDataOffset, dataSize);
  if ((type & mscclppData) && rc == mscclppSuccess) engCountPut(c, dataSize);
  return rc;
}

mscclppResult_t mscclppConnOp(struct mscclppDevConn* conn, uint64_t type, uint64_t dstDataOffset,
                              uint64_t srcDataOffset, uint64_t dataSize)
{
  /* a signal sends the count host threads cannot keep on a CUDA-mode connection */
  engConn* c = connEnter(conn, "mscclppConnOp", (type & mscclppFlag) != 0);
  if (c == NULL) return mscclppInvalidUsage;
  int rc = connOp(c, type, dstDataOffset, srcDataOffset, dataSize);
  engLeave(c->ctx);
  return (mscclppResult_t)rc;
}

/* epochIncrement() and mscclppConnOp in one entry (the host signal methods): one check of the
 * connection instead of two, and the increment after the operation. The device epoch lies in
 * the cache line the peer's signals arrive in, which this side has just read in its wait: a
 * locked increment first would fetch that line back before the put and its signal could
 * leave. Nothing reads the device epoch across processes, and it is incremented whatever the
 * operation returns, as the two calls did; errors name mscclppConnOp, as the later call did. */
mscclppResult_t mscclppConnSignalOp(struct mscclppDevConn* conn, uint64_t type, uint64_t dstDataOffset,
                                    uint64_t srcDataOffset, uint64_t dataSize)
{
  engConn* c = connEnter(conn, "mscclppConnOp", 1);
  if (c == NULL) return mscclppInvalidUsage;
  int rc = connOp(c, type, dstDataOffset, srcDataOffset, dataSize);
  __atomic_fetch_add(&conn->localSignalEpochId->device, 1, __ATOMIC_RELAXED);
  engLeave(c->ctx);
  return (mscclppResult_t)rc;
}

mscclppResult_t mscclppConnPutHandle(struct mscclppDevConn* conn, mscclppBufferHandle_t dst, uint64_t dstDataOffset,
                                     mscclppBufferHandle_t src, uint64_t srcDataOffset, uint64_t dataSize)
{
  engConn* c = connEnter(conn, "mscclppConnPutHandle", 0);
  if (c == NULL) return mscclppInvalidUsage;
  int rc = c->ops->op(c, mscclppData, dst, dstDataOffset, src, srcDataOffset, dataSize);
  if (rc == mscclppSuccess) engCountPut(c, dataSize);
  engLeave(c->ctx);
  return (mscclppResult_t)rc;
}

void mscclppConnEpochIncrement(struct mscclppDevConn* conn)
{
  engConn* c = connEnter(conn, "mscclppConnEpochIncrement", 1);
  if (c == NULL) return;
  __atomic_fetch_add(&conn->localSignalEpochId->device, 1, __ATOMIC_RELAXED);
  engLeave(c->ctx);
}

static mscclppResult_t waitFor(engConn* c, struct mscclppDevConn* conn, int64_t timeoutMs);

/* The first look and the first ENG_CLOCK_EVERY polls of a wait, inline: 1 when the epoch
 * reached want. No check is due before then (waitFor reads the clock, and looks at a closing
 * communicator and a remote error, every ENG_CLOCK_EVERY pauses), and a signal that arrives
 * meanwhile returns through no call: each between the signal and the answering put adds to
 * the one-way latency. A wait that may not spin (timeout 0, a transport whose waits poll or
 * sleep first) only looks once. */
static inline int waitSpin(engConn* c, struct mscclppDevConn* conn, uint64_t want, int64_t timeoutMs)
{
  volatile uint64_t* proxy = &conn->localSignalEpochId->proxy;
  if (__atomic_load_n(proxy, __ATOMIC_ACQUIRE) >= want) {
    c->spinAnswered++;
    return 1;
  }
  if (c->ops->waitStyle != ENG_WAIT_SPIN || timeoutMs == 0) return 0;
  for (int i = 0; i < ENG_CLOCK_EVERY; i++) {
    engPause();
    if (__atomic_load_n(proxy, __ATOMIC_ACQUIRE) >= want) {
      c->spinAnswered++;
      return 1;
    }
  }
  return 0;
}

mscclppResult_t mscclppConnWaitNext(struct mscclppDevConn* conn, int64_t timeoutMs)
{
  engConn* c = connEnter(conn, "mscclppConnWaitNext", 1);
  if (c == NULL) return mscclppInvalidUsage;
  uint64_t want = *conn->waitEpochId + 1;
  *conn->waitEpochId = want;
  mscclppResult_t rc = waitSpin(c, conn, want, timeoutMs) ? mscclppSuccess : waitFor(c, conn, timeoutMs);
  engLeave(c->ctx);
  return rc;
}

mscclppResult_t mscclppConnWait(struct mscclppDevConn* conn, int64_t timeoutMs)
{
  engConn* c = connEnter(conn, "mscclppConnWait", 1);
  if (c == NULL) return mscclppInvalidUsage;
  mscclppResult_t rc = waitFor(c, conn, timeoutMs);
  engLeave(c->ctx);
  return rc;
}

/* Records and returns the failure of a wait on c whose peer exited. */
static mscclppResult_t waitPeerExited(engConn* c, const char* what)
{
  engFail(c->comm, mscclppRemoteError, "rank %d (pid %d) exited while rank %d waited for %s", c->peerRank, c->peerPid,
          c->comm->rank, what);
  engMarkConnFailed(c->comm, c->connId); /* after the error is recorded: another wait it ends finds it */
  return mscclppRemoteError;
}

/* What engWaitStep reports, without backing off: for a wait that blocked elsewhere. */
static int waitChecks(engWait* w)
{
  uint64_t now = engWaitClock(w);
  if (w->timeoutMs >= 0 && now >= w->deadline) return ENG_WAIT_TIMEOUT;
  if (now < w->nextSlow) return ENG_WAIT_CHECK;
  w->nextSlow = now + ENG_SLOW_EVERY_NS;
  return ENG_WAIT_SLOW;
}

/* The back-off of a wait on c: its communicator's, shaped by the transport's waitStyle. */
static inline const engBackoffCfg* waitBackoff(engConn* c, engBackoffCfg* sleeping)
{
  const engBackoffCfg* cfg = &c->comm->waitCfg;
  if (c->ops->waitStyle != ENG_WAIT_SLEEP) return cfg;
  /* no spin: it would keep the CPU from the thread that delivers the signal; with a sleeper
   * count that thread wakes the wait, so it sleeps at once, else it yields */
  *sleeping = *cfg;
  sleeping->yields = cfg->yields > UINT32_MAX - cfg->spin ? UINT32_MAX : cfg->yields + cfg->spin;
  sleeping->spin = 0;
  if (c->localSleepers != NULL) sleeping->yields = 0;
  return sleeping;
}

/* Waits until conn's proxy epoch reaches *waitEpochId (see mscclppConnWait): the deadline,
 * a remote failure and a closing communicator are looked at every bounded number of
 * steps in every back-off phase, peer liveness every few milliseconds. Once the back-off
 * would sleep, a wait whose epoch lives in the node segment sleeps on a futex instead,
 * which the peer's signal wakes at once. Every time round the transport's waitPoll
 * delivers what only the wait would (transport.h). */
static mscclppResult_t waitFor(engConn* c, struct mscclppDevConn* conn, int64_t timeoutMs)
{
  volatile uint64_t* proxy = &conn->localSignalEpochId->proxy;
  uint64_t want = *conn->waitEpochId;
  const engOps* ops = c->ops;
  engBackoffCfg sleeping;
  const engBackoffCfg* cfg = waitBackoff(c, &sleeping);
  /* the default waitPoll does nothing: a wait skips calling it, and its loop loads no hook */
  const int polls = ops->waitPoll != engOpsNoWaitPoll;
  engWait w;
  engWaitInit(&w, timeoutMs);
  for (;;) {
    if (__atomic_load_n(proxy, __ATOMIC_ACQUIRE) >= want) return mscclppSuccess;
    int polled = polls ? ops->waitPoll(c, proxy, want, &w) : ENG_POLL_IDLE;
    if (polled != ENG_POLL_IDLE && __atomic_load_n(proxy, __ATOMIC_ACQUIRE) >= want) return mscclppSuccess;
    /* a poll that blocked has waited already: the wait only looks at its conditions */
    int st = polled == ENG_POLL_BLOCKED ? waitChecks(&w)
             : (c->localSleepers != NULL && w.b.n >= cfg->spin + cfg->yields)
                 ? engWaitFutex(&w, proxy, want, c->localSleepers, ops->waitPending, c)
                 : engWaitStep(&w, cfg);
    switch (st) {
    case ENG_WAIT_GO:
      continue;
    case ENG_WAIT_TIMEOUT:
      ops->waitPoll(c, proxy, want, NULL); /* what arrived meanwhile */
      if (__atomic_load_n(proxy, __ATOMIC_ACQUIRE) >= want) return mscclppSuccess;
      /* a wait polled with timeouts makes no progress either: the report counts across calls */
      if (__builtin_expect(c->comm->hangReportNs != 0, 0)) engHangCheck(c, want, w.start);
      return mscclppInProgress;
    case ENG_WAIT_SLOW:
      if (__builtin_expect(c->comm->hangReportNs != 0, 0)) engHangCheck(c, want, w.start);
      /* the peer may signal (or queue a signal) and exit between the load above and this check: look again */
      if (engProcessGone(c->peerPid)) {
        ops->waitPoll(c, proxy, want, NULL);
        if (__atomic_load_n(proxy, __ATOMIC_ACQUIRE) < want) return waitPeerExited(c, "its signal");
      }
      /* fall through */
    default:
      if (__atomic_load_n(&c->peerClosed, __ATOMIC_ACQUIRE) && __atomic_load_n(proxy, __ATOMIC_ACQUIRE) < want) {
        /* the communicator's and the process's last error, not an asynchronous one */
        return (mscclppResult_t)errFail(&c->comm->err, mscclppRemoteError,
                                        "rank %d closed its connection or is unreachable while rank %d waited for its signal",
                                        c->peerRank, c->comm->rank);
      }
      /* only a remote failure of this connection, or of the communicator, ends the wait: a
       * rejected put of this rank's does not, nor another connection's failure */
      if (__atomic_load_n(&c->comm->connFailed[c->connId], __ATOMIC_ACQUIRE) ||
          __atomic_load_n(&c->comm->broken, __ATOMIC_ACQUIRE))
        return mscclppRemoteError;
      if (__atomic_load_n(&c->ctx->closing, __ATOMIC_ACQUIRE))
        return engFail(NULL, mscclppInvalidUsage, "mscclppConnWait: communicator destroyed while waiting");
    }
  }
}

/* The host-mode context behind a FIFO, entered (engLeave after), or NULL with the
 * process-wide last error set. */
static inline __attribute__((always_inline)) engCtx* fifoEnter(struct mscclppConcurrentFifo* fifo, const char* fn)
{
  return ctxEnter(fifo, fn, "fifo is NULL", 1);
}

/* Slots a push that found the FIFO full waits to see free beyond its own (< MSCCLPP_PROXY_FIFO_SIZE). */
#define ENG_PUSH_ROOM (MSCCLPP_PROXY_FIFO_SIZE / 4)

/* The wait of a push whose claim h found the FIFO full (out of line: the common push never
 * waits): until ENG_PUSH_ROOM more slots are free, so that the pushes that follow fill lines the
 * proxy has left instead of the one it reads next, and the tail is read once per such batch, not
 * once per push. Every claim below h is made, and a claim waits only for claims below its own,
 * so the lowest waiting one always moves. Returns the tail it read last. */
static __attribute__((noinline)) uint64_t pushWaitRoom(engCtx* ctx, uint64_t h)
{
  engWait w;
  engWaitInit(&w, -1);
  uint64_t seen;
  while (h + ENG_PUSH_ROOM >= MSCCLPP_PROXY_FIFO_SIZE + (seen = __atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE)))
    engWaitStep(&w, &ctx->comm->waitCfg);
  return seen;
}

/* A push's refusal once its context is entered: leaves it and records why (out of line, so that
 * the common push keeps its registers). */
static __attribute__((noinline, cold)) uint64_t pushRefuse(engCtx* ctx, const char* why)
{
  engLeave(ctx);
  engFail(NULL, mscclppInvalidUsage, "mscclppFifoPush: %s", why);
  return MSCCLPP_FIFO_PUSH_FAILED;
}

/* mscclppFifoPush with every check in order, and the reason of a refusal: where the push goes
 * whenever its common case (below) does not apply. */
static __attribute__((noinline)) uint64_t pushChecked(struct mscclppConcurrentFifo* fifo, uint64_t type,
                                                      uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize)
{
  engCtx* ctx = fifoEnter(fifo, "mscclppFifoPush");
  if (ctx == NULL) return MSCCLPP_FIFO_PUSH_FAILED;
  if (__builtin_expect((type & (mscclppData | mscclppFlag | mscclppSync)) == 0 || (type >> MSCCLPP_BITS_TYPE) != 0, 0))
    return pushRefuse(ctx, "type must be a non-empty OR of mscclppData, mscclppFlag and mscclppSync");
  /* a trigger is served on its connection: refuse one whose connection is not set up yet */
  if (__builtin_expect(fifo->connId < 0 || fifo->connId >= ENG_MAX_CONNS ||
                           __atomic_load_n(&ctx->conns[fifo->connId], __ATOMIC_ACQUIRE) == NULL,
                       0))
    return pushRefuse(ctx, "connection not set up: call mscclppConnectionSetup first");
  if (MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize) == 0) {
    /* an empty put: it would read as an empty slot, so push it as a marker that moves no data
     * (a Data-only one as a Sync: a trigger needs a type), as the device push does */
    type &= ~(uint64_t)mscclppData;
    if (type == 0) type = mscclppSync;
    dataSize = 1;
  }
  /* Claim a slot. Without a proxy nobody would ever free one: refuse instead of
   * waiting when the FIFO is full (a proxy stopping meanwhile first serves every
   * claimed slot, so a claim made while it ran is always served). */
  uint64_t h = __atomic_load_n(&ctx->head, __ATOMIC_RELAXED);
  do {
    if (__builtin_expect(!__atomic_load_n(&ctx->running, __ATOMIC_ACQUIRE), 0) &&
        h >= MSCCLPP_PROXY_FIFO_SIZE + __atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE))
      return pushRefuse(ctx, "the FIFO is full and no proxy is running (call mscclppProxyLaunch)");
  } while (!__atomic_compare_exchange_n(&ctx->head, &h, h + 1, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
  /* Room for claim h: the claim MSCCLPP_PROXY_FIFO_SIZE before it, on the same slot, must have
   * been served (tail past it), else two claims could fill the slot at once. The proxy empties a
   * slot before its tail moves past it, so a tail read with acquire also says the slot is empty
   * and orders this push after the emptying: the push writes the slot without reading it (a read
   * would fetch the proxy's line once more before the write could take it). tailSeen never runs
   * ahead of the proxy's tail (a tail once read; a racing initiator may store an older one, which
   * is only more cautious), and its release store and acquire load carry that order from the
   * initiator that read the tail; only when it shows no room is the shared tail read, and the
   * value read kept. */
  uint64_t seen = __atomic_load_n(&ctx->tailSeen, __ATOMIC_ACQUIRE);
  if (h >= MSCCLPP_PROXY_FIFO_SIZE + seen) {
    seen = __atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE);
    if (h >= MSCCLPP_PROXY_FIFO_SIZE + seen) seen = pushWaitRoom(ctx, h);
    __atomic_store_n(&ctx->tailSeen, seen, __ATOMIC_RELEASE);
  }
  mscclppTrigger* slot = &ctx->fifo[h % MSCCLPP_PROXY_FIFO_SIZE];
  __atomic_store_n(&slot->value[1], MSCCLPP_TRIGGER_WORD1(type, fifo->connId, dstDataOffset), __ATOMIC_RELAXED);
  __atomic_store_n(&slot->value[0], MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize), __ATOMIC_RELEASE);
  /* the doorbell of a sleeping proxy (proxy.c, idle): read after the claim, which orders it */
  if (__builtin_expect(__atomic_load_n(&ctx->proxyAsleep, __ATOMIC_SEQ_CST), 0)) engFutexWakePrivate(&ctx->head);
  engLeave(ctx);
  return h;
}

/* The thread's record when a host FIFO call may take its common path (no fork, membarrier mode, the
 * record made, a FIFO given), else NULL: the call's checked path, which says what is wrong. */
static inline __attribute__((always_inline)) engThread* fifoCommonThread(struct mscclppConcurrentFifo* fifo)
{
  engThread* t = engThreadSelf;
  int other = errForkedChild | (fifo == NULL) | (__atomic_load_n(&engUseMembarrier, __ATOMIC_ACQUIRE) != 1) | (t == NULL);
  return __builtin_expect(other, 0) ? NULL : t;
}

/* The end of a push that found the proxy asleep: its doorbell, then the leave (a tail call, so that
 * the common push keeps no registers across a call). */
static __attribute__((noinline)) uint64_t pushRing(engCtx* ctx, engThread* t, uint64_t h)
{
  engFutexWakePrivate(&ctx->head);
  engLeaveRecorded(t);
  return h;
}

/* The common push, which pushChecked would make the same way: a valid trigger that moves data or
 * marks, on a live host-mode context and a connection that is set up, one claim that finds room.
 * Anything else (a refusal, an empty put, a full FIFO, a claim another initiator won) goes to
 * pushChecked from the start. Its other calls are tail calls: between a wait that returns and the
 * next push's slot, saved registers and calls add to every round trip. */
uint64_t mscclppFifoPush(struct mscclppConcurrentFifo* fifo, uint64_t type, uint64_t dstDataOffset,
                         uint64_t srcDataOffset, uint64_t dataSize)
{
  engThread* t = fifoCommonThread(fifo);
  int common = (t != NULL) & ((type & (mscclppData | mscclppFlag | mscclppSync)) != 0) &
               ((type >> MSCCLPP_BITS_TYPE) == 0) & (MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize) != 0);
  engCtx* ctx = common && fifo->triggerFifo != NULL ? engEnterRecorded(t, fifo->triggerFifo) : NULL;
  if (__builtin_expect(ctx == NULL, 0)) return pushChecked(fifo, type, dstDataOffset, srcDataOffset, dataSize);
  int connId = fifo->connId;
  uint64_t h;
  if (__builtin_expect(ctx->devHead != NULL || connId < 0 || connId >= ENG_MAX_CONNS ||
                           __atomic_load_n(&ctx->conns[connId], __ATOMIC_ACQUIRE) == NULL ||
                           (h = __atomic_load_n(&ctx->head, __ATOMIC_RELAXED)) >=
                               MSCCLPP_PROXY_FIFO_SIZE + __atomic_load_n(&ctx->tailSeen, __ATOMIC_ACQUIRE) ||
                           !__atomic_compare_exchange_n(&ctx->head, &h, h + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED),
                       0)) {
    engLeaveRecorded(t);
    return pushChecked(fifo, type, dstDataOffset, srcDataOffset, dataSize);
  }
  /* room: tailSeen (pushChecked says why that suffices) */
  mscclppTrigger* slot = &ctx->fifo[h % MSCCLPP_PROXY_FIFO_SIZE];
  __atomic_store_n(&slot->value[1], MSCCLPP_TRIGGER_WORD1(type, connId, dstDataOffset), __ATOMIC_RELAXED);
  __atomic_store_n(&slot->value[0], MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize), __ATOMIC_RELEASE);
  if (__builtin_expect(__atomic_load_n(&ctx->proxyAsleep, __ATOMIC_SEQ_CST), 0)) return pushRing(ctx, t, h);
  engLeaveRecorded(t);
  return h;
}

/* How many polls of the slot a mscclppFifoWaitServed makes, each after a pause, before its
 * bounded wait (waitServedSlow) takes over: a Sync is usually served within them. Never more
 * than the wait's spin setting (MSCCLPP_WAIT_SPIN 0: no polls before the wait). */
#define ENG_SERVED_POLLS 32

/* The rest of a mscclppFifoWaitServed once its first polls found seq not served (out of line,
 * so that a wait served at once keeps a small frame): the bounded wait, and the communicator's
 * error when the trigger may not have been done. Leaves ctx. */
static __attribute__((noinline)) int waitServedSlow(engCtx* ctx, mscclppTrigger* slot, uint64_t seq)
{
  const char* fn = "mscclppFifoWaitServed";
  engWait w;
  engWaitInit(&w, -1);
  int rc = mscclppSuccess;
  /* Served: the slot emptied, or the tail past seq (a later push may have refilled the slot). The
   * polls read the slot alone, and the tail only at the wait's checks: the proxy stores its tail
   * on every publish, and a tail read on every poll would take its line back each time and
   * delay this thread's next look at the slot. */
  while (__atomic_load_n(&slot->value[0], __ATOMIC_ACQUIRE) != 0) {
    if (engWaitStep(&w, &ctx->comm->waitCfg) == ENG_WAIT_GO) continue;
    if (__atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE) > seq) break;
    if (__atomic_load_n(&ctx->closing, __ATOMIC_ACQUIRE)) {
      engFail(NULL, mscclppInvalidUsage, "%s: communicator destroyed while waiting", fn);
      rc = mscclppInvalidUsage;
      break;
    }
    if (!__atomic_load_n(&ctx->running, __ATOMIC_ACQUIRE) && __atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE) <= seq) {
      engFail(NULL, mscclppInvalidUsage, "%s: the trigger waits in the FIFO and no proxy is running (call mscclppProxyLaunch)", fn);
      rc = mscclppInvalidUsage;
      break;
    }
  }
  /* served, but refused (bad arguments) or by a proxy that failed meanwhile (both are recorded before
   * the slot empties): the trigger may not have been done */
  char why[512];
  int async = rc == mscclppSuccess && (__atomic_load_n(&ctx->failed, __ATOMIC_ACQUIRE) ||
                                       __atomic_load_n(&ctx->refused, __ATOMIC_ACQUIRE) == seq + 1)
                  ? errAsync(&ctx->comm->err, why, (int)sizeof(why))
                  : 0;
  if (async != 0) rc = errFail(NULL, async, "%s: the communicator failed: %s", fn, why);
  engLeave(ctx);
  return rc;
}

/* mscclppFifoWaitServed with every check in order, and the reason of a refusal: where the wait goes
 * whenever its common case (below) does not apply. */
static __attribute__((noinline)) int waitServedChecked(struct mscclppConcurrentFifo* fifo, uint64_t seq)
{
  const char* fn = "mscclppFifoWaitServed";
  engCtx* ctx = fifoEnter(fifo, fn);
  if (ctx == NULL) return mscclppInvalidUsage;
  if (seq == MSCCLPP_FIFO_PUSH_FAILED || seq >= __atomic_load_n(&ctx->head, __ATOMIC_ACQUIRE)) {
    engLeave(ctx);
    engFail(NULL, mscclppInvalidUsage, "%s: seq is not the result of a successful push on this FIFO", fn);
    return mscclppInvalidArgument;
  }
  return waitServedSlow(ctx, &ctx->fifo[seq % MSCCLPP_PROXY_FIFO_SIZE], seq);
}

/* The common wait: a live host-mode context and a seq it has pushed; anything else goes to
 * waitServedChecked from the start (as mscclppFifoPush does, and for the same reason). */
int mscclppFifoWaitServed(struct mscclppConcurrentFifo* fifo, uint64_t seq)
{
  engThread* t = fifoCommonThread(fifo);
  engCtx* ctx = t != NULL && fifo->triggerFifo != NULL ? engEnterRecorded(t, fifo->triggerFifo) : NULL;
  if (__builtin_expect(ctx == NULL, 0)) return waitServedChecked(fifo, seq);
  if (__builtin_expect(ctx->devHead != NULL || seq == MSCCLPP_FIFO_PUSH_FAILED ||
                           seq >= __atomic_load_n(&ctx->head, __ATOMIC_ACQUIRE),
                       0)) {
    engLeaveRecorded(t);
    return waitServedChecked(fifo, seq);
  }
  mscclppTrigger* slot = &ctx->fifo[seq % MSCCLPP_PROXY_FIFO_SIZE];
  /* the first polls, inline: the slot alone (waitServedSlow says why), no clock, no checks */
  uint32_t polls = ctx->comm->waitCfg.spin < ENG_SERVED_POLLS ? ctx->comm->waitCfg.spin : ENG_SERVED_POLLS;
  for (uint32_t i = 0; i < polls; i++) {
    if (__atomic_load_n(&slot->value[0], __ATOMIC_ACQUIRE) == 0) {
      if (__builtin_expect(__atomic_load_n(&ctx->failed, __ATOMIC_ACQUIRE) ||
                               __atomic_load_n(&ctx->refused, __ATOMIC_ACQUIRE) == seq + 1,
                           0))
        break; /* served, but maybe not done: waitServedSlow reports why */
      engLeaveRecorded(t);
      return mscclppSuccess;
    }
    engPause();
  }
  return waitServedSlow(ctx, slot, seq);
}
