/*
 * ring.c: the SHM eager ring (ring.h): the sender's queueing (shmRingPut,
 * shmRingDrain) on host initiators' and the proxy's threads, and the
 * receiver's landing (shmInLand) in its waits and its lander thread. Never
 * calls into Go.
 */
#include "ring.h"

#include <string.h>

/* ---- sending ---- */

/* One step of a sender's wait for the receiver to land up to position need: wakes the
 * receiver's sleeping waits (they land) and fails when waiting cannot help. */
static int outWaitStep(engConn* c, int st, const char* what)
{
  shmWake(c->remoteProxyEpoch, c->remoteSleepers);
  if (st == ENG_WAIT_SLOW && engPeerGone(c->peerPid, c->peerPidfd))
    return engConnFail(c, mscclppRemoteError, "rank %d (pid %d) exited while %s", c->peerRank, c->peerPid, what);
  if (__atomic_load_n(&((shmConn*)c->transport)->out.hdr->closed, __ATOMIC_ACQUIRE))
    return engConnFail(c, mscclppRemoteError, "rank %d destroyed its communicator while %s", c->peerRank, what);
  if (__atomic_load_n(&c->peerClosed, __ATOMIC_ACQUIRE))
    return engConnFail(c, mscclppRemoteError, "rank %d closed its connection while %s", c->peerRank, what);
  if (__atomic_load_n(&c->ctx->closing, __ATOMIC_ACQUIRE))
    return engConnFail(c, mscclppInvalidUsage, "communicator destroyed while %s", what);
  return mscclppSuccess;
}

/* Waits until the receiver has landed every position before need. */
static int outWaitTail(engConn* c, shmOut* o, uint64_t need, const char* what)
{
  engWait w;
  engWaitInit(&w, -1);
  while ((int64_t)(__atomic_load_n(&o->hdr->tail, __ATOMIC_ACQUIRE) - need) < 0) {
    int st = engWaitStep(&w, &c->comm->waitCfg);
    if (st == ENG_WAIT_GO) continue;
    int rc = outWaitStep(c, st, what);
    if (rc != mscclppSuccess) return rc;
  }
  return mscclppSuccess;
}

/* Copies n bytes into the ring's slots from byte at (modulo the ring), wrapping at its end. */
static void ringCopyIn(shmOut* o, uint64_t at, const char* src, uint64_t n)
{
  uint64_t bytes = (uint64_t)o->nslots * SHM_SLOT;
  at &= bytes - 1;
  uint64_t first = n < bytes - at ? n : bytes - at;
  memcpy(o->slots + at, src, first);
  if (n > first) memcpy(o->slots, src + first, n - first);
}

static void outLock(shmOut* o)
{
  engBackoff b = {0, 0};
  static const engBackoffCfg cfg = {.spin = 256, .yields = 1000000, .sleepMaxUs = 50};
  while (__atomic_exchange_n(&o->lock, 1, __ATOMIC_ACQUIRE)) engBackoffStep(&b, &cfg);
}

static void outUnlock(shmOut* o) { __atomic_store_n(&o->lock, 0, __ATOMIC_RELEASE); }

/* Queues one entry, with signal the count to publish once it landed (0: none); o is locked. The
 * engine gives signals in order under its signal lock, and they are queued in the order of
 * positions, so the receiver's epoch never announces a signal before the entries ahead of it. */
static int outPut(engConn* c, shmOut* o, uint64_t handle, uint64_t off, const char* src, uint64_t size, uint64_t signal)
{
  uint64_t k = shmEntrySlots(size);
  uint64_t pos = __atomic_load_n(&o->hdr->head, __ATOMIC_RELAXED); /* senders hold the lock */
  if ((int64_t)(pos + k - o->tailSeen) > (int64_t)o->nslots) {
    o->tailSeen = __atomic_load_n(&o->hdr->tail, __ATOMIC_ACQUIRE);
    if ((int64_t)(pos + k - o->tailSeen) > (int64_t)o->nslots) {
      int rc = outWaitTail(c, o, pos + k - o->nslots, "a put waited for room in its eager ring");
      if (rc != mscclppSuccess) return rc;
      o->tailSeen = __atomic_load_n(&o->hdr->tail, __ATOMIC_ACQUIRE);
    }
  }
  __atomic_store_n(&o->hdr->head, pos + k, __ATOMIC_RELEASE);
  uint64_t at = (pos & (o->nslots - 1)) * SHM_SLOT;
  shmEntry* e = (shmEntry*)(o->slots + at);
  e->off = off;
  e->handle = (uint32_t)handle;
  e->size = (uint32_t)size;
  if (size > 0) ringCopyIn(o, at + SHM_ENTRY_HDR, src, size);
  e->signal = signal;
  /* sequentially consistent, as the receiver's sleeper count and its look at the ring
   * (engWaitFutex's pending): either it sees this entry or this side sees it asleep */
  __atomic_store_n(&e->seq, pos + 1, __ATOMIC_SEQ_CST);
  if (signal != 0) shmWake(c->remoteProxyEpoch, c->remoteSleepers);
  return mscclppSuccess;
}

