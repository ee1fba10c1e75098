/*
 * shm.c: the SHM transport's ops tables (shm.h): a trigger's work, directly or
 * through the eager ring (ring.c). Runs on the proxy thread and on host
 * initiators' threads; never calls into Go.
 */
#include "shm.h"

#include <string.h>

#include "ring.h"

/* engWrite with a failure recorded on c. */
static __attribute__((noinline)) int shmWriteCall(engConn* c, const engReg* d, uint64_t dstOff, const char* src,
                                                  uint64_t size)
{
  char what[400];
  int rc = engWrite(c->comm, d, dstOff, src, size, what, sizeof(what));
  return rc == mscclppSuccess ? rc : engConnFail(c, rc, "%s", what);
}

/* A put straight into d (memcpy into mapped memory, else process_vm_writev); a failure is
 * recorded on c. A memcpy engWrite would make (no streaming copy for this size) is made here:
 * a small put is the host ping-pong's hot path, and the call to engWrite shows in its latency. */
static inline int shmWrite(engConn* c, const engReg* d, uint64_t dstOff, const char* src, uint64_t size)
{
  if (d->mapped != NULL && !engCopiesLarge(c->comm, size)) {
    char* dst = d->mapped + dstOff;
    if (size >= 8 && size <= 16) { /* two 8-byte moves (overlapping below 16): no call for a doorbell */
      uint64_t a, b;
      __builtin_memcpy(&a, src, 8);
      __builtin_memcpy(&b, src + size - 8, 8);
      __builtin_memcpy(dst, &a, 8);
      __builtin_memcpy(dst + size - 8, &b, 8);
    } else {
      memcpy(dst, src, size);
    }
    return mscclppSuccess;
  }
  return shmWriteCall(c, d, dstOff, src, size);
}

/* The Data part of a trigger on a connection with an eager ring: 1 when it queued the put and
 * the signal (flag) in the ring. */
static int shmRingData(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                       uint64_t size, int flag, int* rc)
{
  const engReg *s, *d;
  *rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &s, &d);
  if (*rc != mscclppSuccess || size == 0) return 0;
  if (shmEager(c, d, size)) {
    *rc = shmRingPut(c, dstHandle, dstOff, s->mapped + srcOff, size, flag);
    return 1;
  }
  /* a direct put must not overtake data queued before it (a later put to the same bytes wins) */
  if (shmRingBusy(c) && (*rc = shmRingDrain(c)) != mscclppSuccess) return 0;
  *rc = shmWrite(c, d, dstOff, s->mapped + srcOff, size);
  return 0;
}

/* shmOp on a connection with an eager ring to the peer (ring.h), or not set up yet (s NULL). */
static int shmRingOp(engConn* c, shmConn* s, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle,
                     uint64_t srcOff, uint64_t size)
{
  if (s == NULL) return engConnFail(c, mscclppInvalidUsage, "SHM operation before connection setup");
  if (type & mscclppData) {
    int rc;
    int queued = shmRingData(c, dstHandle, dstOff, srcHandle, srcOff, size, (type & mscclppFlag) != 0, &rc);
    if (rc != mscclppSuccess) return rc;
    if (queued) type &= ~(uint64_t)mscclppFlag; /* the signal went with the data */
  }
  if (type & mscclppFlag) {
    if (c->remoteProxyEpoch == NULL) return engConnFail(c, mscclppInvalidUsage, "signal before connection setup");
    return shmRingSignal(c); /* behind data still queued, if any */
  }
  return mscclppSuccess;
}

/* Signals on a connection without an eager ring: only this process's threads write the peer's
 * epoch, so a lock of the connection's orders them, and a signal is a plain store of the count.
 * A locked instruction between a put's data and its signal would wait until the data's line
 * has crossed to this CPU before the signal's line could start to (one more cross-CPU trip per
 * put); a small put takes the lock before its copy instead, so that its data and its signal
 * leave together, as in a raw memcpy + flag. The lock is biased to the thread that signals
 * (bias.h): a locked instruction there, after the wait that returned, would wait for the load
 * of the data that just arrived before the put could start. The peer sees the count only after
 * the data: x86 keeps stores in order, and the release store says so elsewhere. */
#define SHM_COPY_LOCKED 4096 /* puts of up to this many bytes into mapped memory copy under the lock */

/* Takes the lock: how it is held, for sigPublishUnlock or engBiasRelease. */
static inline int sigLock(engConn* c, shmConn* s) { return engBiasTake(&s->sig, &c->comm->waitCfg); }

/* Sends the next count (the lock held as held), releases the lock, then wakes the peer's
 * sleepers: the full fence orders the count's store before the look at their number
 * (engWaitFutex's Dekker). */
static inline void sigPublishUnlock(engConn* c, shmConn* s, int held)
{
  uint64_t v = __atomic_load_n(&c->signalsDone, __ATOMIC_RELAXED) + 1;
  __atomic_store_n(&c->signalsDone, v, __ATOMIC_RELAXED);
  __atomic_store_n(c->remoteProxyEpoch, v, __ATOMIC_RELEASE);
  engBiasRelease(&s->sig, held);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  shmWake(c->remoteProxyEpoch, c->remoteSleepers);
}

int shmOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
          uint64_t size)
{
  shmConn* s = (shmConn*)c->transport;
  if (__builtin_expect(s == NULL || s->out.hdr != NULL, 0))
    return shmRingOp(c, s, type, dstHandle, dstOff, srcHandle, srcOff, size);
  int flag = (type & mscclppFlag) != 0 && c->remoteProxyEpoch != NULL;
  int locked = 0, held = ENG_BIAS_HELD_WORD;
  if (type & mscclppData) {
    const engReg *src, *d;
    int rc = engCheckPutInline(c, dstHandle, dstOff, srcHandle, srcOff, size, &src, &d);
    if (rc == mscclppSuccess && size > 0) {
      if (flag && size <= SHM_COPY_LOCKED && d->mapped != NULL) held = sigLock(c, s), locked = 1;
      rc = shmWrite(c, d, dstOff, src->mapped + srcOff, size);
    }
    if (rc != mscclppSuccess) {
      if (locked) engBiasRelease(&s->sig, held);
      return rc;
    }
  }
  if (type & mscclppFlag) {
    if (c->remoteProxyEpoch == NULL) return engConnFail(c, mscclppInvalidUsage, "signal before connection setup");
    if (!locked) held = sigLock(c, s);
    sigPublishUnlock(c, s, held);
  }
  /* Sync: every operation above completed before returning; nothing is left to flush. */
  return mscclppSuccess;
}

const engOps shmOps = {
    .name = "SHM",
    .op = shmOp,
    .waitPoll = engOpsNoWaitPoll,
    .waitPending = engOpsNoWaitPending,
    .waitStyle = ENG_WAIT_SPIN,
    .opsComplete = 1,
    .threadInit = engOpsNoThreadInit,
    .publishTail = engOpsNoPublishTail,
    .close = engOpsNoClose,
};

/* A connection whose peer queues into this side's eager ring: its waits land what is queued
 * (ring.c), from their first look, and never sleep over it. */
const engOps shmLandOps = {
    .name = "SHM",
    .op = shmOp,
    .waitPoll = shmLandPoll,
    .waitPending = shmLandPending,
    .waitStyle = ENG_WAIT_POLL,
    .opsComplete = 1,
    .threadInit = engOpsNoThreadInit,
    .publishTail = engOpsNoPublishTail,
    .close = engOpsNoClose,
};

