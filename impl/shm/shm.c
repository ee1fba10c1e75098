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

/* A put on a connection with an eager ring to the peer (ring.h), with the signal value to send
 * after it (0: none): queued in the ring with its signal, or direct behind the entries queued. */
static int shmRingData(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                       uint64_t size, uint64_t value)
{
  const engReg *s, *d;
  int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &s, &d);
  if (rc != mscclppSuccess) return rc;
  if (size > 0 && shmEager(c, d, size)) return shmRingPut(c, dstHandle, dstOff, s->mapped + srcOff, size, value);
  /* a direct put must not overtake data queued before it (a later put to the same bytes wins) */
  if (size > 0 && shmRingBusy(c) && (rc = shmRingDrain(c)) != mscclppSuccess) return rc;
  if (size > 0 && (rc = shmWrite(c, d, dstOff, s->mapped + srcOff, size)) != mscclppSuccess) return rc;
  return value != 0 ? shmRingSignal(c, value) : mscclppSuccess;
}

/* Whether c is set up, and how: 1 with an eager ring to the peer, 0 without, -1 not set up (recorded). */
static inline int shmKind(engConn* c)
{
  shmConn* s = (shmConn*)c->transport;
  if (__builtin_expect(s != NULL && s->out.hdr == NULL, 1)) return 0;
  if (s == NULL) return engConnFail(c, mscclppInvalidUsage, "SHM operation before connection setup"), -1;
  return 1;
}

/* The data part: Data, or Sync (every operation completed before it returned: nothing to flush). */
static int shmOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                 uint64_t size)
{
  int kind = shmKind(c);
  if (kind < 0) return mscclppInvalidUsage;
  if (!(type & mscclppData)) return mscclppSuccess;
  if (kind == 1) return shmRingData(c, dstHandle, dstOff, srcHandle, srcOff, size, 0);
  const engReg *src, *d;
  int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &src, &d);
  if (rc == mscclppSuccess && size > 0) rc = shmWrite(c, d, dstOff, src->mapped + srcOff, size);
  return rc;
}

/* The signal (under the engine's signal lock): only this process's threads write the peer's
 * epoch, and the lock orders them, so a signal is a plain store of the count; x86 keeps stores in
 * order, so the peer sees it after the data (the release store says so elsewhere). */
static int shmSignal(engConn* c, uint64_t value)
{
  int kind = shmKind(c);
  if (kind < 0) return mscclppInvalidUsage;
  if (c->remoteProxyEpoch == NULL) return engConnFail(c, mscclppInvalidUsage, "signal before connection setup");
  if (kind == 1) return shmRingSignal(c, value); /* behind data still queued, if any */
  __atomic_store_n(c->remoteProxyEpoch, value, __ATOMIC_RELEASE);
  return mscclppSuccess;
}

/* A small put and its signal under one acquisition of the signal lock (SHM_COPY_LOCKED): a
 * locked instruction between a put's data and its signal would wait until the data's line has
 * crossed to this CPU before the signal's line could start to (one more cross-CPU trip per put);
 * with the lock taken before the copy, the data and the signal leave together, as in a raw
 * memcpy + flag. The lock is biased to the thread that signals (bias.h): a locked instruction
 * there, after the wait that returned, would wait for the load of the data that just arrived. */
static int shmPutSignal(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                        uint64_t size, uint64_t value)
{
  int kind = shmKind(c);
  if (kind < 0) return mscclppInvalidUsage;
  if (c->remoteProxyEpoch == NULL) return engConnFail(c, mscclppInvalidUsage, "signal before connection setup");
  if (kind == 1) return shmRingData(c, dstHandle, dstOff, srcHandle, srcOff, size, value);
  const engReg *src, *d;
  int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &src, &d);
  if (rc == mscclppSuccess) rc = shmWrite(c, d, dstOff, src->mapped + srcOff, size);
  if (rc == mscclppSuccess) __atomic_store_n(c->remoteProxyEpoch, value, __ATOMIC_RELEASE);
  return rc;
}

#define SHM_COPY_LOCKED 4096 /* puts of up to this many bytes go with their signal under the lock */

const engOps shmOps = {
    .name = "SHM",
    .op = shmOp,
    .sendSignal = shmSignal,
    .putSignal = shmPutSignal,
    .putSignalMax = SHM_COPY_LOCKED,
    .opsComplete = 1,
};

/* A connection whose peer queues into this side's eager ring: its waits land what is queued
 * (ring.c), from their first look, and never sleep over it. */
const engOps shmLandOps = {
    .name = "SHM",
    .op = shmOp,
    .sendSignal = shmSignal,
    .putSignal = shmPutSignal,
    .putSignalMax = SHM_COPY_LOCKED,
    .waitPoll = shmLandPoll,
    .waitPending = shmLandPending,
    .waitStyle = ENG_WAIT_POLL,
    .opsComplete = 1,
};
