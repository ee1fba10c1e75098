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

/* A host FIFO call's hold on its context: the thread record it entered through, or NULL where
 * it entered the general way (ctxEnter; no record, counting mode, a forked child). */
typedef struct fifoHeld {
  engCtx* ctx;
  engThread* t;
} fifoHeld;

/* The common entry into the host-mode context behind fifo (membarrier mode, the thread's record
 * made, no fork, a live host-mode context): the record's store and a look in the live table, no
 * call. ctx NULL, nothing held, where it does not apply. */
static inline __attribute__((always_inline)) fifoHeld fifoEnterCommon(struct mscclppConcurrentFifo* fifo)
{
  engThread* t = engThreadSelf;
  int common = !errForkedChild & (fifo != NULL) & (t != NULL) & (__atomic_load_n(&engUseMembarrier, __ATOMIC_ACQUIRE) == 1);
  if (__builtin_expect(common, 1) && fifo->triggerFifo != NULL) {
    engCtx* ctx = engEnterRecorded(t, fifo->triggerFifo);
    if (__builtin_expect(ctx != NULL && ctx->devHead == NULL, 1)) return (fifoHeld){ctx, t};
    if (ctx != NULL) engLeaveRecorded(t);
  }
  return (fifoHeld){NULL, NULL};
}

/* Enters the host-mode context behind fifo: the one entry of mscclppFifoPush and
 * mscclppFifoWaitServed. The common case is fifoEnterCommon; anything else, a context that is
 * not live included, goes through ctxEnter, which says what is wrong. ctx NULL: refused, the
 * process-wide last error set. */
static inline __attribute__((always_inline)) fifoHeld fifoEnter(struct mscclppConcurrentFifo* fifo, const char* fn)
{
  fifoHeld held = fifoEnterCommon(fifo);
  if (__builtin_expect(held.ctx != NULL, 1)) return held;
  return (fifoHeld){ctxEnter(fifo, fn, "fifo is NULL", 1), NULL};
}

static inline void fifoLeave(fifoHeld held)
{
  if (held.t != NULL)
    engLeaveRecorded(held.t);
  else
    engLeave(held.ctx);
}

/* The rule of a slot (proxy.c reads it the same way): a slot is empty when its word 0 is 0. */
static inline int slotEmpty(const mscclppTrigger* slot) { return __atomic_load_n(&slot->value[0], __ATOMIC_ACQUIRE) == 0; }

/* A push's refusal once its context is entered: leaves it and records why (out of line, so that
 * the common push keeps its registers). */
static __attribute__((noinline, cold)) uint64_t pushRefuse(fifoHeld held, const char* why)
{
  fifoLeave(held);
  engFail(NULL, mscclppInvalidUsage, "mscclppFifoPush: %s", why);
  return MSCCLPP_FIFO_PUSH_FAILED;
}

/* Slots a push that found the FIFO full waits to see free beyond its own (< MSCCLPP_PROXY_FIFO_SIZE). */
#define ENG_PUSH_ROOM (MSCCLPP_PROXY_FIFO_SIZE / 4)

/* Where a push at head h found the FIFO full by the tail an initiator saw last (out of line:
 * the common push never comes here): reads the shared tail, and where that is full too waits
 * until ENG_PUSH_ROOM more slots are free, so that the pushes that follow fill lines the proxy
 * has left instead of the one it reads next, and the tail is read once per such batch. It waits
 * before its claim, so that giving up leaves no claimed slot that nobody fills: it gives up when
 * no proxy runs (nobody would free a slot), when the context is closing (mscclppCommDestroy
 * waits for every call inside) and at the communicator's operation timeout. NULL once there is
 * room (tailSeen updated), else why not. */
