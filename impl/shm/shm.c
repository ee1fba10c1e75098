/*
 * shm.c: the SHM transport's ops table (shm.h). Runs on the proxy thread and
 * on host initiators' threads; never calls into Go.
 */
#include "shm.h"

#include "ring.h"

/* A put straight into d (memcpy into mapped memory, else process_vm_writev); a failure is
 * recorded on c. */
static inline int shmWrite(engConn* c, const engReg* d, uint64_t dstOff, const char* src, uint64_t size)
{
  char what[400];
  int rc = engWrite(c->comm, d, dstOff, src, size, what, sizeof(what));
  return rc == mscclppSuccess ? rc : engConnFail(c, rc, "%s", what);
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

/* shmOp on a connection with an eager ring (ring.h). */
static int shmRingOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle,
                     uint64_t srcOff, uint64_t size)
{
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

void shmSignal(engConn* c)
{
  /* Send the number of signals completed on this connection, not the device
   * epoch: a Flag the proxy serves late must not announce signals whose
   * triggers (and data) are still queued behind it. Each signal increments
   * the epoch once and sends one Flag, so the two agree once all are served.
   * The acq_rel count orders every counted signal's data before the value;
   * the max keeps the peer's epoch monotonic when signallers race. */
  uint64_t v = __atomic_add_fetch(&c->signalsDone, 1, __ATOMIC_ACQ_REL);
  shmRaise(c->remoteProxyEpoch, v, c->remoteSleepers);
}

int shmOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
          uint64_t size)
{
  if (__builtin_expect(shmHasRing(c), 0)) return shmRingOp(c, type, dstHandle, dstOff, srcHandle, srcOff, size);
  if (type & mscclppData) {
    const engReg *s, *d;
    int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &s, &d);
    if (rc == mscclppSuccess && size > 0) rc = shmWrite(c, d, dstOff, s->mapped + srcOff, size);
    if (rc != mscclppSuccess) return rc;
  }
  if (type & mscclppFlag) {
    if (c->remoteProxyEpoch == NULL) return engConnFail(c, mscclppInvalidUsage, "signal before connection setup");
    shmSignal(c);
  }
  /* Sync: every operation above completed before returning; nothing is left to flush. */
  return mscclppSuccess;
}

const engOps shmOps = {
    .size = sizeof(engOps),
    .name = "SHM",
    .op = shmOp,
    .threadInit = engOpsNoThreadInit,
    .publishTail = engOpsNoPublishTail,
    .close = engOpsNoClose,
};

