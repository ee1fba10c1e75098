/*
 * conndo.h: the engine's one path for an operation on a connection
 * (engConnDo), which the proxy and the host calls (engine.c) share: the
 * transport's data part, then the signal whose value the engine picks under
 * the connection's signal lock, then the Sync part (transport.h, "Signals
 * belong to the engine"). Inline: it is on the host put + signal's path.
 */
#ifndef MSCCLPP_ENGINE_CONNDO_H_
#define MSCCLPP_ENGINE_CONNDO_H_

#include "backoff.h"
#include "bias.h"
#include "objects.h"

/* Sends c's next signal count: through putSignal with the put given (fused), else through
 * signal, both under c's signal lock; the count moves only when the transport took it. Then
 * wakes the peer's threads asleep on the epoch, when c has a sleeper count for it: the full
 * fence orders the count's store before the look at their number (engWaitFutex's Dekker). */
static inline __attribute__((always_inline)) int engSignal(engConn* c, int fused, uint64_t dstHandle, uint64_t dstOff,
                                                           uint64_t srcHandle, uint64_t srcOff, uint64_t size)
{
  int held = engBiasTake(&c->sigLock, &c->comm->waitCfg);
  uint64_t v = __atomic_load_n(&c->signalsDone, __ATOMIC_RELAXED) + 1;
  int rc = fused ? c->ops->putSignal(c, dstHandle, dstOff, srcHandle, srcOff, size, v) : c->ops->sendSignal(c, v);
  if (__builtin_expect(rc == mscclppSuccess, 1)) __atomic_store_n(&c->signalsDone, v, __ATOMIC_RELAXED);
  engBiasRelease(&c->sigLock, held);
  uint32_t* sleepers = c->remoteSleepers;
  if (sleepers != NULL) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0) engFutexWake(c->remoteProxyEpoch);
  }
  return rc;
}

/* One operation of type (Data, Flag, Sync, OR-ed) on c, as a trigger or a host call asks it:
 * without a Flag one call of the transport's op; with one, the data part, the signal, then the
 * Sync part (skipped where the transport's operations complete before they return). */
static inline __attribute__((always_inline)) int engConnDo(engConn* c, uint64_t type, uint64_t dstHandle,
                                                           uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                                                           uint64_t size)
{
  const engOps* ops = c->ops;
  if (!(type & mscclppFlag)) return ops->op(c, type, dstHandle, dstOff, srcHandle, srcOff, size);
  int rc = mscclppSuccess;
  int fused = (type & mscclppData) && size - 1 < ops->putSignalMax; /* 1..putSignalMax bytes */
  if ((type & mscclppData) && !fused) rc = ops->op(c, mscclppData, dstHandle, dstOff, srcHandle, srcOff, size);
  if (rc == mscclppSuccess) rc = engSignal(c, fused, dstHandle, dstOff, srcHandle, srcOff, size);
  if (rc == mscclppSuccess && (type & mscclppSync) && !ops->opsComplete) rc = ops->op(c, mscclppSync, 0, 0, 0, 0, 0);
  return rc;
}

#endif
