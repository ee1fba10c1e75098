/*
 * ctx.c: communicators' and proxy contexts' allocation, the process-wide
 * table of live contexts, and how a host call enters a context and holds it
 * against engCtxClose (ctx.h).
 */
#define _GNU_SOURCE
#include "ctx.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backoff.h"

engComm* engCommNew(int rank, engBackoffCfg wait, engBackoffCfg proxy)
{
  engComm* c = (engComm*)calloc(1, sizeof(engComm));
  if (c == NULL) return NULL;
  errRecordInit(&c->err);
  c->rank = rank;
  c->streamAuto = 1;
  c->waitCfg = wait;
  c->proxyCfg = proxy;
  c->opTimeoutMs = -1;
  return c;
}

void engCommSetProxyBackoff(engComm* c, engBackoffCfg proxy)
{
  __atomic_store_n(&c->proxyCfg.spin, proxy.spin, __ATOMIC_RELAXED);
  __atomic_store_n(&c->proxyCfg.yields, proxy.yields, __ATOMIC_RELAXED);
  __atomic_store_n(&c->proxyCfg.sleepMaxUs, proxy.sleepMaxUs, __ATOMIC_RELAXED);
}

void engCommFree(engComm* c)
{
  if (c == NULL) return;
  errRecordDestroy(&c->err);
  free(c);
}

/* The table of live contexts (see engine.h), and how a host call holds a
 * context against engCtxClose. Where the kernel offers membarrier's private
 * expedited command, a call costs two plain stores: it records the context in
 * its thread's record, then checks the table; the closer clears the table
 * entry, runs membarrier (every thread of the process passes a full barrier)
 * and waits until no record names the context: either the caller saw the
 * entry gone, or the closer sees the caller inside (asymmetric Dekker, as in
 * liburcu). Elsewhere each slot counts its callers with locked atomics: the
 * count is raised before the entry is checked, and the closer clears the
 * entry before it reads the count. */
engCtxSlot engCtxSlots[ENG_MAX_CTXS];
int engCtxSlotsUsed; /* slots [0, engCtxSlotsUsed) were ever used */
static pthread_mutex_t ctxSlotsLock = PTHREAD_MUTEX_INITIALIZER;

static engThread* threadList;
int engUseMembarrier = -1; /* decided once, at the first context */
static int membarrierAllowed = 1; /* engSetMembarrier: 0 forces the counting mode */
static pthread_key_t threadKey;
__thread engThread* engThreadSelf __attribute__((tls_model("initial-exec")));
__thread const void* engCountingInside __attribute__((tls_model("initial-exec")));

const void* engThreadInside(void)
{
  if (__atomic_load_n(&engUseMembarrier, __ATOMIC_ACQUIRE) != 1) return engCountingInside;
  engThread* t = engThreadSelf;
  return t == NULL ? NULL : __atomic_load_n(&t->inside, __ATOMIC_RELAXED);
}

static void threadExit(void* rec)
{
  engThread* t = (engThread*)rec;
  __atomic_store_n(&t->inside, NULL, __ATOMIC_RELEASE);
  __atomic_store_n(&t->taken, 0, __ATOMIC_RELEASE);
}

void* engCallocLines(size_t size)
{
  size_t n = (size + 63) & ~(size_t)63;
  void* p = NULL;
  if (n == 0 || posix_memalign(&p, 64, n) != 0) return NULL;
  return memset(p, 0, n);
}

engThread* engThreadRecordNew(void)
{
  engThread* t;
  for (t = __atomic_load_n(&threadList, __ATOMIC_ACQUIRE); t != NULL; t = t->next) {
    int free = 0;
    if (__atomic_compare_exchange_n(&t->taken, &free, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) break;
  }
  if (t == NULL) {
    t = (engThread*)engCallocLines(sizeof(engThread));
    if (t == NULL) return NULL;
    t->taken = 1;
    pthread_mutex_lock(&ctxSlotsLock);
    t->next = threadList;
    __atomic_store_n(&threadList, t, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctxSlotsLock);
  }
  pthread_setspecific(threadKey, t);
  engThreadSelf = t;
  return t;
}

/* Chooses the mode before the first context exists (under ctxSlotsLock). */
static void chooseMode(void)
{
  if (engUseMembarrier >= 0) return;
  engUseMembarrier = membarrierAllowed &&
                  syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0 &&
                  pthread_key_create(&threadKey, threadExit) == 0;
}

engCtx* engEnterCounting(const void* p)
{
  int n = __atomic_load_n(&engCtxSlotsUsed, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) {
    engCtxSlot* s = &engCtxSlots[i];
    if (__atomic_load_n(&s->ctx, __ATOMIC_RELAXED) != p) continue;
    __atomic_fetch_add(&s->users, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&s->ctx, __ATOMIC_SEQ_CST) == p) {
      engCountingInside = p;
      return (engCtx*)p;
    }
    __atomic_fetch_sub(&s->users, 1, __ATOMIC_SEQ_CST);
    return NULL;
  }
  return NULL;
}

