/*
 * engine.c: the C half of the public data-path API (include/mscclpp.h) on
 * connections: host-initiated operations and host waits (fifo.c has the host
 * side of the trigger FIFO; see engine.h). In C so that a put + signal costs a
 * function call and a copy, not a call into the Go runtime. What a transport
 * does for them goes through its ops table (transport.h) only.
 */
#include "engine.h"

#include <stdio.h>

#include "backoff.h"
#include "enter.h"
#include "report.h"

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
  if (__builtin_expect(id < 0 || id >= ENG_MAX_CONNS, 0)) return (engConn*)engEnterRefuse(ctx, fn, "fifo.connId out of range");
  engConn* c = ctx->conns[id];
  if (__builtin_expect(c == NULL, 0))
    return (engConn*)engEnterRefuse(ctx, fn, "connection not set up: call mscclppConnectionSetup first");
  return c;
}

/* The refusal of a NULL connection: InvalidArgument, as every other NULL argument, naming the
 * call the program made (out of line: rare). */
static __attribute__((noinline)) mscclppResult_t connNull(const char* fn)
{
  if (errForked(fn)) return mscclppInvalidUsage;
  return (mscclppResult_t)engFail(NULL, mscclppInvalidArgument, "%s: conn is NULL", fn);
}

/* connNull for an operation of this type: the C helper of include/mscclppdevconn.h that spells
 * it, with the entry point it calls (signalOp: mscclppConnSignalOp's, else mscclppConnOp's). */
static __attribute__((noinline)) mscclppResult_t connOpNull(uint64_t type, int signalOp)
{
  const char* helper = type == mscclppData                                   ? "mscclppDevConnPut"
                       : type == mscclppSync                                 ? "mscclppDevConnFlush"
                       : type == mscclppFlag                                 ? "mscclppDevConnSignal"
                       : type == (mscclppData | mscclppFlag)                 ? "mscclppDevConnPutWithSignal"
                       : type == (mscclppData | mscclppFlag | mscclppSync) ? "mscclppDevConnPutWithSignalAndFlush"
                                                                             : NULL;
  const char* entry = signalOp ? "mscclppConnSignalOp" : "mscclppConnOp";
  if (helper == NULL) return connNull(entry);
  char fn[96];
  snprintf(fn, sizeof(fn), "%s (%s)", helper, entry);
  return connNull(fn);
}

int engPutRefused(engConn* c, int why, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                  uint64_t size)
{
  unsigned long long dh = dstHandle, sh = srcHandle, n = size;
  switch (why) {
  case ENG_PUT_SIGNAL_SLOT:
    return engConnFail(c, mscclppInvalidArgument, "put from handle %llu to handle %llu: handle 0 is the signal slot, not data",
                       sh, dh);
  case ENG_PUT_NO_HANDLE:
    return engConnFail(c, mscclppInvalidArgument, "put from handle %llu to handle %llu: only %d local and %d remote handles",
                       sh, dh, c->nLocal, c->nRemote);
  case ENG_PUT_SRC_RANGE:
    return engConnFail(c, mscclppInvalidArgument,
                       "put reads %llu bytes at offset %llu of local handle %llu, which has %llu bytes", n,
                       (unsigned long long)srcOff, sh, (unsigned long long)c->local[srcHandle].size);
  default:
    return engConnFail(c, mscclppInvalidArgument,
                       "put writes %llu bytes at offset %llu of remote handle %llu, which has %llu bytes", n,
                       (unsigned long long)dstOff, dh, (unsigned long long)c->remote[dstHandle].size);
  }
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
  if (rc == mscclppSuccess) rc = engConnDo(c, type, 1, dstDataOffset, 1, srcDataOffset, dataSize);
  if ((type & mscclppData) && rc == mscclppSuccess) engCountPut(c, dataSize);
  return rc;
}

mscclppResult_t mscclppConnOp(struct mscclppDevConn* conn, uint64_t type, uint64_t dstDataOffset,
                              uint64_t srcDataOffset, uint64_t dataSize)
{
  /* a signal sends the count host threads cannot keep on a CUDA-mode connection */
  if (__builtin_expect(conn == NULL, 0)) return connOpNull(type, 0);
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
  if (__builtin_expect(conn == NULL, 0)) return connOpNull(type, 1);
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
  if (__builtin_expect(conn == NULL, 0)) return connNull("mscclppConnPutHandle");
  engConn* c = connEnter(conn, "mscclppConnPutHandle", 0);
  if (c == NULL) return mscclppInvalidUsage;
  int rc = engConnDo(c, mscclppData, dst, dstDataOffset, src, srcDataOffset, dataSize);
  if (rc == mscclppSuccess) engCountPut(c, dataSize);
  engLeave(c->ctx);
  return (mscclppResult_t)rc;
}