static __attribute__((noinline)) const char* pushWaitRoom(engCtx* ctx, uint64_t h)
{
  uint64_t seen = __atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE);
  if (h >= MSCCLPP_PROXY_FIFO_SIZE + seen) {
    engWait w;
    engWaitInit(&w, ctx->comm->opTimeoutMs);
    while (h + ENG_PUSH_ROOM >= MSCCLPP_PROXY_FIFO_SIZE + (seen = __atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE))) {
      int st = engWaitStep(&w, &ctx->comm->waitCfg);
      if (st == ENG_WAIT_GO) continue;
      if (!__atomic_load_n(&ctx->running, __ATOMIC_ACQUIRE))
        return "the FIFO is full and no proxy is running (call mscclppProxyLaunch)";
      if (__atomic_load_n(&ctx->closing, __ATOMIC_ACQUIRE))
        return "communicator destroyed while the push waited for room in the FIFO";
      if (st == ENG_WAIT_TIMEOUT) return "the FIFO stayed full for the communicator's timeout (its proxy served nothing)";
    }
  }
  __atomic_store_n(&ctx->tailSeen, seen, __ATOMIC_RELEASE);
  return NULL;
}

/* Slots per cache line, and how far ahead of its claim a push that starts a line in a burst (a
 * push after a push, ctx->pushRun) asks for the line ENG_PUSH_AHEAD slots on, for writing: that
 * line was emptied by the proxy, which holds it, and a push's locked claim waits until the stores
 * before it are done, so the first store into each line would otherwise wait for the line to come
 * from the proxy's CPU on every fourth push. Only a line that tailSeen says is empty (served) is
 * asked for: the proxy touches it no more until it is filled. A push followed by its wait (a
 * round trip) asks for nothing: there the request only delays the slot's own line. */
#define ENG_SLOTS_PER_LINE (64 / (int)sizeof(mscclppTrigger))
#define ENG_PUSH_AHEAD ENG_SLOTS_PER_LINE

