/*
 * proxy.c: the proxy thread: pops triggers from its context's FIFO and
 * performs them through their transport's ops table. In C because it is the
 * one hot loop and must never call into Go. An idle host-mode proxy spins,
 * yields, then sleeps on a doorbell that host pushes ring (idle), so that it
 * does not starve an oversubscribed machine; a proxy whose FIFO head lives in
 * device memory (CUDA mode) busy-polls, as upstream does: its initiators are
 * GPU threads, which cannot wake a sleeper, and any sleep is added to the
 * next trigger's latency. Pops up to ENG_PROXY_BATCH ready triggers at a
 * time. Publishes its tail every MSCCLPP_PROXY_FIFO_FLUSH_COUNTER pops and
 * whenever no trigger is ready (after a Sync alone, or at the end of a
 * batch), never later.
 *
 * A slot is ready when word 0 is non-zero and the type field of word 1 is
 * non-zero: a GPU's 16-byte store may become visible to the host as two
 * 8-byte writes, word 0 first. A slot whose type stays zero for
 * ENG_TYPELESS_NS is reported (a trigger pushed with type 0) and dropped.
 *
 * Errors reach the initiators: once the communicator records an asynchronous
 * error (a failed operation here, a lost peer seen by a transport's own thread)
 * every tail this proxy publishes carries MSCCLPP_FIFO_TAIL_FAILED, which the
 * device methods poll beside their condition, so no kernel spins on a FIFO or
 * an epoch that will never move. A failed operation's slot is emptied only
 * after that tail is visible, so its sync never reads as served. A stopped
 * CUDA-mode proxy serves nothing either: the tail it publishes as it stops
 * carries the bit too (the next start publishes the real one before
 * engProxyStart returns).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "backoff.h"
#include "engine.h"

#define ENG_TYPELESS_NS 1000000000ull

/* One idle step: a pause while GPU threads may push (they cannot wake a sleeper); else the
 * proxy back-off's spin and yield phases, then sleep until a push or a stop wakes it (at most
 * sleepMaxUs, then it looks again). The doorbell: this side marks itself asleep, then reads
 * head; a push claims (a locked instruction on head), then reads the mark; both are sequentially
 * consistent, so either the push sees the mark and wakes it, or this side sees the claim and
 * does not sleep (and the futex refuses to sleep once head moved). A claim whose slot is not
 * written yet, or a stop, is met with a yield instead (engProxyStop rings until the thread ends:
 * a stop does not move head). */
static void idle(engCtx* ctx, engBackoff* b, uint64_t tail)
{
  if (ctx->devHead != NULL) {
    engPause();
    return;
  }
  const engBackoffCfg* cfg = &ctx->comm->proxyCfg;
  if (b->n < cfg->spin + cfg->yields) {
    engBackoffStep(b, cfg);
    return;
  }
  __atomic_store_n(&ctx->proxyAsleep, 1, __ATOMIC_SEQ_CST);
  uint64_t h = __atomic_load_n(&ctx->head, __ATOMIC_SEQ_CST);
  if (h == tail && !__atomic_load_n(&ctx->stop, __ATOMIC_SEQ_CST))
    engFutexWaitPrivate(&ctx->head, h, cfg->sleepMaxUs);
  else
    sched_yield();
  __atomic_store_n(&ctx->proxyAsleep, 0, __ATOMIC_RELAXED);
}

static void publish(engCtx* ctx, uint64_t tail)
{
  __atomic_store_n(&ctx->tail, tail, __ATOMIC_RELEASE);
  int rc = ctx->ops->publishTail(ctx, ctx->failed ? tail | MSCCLPP_FIFO_TAIL_FAILED : tail);
  if (rc != mscclppSuccess) engFail(ctx->comm, rc, "proxy: publishing the FIFO tail failed");
}

/* Whether a connection this proxy serves was marked failed since it last looked. */
static int connsFailed(engCtx* ctx)
{
  uint32_t n = __atomic_load_n(&ctx->comm->nConnFailed, __ATOMIC_ACQUIRE);
  if (n == ctx->failedSeen) return 0;
  ctx->failedSeen = n;
  for (int i = 0; i < ENG_MAX_CONNS; i++)
    if (__atomic_load_n(&ctx->conns[i], __ATOMIC_RELAXED) != NULL && engConnFailed(ctx->comm, i)) return 1;
  return 0;
}

/* Once this proxy's work cannot be done (the communicator lost, a connection it serves failed, an
 * operation of its own failed other than for a bad trigger): publishes the failed tail (visible
 * when publishTail returns) and keeps it so. Returns whether it failed. A bad trigger is the
 * caller's error, reported asynchronously; the proxy goes on serving the good ones. */