/* Whether a host call is inside ctx (after its table entry was cleared). */
static int callsInside(engCtx* ctx, engCtxSlot* s)
{
  if (engUseMembarrier != 1) return __atomic_load_n(&s->users, __ATOMIC_SEQ_CST) != 0;
  for (engThread* t = __atomic_load_n(&threadList, __ATOMIC_ACQUIRE); t != NULL; t = t->next)
    if (__atomic_load_n(&t->inside, __ATOMIC_ACQUIRE) == ctx) return 1;
  return 0;
}

void engSetMembarrier(int membarrier)
{
  pthread_mutex_lock(&ctxSlotsLock);
  membarrierAllowed = membarrier != 0;
  pthread_mutex_unlock(&ctxSlotsLock);
}

static int ctxRegister(engCtx* ctx)
{
  pthread_mutex_lock(&ctxSlotsLock);
  chooseMode();
  int i = 0;
  while (i < engCtxSlotsUsed && engCtxSlots[i].ctx != NULL) i++;
  if (i == ENG_MAX_CTXS) {
    pthread_mutex_unlock(&ctxSlotsLock);
    return -1;
  }
  ctx->slot = i;
  __atomic_store_n(&engCtxSlots[i].ctx, ctx, __ATOMIC_SEQ_CST);
  if (i == engCtxSlotsUsed) __atomic_store_n(&engCtxSlotsUsed, i + 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&ctxSlotsLock);
  return 0;
}

void engCtxMarkClosing(engCtx* ctx)
{
  if (ctx != NULL) __atomic_store_n(&ctx->closing, 1, __ATOMIC_SEQ_CST);
}

void engCtxAbandon(engCtx* ctx, int on)
{
  if (ctx != NULL) __atomic_store_n(&ctx->abandon, on, __ATOMIC_SEQ_CST);
}

void engCtxClose(engCtx* ctx)
{
  if (ctx == NULL || ctx->slot < 0) return;
  engCtxSlot* s = &engCtxSlots[ctx->slot];
  __atomic_store_n(&ctx->closing, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&ctxSlotsLock);
  __atomic_store_n(&s->ctx, NULL, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&ctxSlotsLock);
  if (engUseMembarrier == 1) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0);
  /* calls inside notice closing at their next clock check (well under a millisecond) */
  engBackoff b = {0, 0};
  engBackoffCfg cfg = {.spin = 64, .yields = 64, .sleepMaxUs = 1000};
  while (callsInside(ctx, s)) engBackoffStep(&b, &cfg);
  ctx->slot = -1;
  ctx->ops->close(ctx);
}

/* Whether the CPU runs PREFETCHW (a push's request for a line it will write, fifo.c) rather than
 * leaving its opcode undefined. */
static int cpuHasPrefetchW(void)
{
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8)) != 0; /* 3DNowPrefetch / PRFCHW */
#else
  return 1;
#endif
}

int engCtxInit(engCtx* ctx, engComm* comm, const engOps* ops)
{
  memset(ctx, 0, sizeof(*ctx));
  ctx->slot = -1;
  ctx->comm = comm;
  engOpsFill(&ctx->ownOps, ops);
  ctx->ops = &ctx->ownOps;
  ctx->syncsFree = ops->opsComplete;
  ctx->prefetchW = cpuHasPrefetchW();
  return ctxRegister(ctx);
}

engCtx* engCtxNewOps(engComm* comm, const engOps* ops, void* transport)
{
  engCtx* ctx = NULL;
  if (posix_memalign((void**)&ctx, 64, sizeof(engCtx)) != 0) return NULL;
  if (engCtxInit(ctx, comm, ops) != 0) {
    free(ctx);
    return NULL;
  }
  ctx->transport = transport;
  return ctx;
}

void engCtxFree(engCtx* ctx)
{
  if (ctx == NULL) return;
  engCtxClose(ctx);
  free(ctx);
}