int shmRingPut(engConn* c, uint64_t handle, uint64_t off, const char* src, uint64_t size, uint64_t signal)
{
  shmOut* o = &((shmConn*)c->transport)->out;
  outLock(o);
  int rc = outPut(c, o, handle, off, src, size, signal);
  outUnlock(o);
  return rc;
}

/* The signal: queued behind the entries not landed yet, else stored into the peer's epoch
 * directly; the max keeps the epoch monotonic against the receiver landing an earlier queued
 * signal at the same time. */
int shmRingSignal(engConn* c, uint64_t value)
{
  shmOut* o = &((shmConn*)c->transport)->out;
  int rc = mscclppSuccess;
  outLock(o);
  if (shmRingBusy(c))
    rc = outPut(c, o, 0, 0, NULL, 0, value);
  else
    shmRaise(c->remoteProxyEpoch, value, c->remoteSleepers);
  outUnlock(o);
  return rc;
}

int shmRingDrain(engConn* c)
{
  shmOut* o = &((shmConn*)c->transport)->out;
  return outWaitTail(c, o, __atomic_load_n(&o->hdr->head, __ATOMIC_ACQUIRE),
                     "a put waited for the peer to land its eager ring");
}

/* ---- receiving ---- */

/* Copies n bytes out of the ring's slots from byte at (modulo the ring), wrapping at its end. */
static void ringCopyOut(const shmIn* in, uint64_t at, char* dst, uint64_t n)
{
  uint64_t bytes = (uint64_t)in->nslots * SHM_SLOT;
  at &= bytes - 1;
  uint64_t first = n < bytes - at ? n : bytes - at;
  memcpy(dst, in->slots + at, first);
  if (n > first) memcpy(dst + first, in->slots, n - first);
}

/* Lands the entry at in->tail, which is published: 0, or -1 when it is malformed (recorded). */
static int inLandOne(shmIn* in, volatile shmEntry* e)
{
  uint64_t off = e->off, sig = e->signal;
  uint32_t h = e->handle, size = e->size;
  const engReg* r = (h > 0 && h < (uint32_t)in->nLocal) ? &in->local[h] : NULL;
  if (size > in->maxBytes || (size > 0 && (r == NULL || off > r->size || size > r->size - off))) {
    __atomic_store_n(&in->failed, 1, __ATOMIC_RELAXED);
    engConnFail(in, mscclppRemoteError,
                "the peer queued %u bytes for handle %u at offset %llu, outside this rank's registrations (%d "
                "handles): nothing more it queues is landed",
                size, h, (unsigned long long)off, in->nLocal);
    return -1;
  }
  uint64_t at = (in->tail & (in->nslots - 1)) * SHM_SLOT;
  if (size > 0) ringCopyOut(in, at + SHM_ENTRY_HDR, r->mapped + off, size);
  uint64_t tail = in->tail + shmEntrySlots(size);
  __atomic_store_n(&in->tail, tail, __ATOMIC_RELAXED); /* read by shmLandPending without the lock */
  if (sig != 0) shmRaise(in->epoch, sig, in->sleepers); /* the signal count, after its data */
  __atomic_store_n(&in->hdr->tail, tail, __ATOMIC_RELEASE);
  return 0;
}

static inline volatile shmEntry* inHead(const shmIn* in, uint64_t pos)
{
  return (volatile shmEntry*)(in->slots + (pos & (in->nslots - 1)) * SHM_SLOT);
}

static inline int inPublished(const shmIn* in)
{
  uint64_t pos = __atomic_load_n(&in->tail, __ATOMIC_RELAXED);
  return __atomic_load_n(&inHead(in, pos)->seq, __ATOMIC_SEQ_CST) == pos + 1;
}

int shmInLand(shmIn* in)
{
  if (__atomic_load_n(&in->failed, __ATOMIC_RELAXED) || !inPublished(in)) return 0;
  if (__atomic_exchange_n(&in->lock, 1, __ATOMIC_ACQUIRE)) return -1;
  int n = 0;
  while (!in->failed) {
    volatile shmEntry* e = inHead(in, in->tail);
    if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != in->tail + 1) break;
    int signalled = e->signal != 0;
    if (inLandOne(in, e) != 0) break;
    n++;
    /* a signal may be what a wait waits for: let it look before reading the next slot, a line
     * the sender wrote last (a cache miss on the way to the wait's return) */
    if (signalled) break;
  }
  __atomic_store_n(&in->lock, 0, __ATOMIC_RELEASE);
  return n;
}

int shmLandPoll(engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w)
{
  (void)epoch, (void)want, (void)w; /* landing never blocks */
  return shmInLand(((shmConn*)c->transport)->in) > 0 ? ENG_POLL_MOVED : ENG_POLL_IDLE;
}

int shmLandPending(engConn* c)
{
  shmIn* in = ((shmConn*)c->transport)->in;
  return !__atomic_load_n(&in->failed, __ATOMIC_RELAXED) && inPublished(in);
}