static int failedNow(engCtx* ctx, uint64_t tail)
{
  if (ctx->failed) return 1;
  if (!ctx->opFailed && !__atomic_load_n(&ctx->comm->broken, __ATOMIC_ACQUIRE) && !connsFailed(ctx)) return 0;
  __atomic_store_n(&ctx->failed, 1, __ATOMIC_RELEASE);
  publish(ctx, tail);
  return 1;
}

/* Whether every pushed trigger was served: known only where the head is host memory. */
static int drained(engCtx* ctx, uint64_t tail)
{
  return ctx->devHead != NULL || __atomic_load_n(&ctx->head, __ATOMIC_ACQUIRE) <= tail;
}

/* Performs the trigger (v0, v1) popped at sequence number seq; type is non-zero, or the trigger
 * was reported typeless and is dropped. A failure is recorded on the communicator (here or by
 * the transport). */
static inline void serve(engCtx* ctx, uint64_t seq, uint64_t v0, uint64_t v1)
{
  uint64_t type = MSCCLPP_TRIGGER_TYPE(v1);
  if (type == 0) return; /* reported by the caller */
  uint64_t size = MSCCLPP_TRIGGER_SIZE(v0), srcOff = MSCCLPP_TRIGGER_SRC_OFFSET(v0);
  uint64_t dstOff = MSCCLPP_TRIGGER_DST_OFFSET(v1);
  uint64_t connId = MSCCLPP_TRIGGER_CONNID(v1);
  engConn* c = ctx->conns[connId];
  if (c == NULL) {
    engFail(ctx->comm, mscclppInvalidUsage, "proxy: trigger for unknown connection %llu", (unsigned long long)connId);
    return;
  }
  /* a Sync alone where every connection's operations complete before they return: nothing to do */
  if (type == mscclppSync && __atomic_load_n(&ctx->syncsFree, __ATOMIC_RELAXED)) return;
  /* a Flag or Sync trigger carries size 1 only to mark the slot: it moves no data */
  int rc = engConnDo(c, type, 1, dstOff, 1, srcOff, (type & mscclppData) ? size : 0);
  if (rc == mscclppSuccess && (type & mscclppData)) engCountPut(c, size);
  if (rc == mscclppInvalidArgument) __atomic_store_n(&ctx->refused, seq + 1, __ATOMIC_RELEASE);
  else if (rc != mscclppSuccess) ctx->opFailed = 1;
}

/* Triggers popped in one batch: the slots of a batch are read one after another before any is
 * served, so that the reads of their lines (which the initiators have just written) overlap
 * instead of each waiting for the one before it. Lines beyond the ready slots are not
 * prefetched: a line read before its initiator writes it must be taken back from this CPU by
 * that write, which costs the initiator a cross-CPU trip. */
#define ENG_PROXY_BATCH 16

