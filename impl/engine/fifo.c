/*
 * fifo.c: the host side of the trigger FIFO (include/mscclpp.h):
 * mscclppFifoPush and mscclppFifoWaitServed, the host-mode initiator of what a
 * kernel pushes in CUDA mode (include/mscclppfifo.h). In C for the same
 * reason as engine.c: a push and its wait are the two calls of a proxy round
 * trip, and nothing between them may call into Go.
 */
#include "backoff.h"
#include "engine.h"
#include "enter.h"

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