void mscclppConnEpochIncrement(struct mscclppDevConn* conn)
{
  if (__builtin_expect(conn == NULL, 0)) {
    connNull("mscclppConnEpochIncrement (mscclppDevConnEpochIncrement)");
    return;
  }
  engConn* c = connEnter(conn, "mscclppConnEpochIncrement", 1);
  if (c == NULL) return;
  __atomic_fetch_add(&conn->localSignalEpochId->device, 1, __ATOMIC_RELAXED);
  engLeave(c->ctx);
}

static mscclppResult_t waitFor(engConn* c, struct mscclppDevConn* conn, int64_t timeoutMs, int counted);

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
  if (__builtin_expect(conn == NULL, 0))
    return connNull(timeoutMs < 0 ? "mscclppDevConnWait (mscclppConnWaitNext)" : "mscclppDevConnWaitTimeout (mscclppConnWaitNext)");
  engConn* c = connEnter(conn, "mscclppConnWaitNext", 1);
  if (c == NULL) return mscclppInvalidUsage;
  uint64_t want = *conn->waitEpochId + 1;
  *conn->waitEpochId = want;
  mscclppResult_t rc = waitSpin(c, conn, want, timeoutMs) ? mscclppSuccess : waitFor(c, conn, timeoutMs, 0);
  /* a timed-out wait consumes nothing (MPI_Test's idiom): the same call again waits for the
   * same signal; a count made meanwhile by another thread's wait stays */
  if (rc == mscclppInProgress)
    __atomic_compare_exchange_n(conn->waitEpochId, &want, want - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  engLeave(c->ctx);
  return rc;
}

mscclppResult_t mscclppConnWait(struct mscclppDevConn* conn, int64_t timeoutMs)
{
  if (__builtin_expect(conn == NULL, 0)) return connNull("mscclppConnWait");
  engConn* c = connEnter(conn, "mscclppConnWait", 1);
  if (c == NULL) return mscclppInvalidUsage;
  mscclppResult_t rc = waitFor(c, conn, timeoutMs, 1);
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

/* Records and returns the timeout of a wait on c for epoch want that began at startNs: what it
 * waited for and what the peer has signalled, as the hang report names them (engConnSnapshot).
 * counted: mscclppConnWait's wait, which stays counted (else mscclppConnWaitNext's, undone). */
static __attribute__((noinline)) mscclppResult_t waitTimedOut(engConn* c, uint64_t want, uint64_t startNs, int counted)
{
  engConnStat s;
  engConnSnapshot(c, &s);
  uint64_t now = engNowNs();
  double waitedMs = startNs != 0 && now > startNs ? (double)(now - startNs) / 1e6 : 0;
  return (mscclppResult_t)errFail(
      &c->comm->err, mscclppInProgress,
      "%s: no signal after %.0f ms on connection %d to rank %d (%s, tag %d): rank %d waited for epoch %llu; rank %d "
      "has signalled epoch %llu (%s)",
      counted ? "mscclppConnWait" : "mscclppConnWaitNext", waitedMs, s.connId, s.peerRank, s.transport, s.tag,
      c->comm->rank, (unsigned long long)want, s.peerRank, (unsigned long long)s.signalled,
      counted ? "the wait stays counted: call mscclppConnWait to keep waiting"
              : "the wait is not counted: call the same wait again to keep waiting");
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
static mscclppResult_t waitFor(engConn* c, struct mscclppDevConn* conn, int64_t timeoutMs, int counted)
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
    __atomic_store_n(&c->waitRounds, __atomic_load_n(&c->waitRounds, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
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
      return waitTimedOut(c, want, w.start, counted);
    case ENG_WAIT_SLOW:
      if (__builtin_expect(c->comm->hangReportNs != 0, 0)) engHangCheck(c, want, w.start);
      /* the peer may signal (or queue a signal) and exit between the load above and this check: look again */
      if (engPeerGone(c->peerPid, c->peerPidfd)) {
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

int engConnDoCall(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                  uint64_t size)
{
  return engConnDo(c, type, dstHandle, dstOff, srcHandle, srcOff, size);
}