static void* proxyMain(void* arg)
{
  engCtx* ctx = (engCtx*)arg;
  int rc = ctx->ops->threadInit(ctx);
  if (rc != mscclppSuccess) engFail(ctx->comm, rc, "proxy: thread initialisation failed");
  uint64_t tail = __atomic_load_n(&ctx->tail, __ATOMIC_RELAXED);
  /* started again after a stop: the stopped tail is replaced before kernels may push */
  if (ctx->stopTailFailed && rc == mscclppSuccess) publish(ctx, tail);
  ctx->stopTailFailed = 0;
  __atomic_store_n(&ctx->live, 1, __ATOMIC_RELEASE);
  engBackoff b = {0, 0};
  uint64_t typelessSince = 0; /* when the slot at tail was first seen with word 0 but no type */
  uint64_t w0[ENG_PROXY_BATCH], w1[ENG_PROXY_BATCH];
  for (;;) {
    /* Failures found elsewhere are looked for at every look at the FIFO, before its slots are read:
     * a failure recorded before a batch is read is published before any of its slots empties, and
     * the check is not on the path from a trigger's arrival to its slot's emptying. */
    int failed = failedNow(ctx, tail);
    /* the ready slots from tail on: word 0 set, and the type of word 1 visible */
    int n = 0;
    for (; n < ENG_PROXY_BATCH; n++) {
      mscclppTrigger* slot = &ctx->fifo[(tail + n) % MSCCLPP_PROXY_FIFO_SIZE];
      if ((w0[n] = __atomic_load_n(&slot->value[0], __ATOMIC_ACQUIRE)) == 0) break;
      if (MSCCLPP_TRIGGER_TYPE(w1[n] = __atomic_load_n(&slot->value[1], __ATOMIC_ACQUIRE)) == 0) break;
    }
    if (n == 0) {
      if (w0[0] == 0) {
        if (!failed && __atomic_load_n(&ctx->tail, __ATOMIC_RELAXED) != tail) publish(ctx, tail);
        if (__atomic_load_n(&ctx->stop, __ATOMIC_ACQUIRE) && drained(ctx, tail)) break;
        idle(ctx, &b, tail);
        continue;
      }
      /* word 1 is not visible yet: wait for it, but not forever */
      __atomic_store_n(&ctx->typelessSeen, ctx->typelessSeen + 1, __ATOMIC_RELEASE);
      uint64_t now = engNowNs();
      if (typelessSince == 0) typelessSince = now;
      if (now - typelessSince < ENG_TYPELESS_NS) {
        idle(ctx, &b, tail);
        continue;
      }
      engFail(ctx->comm, mscclppInvalidUsage, "proxy: trigger %llu has no type (pushed with type 0?); dropped",
              (unsigned long long)tail);
      n = 1; /* served as dropped */
    }
    typelessSince = 0;
    b.n = 0; /* idle never reaches the back-off's sleeping phase (it sleeps on the doorbell) */
    for (int i = 0; i < n; i++) {
      mscclppTrigger* slot = &ctx->fifo[tail % MSCCLPP_PROXY_FIFO_SIZE];
      serve(ctx, tail, w0[i], w1[i]);
      /* a trigger that failed here must not read as served: its failed tail goes first */
      if (__builtin_expect(ctx->opFailed && !ctx->failed, 0)) failedNow(ctx, tail);
      __atomic_store_n(&slot->value[1], 0, __ATOMIC_RELAXED);
      __atomic_store_n(&slot->value[0], 0, __ATOMIC_RELEASE);
      tail++;
      if (tail % MSCCLPP_PROXY_FIFO_FLUSH_COUNTER == 0) publish(ctx, tail);
    }
    /* this thread is the only writer: a plain add, no locked instruction */
    __atomic_store_n(&ctx->served, __atomic_load_n(&ctx->served, __ATOMIC_RELAXED) + (uint64_t)n, __ATOMIC_RELAXED);
    /* a Sync's tail (and any other) is published now unless more triggers are ready */
    if (__atomic_load_n(&ctx->fifo[tail % MSCCLPP_PROXY_FIFO_SIZE].value[0], __ATOMIC_ACQUIRE) == 0 &&
        __atomic_load_n(&ctx->tail, __ATOMIC_RELAXED) != tail)
      publish(ctx, tail);
  }
  /* nothing serves a CUDA-mode FIFO from here on: a kernel still pushing or waiting must return */
  if (ctx->devHead != NULL && !ctx->failed) {
    int st = ctx->ops->publishTail(ctx, tail | MSCCLPP_FIFO_TAIL_FAILED);
    if (st != mscclppSuccess) engFail(ctx->comm, st, "proxy: publishing the stopped FIFO tail failed");
    ctx->stopTailFailed = 1;
  } else {
    publish(ctx, tail);
  }
  return NULL;
}

int engProxyStart(engCtx* ctx)
{
  if (ctx->running) return mscclppInvalidUsage;
  ctx->stop = 0;
  ctx->live = 0;
  if (pthread_create(&ctx->thread, NULL, proxyMain, ctx) != 0) return mscclppSystemError;
  ctx->running = 1;
  /* until the thread serves (its setup done, a stopped tail replaced): a kernel launched after
   * mscclppProxyLaunch returns must not find the tail of the last stop */
  while (!__atomic_load_n(&ctx->live, __ATOMIC_ACQUIRE)) {
    struct timespec pause = {0, 20000};
    nanosleep(&pause, NULL);
  }
  return mscclppSuccess;
}

void engProxyStop(engCtx* ctx)
{
  if (!ctx->running) return;
  __atomic_store_n(&ctx->stop, 1, __ATOMIC_SEQ_CST);
  /* the doorbell again every millisecond until the thread ends: a stop does not move head, so a
   * wake that lands just before the proxy's sleep would otherwise wait for its next look */
  for (;;) {
    if (__atomic_load_n(&ctx->proxyAsleep, __ATOMIC_SEQ_CST)) engFutexWakePrivate(&ctx->head);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 1000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    if (pthread_timedjoin_np(ctx->thread, NULL, &until) != ETIMEDOUT) break;
  }
  ctx->running = 0;
}