static inline void pushPrefetch(const void* p)
{
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("prefetchw %0" ::"m"(*(const char*)p)); /* only where engCtx.prefetchW says so */
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

/* Rings the doorbell of a sleeping proxy for the push of h, then leaves (out of line: a
 * syscall). */
static __attribute__((noinline)) uint64_t pushRing(fifoHeld held, uint64_t h)
{
  engFutexWakePrivate(&held.ctx->head);
  fifoLeave(held);
  return h;
}

/* The end of a push that claimed h: the slot's two words (word 0 last, release), the doorbell of
 * a sleeping proxy (proxy.c, idle; read after the claim, which orders it), then the context is
 * left. */
static inline __attribute__((always_inline)) uint64_t pushFill(fifoHeld held, uint64_t h, uint64_t w0, uint64_t w1, int ahead)
{
  engCtx* ctx = held.ctx;
  mscclppTrigger* slot = &ctx->fifo[h % MSCCLPP_PROXY_FIFO_SIZE];
  __atomic_store_n(&slot->value[1], w1, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->value[0], w0, __ATOMIC_RELEASE);
  if (ahead) pushPrefetch(&ctx->fifo[(h + ENG_PUSH_AHEAD) % MSCCLPP_PROXY_FIFO_SIZE]);
  if (!__atomic_load_n(&ctx->pushRun, __ATOMIC_RELAXED)) __atomic_store_n(&ctx->pushRun, 1, __ATOMIC_RELAXED);
  if (__builtin_expect(__atomic_load_n(&ctx->proxyAsleep, __ATOMIC_SEQ_CST), 0)) return pushRing(held, h);
  fifoLeave(held);
  return h;
}

/* A push that found no room by tailSeen for its claim at h (out of line, so that the common push
 * makes no call): waits for room (pushWaitRoom), claims, fills. */
static __attribute__((noinline)) uint64_t pushAfterWait(fifoHeld held, uint64_t h, uint64_t w0, uint64_t w1)
{
  engCtx* ctx = held.ctx;
  do {
    const char* why;
    if (h >= MSCCLPP_PROXY_FIFO_SIZE + __atomic_load_n(&ctx->tailSeen, __ATOMIC_ACQUIRE) && (why = pushWaitRoom(ctx, h)) != NULL)
      return pushRefuse(held, why);
  } while (!__atomic_compare_exchange_n(&ctx->head, &h, h + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
  return pushFill(held, h, w0, w1, 0);
}

/* The checks of a push once its context is entered, then the claim and the slot: the body of
 * mscclppFifoPush, on the common entry and on the general one (pushEnterSlow). Every step off
 * the common case is a tail call, so that the common push saves no register. */
static inline __attribute__((always_inline)) uint64_t pushEntered(fifoHeld held, struct mscclppConcurrentFifo* fifo,
                                                                  uint64_t type, uint64_t dstDataOffset,
                                                                  uint64_t srcDataOffset, uint64_t dataSize)
{
  engCtx* ctx = held.ctx;
  if (__builtin_expect((type & (mscclppData | mscclppFlag | mscclppSync)) == 0 || (type >> MSCCLPP_BITS_TYPE) != 0, 0))
    return pushRefuse(held, "type must be a non-empty OR of mscclppData, mscclppFlag and mscclppSync");
  /* a trigger is served on its connection: refuse one whose connection is not set up yet */
  int connId = fifo->connId;
  if (__builtin_expect(connId < 0 || connId >= ENG_MAX_CONNS || __atomic_load_n(&ctx->conns[connId], __ATOMIC_ACQUIRE) == NULL, 0))
    return pushRefuse(held, "connection not set up: call mscclppConnectionSetup first");
  if (__builtin_expect(MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize) == 0, 0)) {
    /* an empty put: it would read as an empty slot, so push it as a marker that moves no data
     * (a Data-only one as a Sync: a trigger needs a type), as the device push does */
    type &= ~(uint64_t)mscclppData;
    if (type == 0) type = mscclppSync;
    dataSize = 1;
  }
  uint64_t w0 = MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize), w1 = MSCCLPP_TRIGGER_WORD1(type, connId, dstDataOffset);
  uint64_t h = __atomic_load_n(&ctx->head, __ATOMIC_RELAXED), seen;
  do {
    if (__builtin_expect(h >= MSCCLPP_PROXY_FIFO_SIZE + (seen = __atomic_load_n(&ctx->tailSeen, __ATOMIC_ACQUIRE)), 0))
      return pushAfterWait(held, h, w0, w1);
  } while (!__atomic_compare_exchange_n(&ctx->head, &h, h + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
  int ahead = h % ENG_SLOTS_PER_LINE == 0 && ctx->prefetchW && __atomic_load_n(&ctx->pushRun, __ATOMIC_RELAXED) &&
              h + ENG_PUSH_AHEAD + ENG_SLOTS_PER_LINE - 1 < MSCCLPP_PROXY_FIFO_SIZE + seen;
  return pushFill(held, h, w0, w1, ahead);
}

/* mscclppFifoPush entered the general way (ctxEnter: no thread record yet, counting mode, a
 * forked child, a context that is not live), out of line. */
static __attribute__((noinline)) uint64_t pushEnterSlow(struct mscclppConcurrentFifo* fifo, uint64_t type,
                                                        uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize)
{
  fifoHeld held = {ctxEnter(fifo, "mscclppFifoPush", "fifo is NULL", 1), NULL};
  if (held.ctx == NULL) return MSCCLPP_FIFO_PUSH_FAILED;
  return pushEntered(held, fifo, type, dstDataOffset, srcDataOffset, dataSize);
}

/* The one push. Its checks, in order, each once: the context (fifoEnter), the type, the
 * connection; an empty put becomes a marker; then the claim and the slot. The common case (a
 * valid trigger, room by the tail an initiator saw last) takes no call: every other step is out
 * of line, reached by a tail call.
 *
 * Room for claim h: the claim MSCCLPP_PROXY_FIFO_SIZE before it, on the same slot, must have
 * been served (tail past it), else two claims could fill the slot at once. The proxy empties a
 * slot before its tail moves past it, so a tail read with acquire also says the slot is empty
 * and orders this push after the emptying: the push writes the slot without reading it (a read
 * would fetch the proxy's line once more before the write could take it). tailSeen never runs
 * ahead of the proxy's tail (a tail once read; a racing initiator may store an older one, which
 * is only more cautious), and its release store and acquire load carry that order from the
 * initiator that read the tail; only when it shows no room is the shared tail read. A claim is
 * made only where there is room: a push never waits holding a claim. */
uint64_t mscclppFifoPush(struct mscclppConcurrentFifo* fifo, uint64_t type, uint64_t dstDataOffset,
                         uint64_t srcDataOffset, uint64_t dataSize)
{
  fifoHeld held = fifoEnterCommon(fifo);
  if (__builtin_expect(held.ctx != NULL, 1)) return pushEntered(held, fifo, type, dstDataOffset, srcDataOffset, dataSize);
  return pushEnterSlow(fifo, type, dstDataOffset, srcDataOffset, dataSize);
}

/* How many polls of the slot a mscclppFifoWaitServed makes, each after a pause, before its
 * bounded wait (waitServedSlow) takes over: a Sync is usually served within them. Never more
 * than the wait's spin setting (MSCCLPP_WAIT_SPIN 0: no polls before the wait). */
#define ENG_SERVED_POLLS 32

/* Whether a served trigger seq may not have been done: refused (bad arguments) or served by a
 * proxy that failed meanwhile (both are recorded before the slot empties). */
static inline int servedUndone(engCtx* ctx, uint64_t seq)
{
  return __atomic_load_n(&ctx->failed, __ATOMIC_ACQUIRE) || __atomic_load_n(&ctx->refused, __ATOMIC_ACQUIRE) == seq + 1;
}

/* The rest of a mscclppFifoWaitServed once its first polls found seq not served (out of line,
 * so that a wait served at once keeps a small frame): the bounded wait, and the communicator's
 * error when the trigger may not have been done. Leaves the context. */
static __attribute__((noinline)) int waitServedSlow(fifoHeld held, mscclppTrigger* slot, uint64_t seq)
{
  const char* fn = "mscclppFifoWaitServed";
  engCtx* ctx = held.ctx;
  engWait w;
  engWaitInit(&w, -1);
  int rc = mscclppSuccess;
  /* Served: the slot emptied, or the tail past seq (a later push may have refilled the slot). The
   * polls read the slot alone, and the tail only at the wait's checks: the proxy stores its tail
   * on every publish, and a tail read on every poll would take its line back each time and
   * delay this thread's next look at the slot. */
  while (!slotEmpty(slot)) {
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
  char why[512];
  int async = rc == mscclppSuccess && servedUndone(ctx, seq) ? errAsync(&ctx->comm->err, why, (int)sizeof(why)) : 0;
  if (async != 0) rc = errFail(NULL, async, "%s: the communicator failed: %s", fn, why);
  fifoLeave(held);
  return rc;
}

/* The one wait: its checks (the context, seq) once, then the first polls inline (the slot alone,
 * no clock, no checks: waitServedSlow says why), then the bounded wait out of line. */
int mscclppFifoWaitServed(struct mscclppConcurrentFifo* fifo, uint64_t seq)
{
  const char* fn = "mscclppFifoWaitServed";
  fifoHeld held = fifoEnter(fifo, fn);
  engCtx* ctx = held.ctx;
  if (__builtin_expect(ctx == NULL, 0)) return mscclppInvalidUsage;
  if (__builtin_expect(seq == MSCCLPP_FIFO_PUSH_FAILED || seq >= __atomic_load_n(&ctx->head, __ATOMIC_ACQUIRE), 0)) {
    fifoLeave(held);
    engFail(NULL, mscclppInvalidUsage, "%s: seq is not the result of a successful push on this FIFO", fn);
    return mscclppInvalidArgument;
  }
  if (__atomic_load_n(&ctx->pushRun, __ATOMIC_RELAXED)) __atomic_store_n(&ctx->pushRun, 0, __ATOMIC_RELAXED);
  mscclppTrigger* slot = &ctx->fifo[seq % MSCCLPP_PROXY_FIFO_SIZE];
  uint32_t polls = ctx->comm->waitCfg.spin < ENG_SERVED_POLLS ? ctx->comm->waitCfg.spin : ENG_SERVED_POLLS;
  for (uint32_t i = 0; i < polls; i++) {
    if (slotEmpty(slot)) {
      if (__builtin_expect(servedUndone(ctx, seq), 0)) break; /* served, but maybe not done: waitServedSlow says why */
      fifoLeave(held);
      return mscclppSuccess;
    }
    engPause();
  }
  return waitServedSlow(held, slot, seq);
}
