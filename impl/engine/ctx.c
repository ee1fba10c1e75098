/*
 * ctx.c: proxy contexts: their allocation, the process-wide table of live
 * contexts, and how a host call enters a context and holds it against
 * engCtxClose (engine.h). Also the engOpsNo* defaults of transport.h and the
 * check of an ops table.
 */
#define _GNU_SOURCE
#include "engine.h"

#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backoff.h"

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
typedef struct engCtxSlot {
  engCtx* ctx;
  int64_t users; /* counting mode only */
  char pad[48];
} engCtxSlot;

static engCtxSlot ctxSlots[ENG_MAX_CTXS];
static int ctxSlotsUsed; /* slots [0, ctxSlotsUsed) were ever used */
static pthread_mutex_t ctxSlotsLock = PTHREAD_MUTEX_INITIALIZER;

/* One thread's record (membarrier mode): the context its current host call is inside. Records
 * are never freed; a thread that exits leaves its record to the next new thread. */
typedef struct engThread {
  const void* inside;
  int taken;
  struct engThread* next;
} engThread;

static engThread* threadList;
static int useMembarrier = -1; /* decided once, at the first context */
static pthread_key_t threadKey;
/* initial-exec: a plain %fs-relative load instead of a __tls_get_addr call on every host call
 * (the library is STATIC_TLS already: the Go runtime's own TLS is initial-exec) */
static __thread engThread* threadSelf __attribute__((tls_model("initial-exec")));

static void threadExit(void* rec)
{
  engThread* t = (engThread*)rec;
  __atomic_store_n(&t->inside, NULL, __ATOMIC_RELEASE);
  __atomic_store_n(&t->taken, 0, __ATOMIC_RELEASE);
}

static engThread* threadRecord(void)
{
  engThread* t = threadSelf;
  if (t != NULL) return t;
  for (t = __atomic_load_n(&threadList, __ATOMIC_ACQUIRE); t != NULL; t = t->next) {
    int free = 0;
    if (__atomic_compare_exchange_n(&t->taken, &free, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) break;
  }
  if (t == NULL) {
    t = (engThread*)calloc(1, sizeof(engThread));
    if (t == NULL) return NULL;
    t->taken = 1;
    pthread_mutex_lock(&ctxSlotsLock);
    t->next = threadList;
    __atomic_store_n(&threadList, t, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctxSlotsLock);
  }
  pthread_setspecific(threadKey, t);
  threadSelf = t;
  return t;
}

/* Chooses the mode before the first context exists (under ctxSlotsLock). */
static void chooseMode(void)
{
  if (useMembarrier >= 0) return;
  const char* env = getenv("MSCCLPP_MEMBARRIER"); /* "0": the counting mode (tests, odd sandboxes) */
  useMembarrier = !(env != NULL && strcmp(env, "0") == 0) &&
                  syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0 &&
                  pthread_key_create(&threadKey, threadExit) == 0;
}

static engCtx* findLive(const void* p)
{
  int n = __atomic_load_n(&ctxSlotsUsed, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (__atomic_load_n(&ctxSlots[i].ctx, __ATOMIC_RELAXED) == p) return (engCtx*)p;
  return NULL;
}

engCtx* engEnter(const void* p)
{
  if (p == NULL) return NULL;
  if (__atomic_load_n(&useMembarrier, __ATOMIC_ACQUIRE) == 1) {
    engThread* t = threadRecord();
    if (t == NULL) return NULL;
    __atomic_store_n(&t->inside, p, __ATOMIC_RELAXED);
    __asm__ __volatile__("" ::: "memory"); /* the closer's membarrier orders this store before its check */
    engCtx* ctx = findLive(p);
    if (ctx == NULL) __atomic_store_n(&t->inside, NULL, __ATOMIC_RELEASE);
    return ctx;
  }
  int n = __atomic_load_n(&ctxSlotsUsed, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) {
    engCtxSlot* s = &ctxSlots[i];
    if (__atomic_load_n(&s->ctx, __ATOMIC_RELAXED) != p) continue;
    __atomic_fetch_add(&s->users, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&s->ctx, __ATOMIC_SEQ_CST) == p) return (engCtx*)p;
    __atomic_fetch_sub(&s->users, 1, __ATOMIC_SEQ_CST);
    return NULL;
  }
  return NULL;
}

void engLeave(engCtx* ctx)
{
  if (ctx == NULL) return;
  if (useMembarrier == 1)
    __atomic_store_n(&threadSelf->inside, NULL, __ATOMIC_RELEASE);
  else
    __atomic_fetch_sub(&ctxSlots[ctx->slot].users, 1, __ATOMIC_RELEASE);
}

/* Whether a host call is inside ctx (after its table entry was cleared). */
static int callsInside(engCtx* ctx, engCtxSlot* s)
{
  if (useMembarrier != 1) return __atomic_load_n(&s->users, __ATOMIC_SEQ_CST) != 0;
  for (engThread* t = __atomic_load_n(&threadList, __ATOMIC_ACQUIRE); t != NULL; t = t->next)
    if (__atomic_load_n(&t->inside, __ATOMIC_ACQUIRE) == ctx) return 1;
  return 0;
}

static int ctxRegister(engCtx* ctx)
{
  pthread_mutex_lock(&ctxSlotsLock);
  chooseMode();
  int i = 0;
  while (i < ctxSlotsUsed && ctxSlots[i].ctx != NULL) i++;
  if (i == ENG_MAX_CTXS) {
    pthread_mutex_unlock(&ctxSlotsLock);
    return -1;
  }
  ctx->slot = i;
  __atomic_store_n(&ctxSlots[i].ctx, ctx, __ATOMIC_SEQ_CST);
  if (i == ctxSlotsUsed) __atomic_store_n(&ctxSlotsUsed, i + 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&ctxSlotsLock);
  return 0;
}

void engCtxClose(engCtx* ctx)
{
  if (ctx == NULL || ctx->slot < 0) return;
  engCtxSlot* s = &ctxSlots[ctx->slot];
  __atomic_store_n(&ctx->closing, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&ctxSlotsLock);
  __atomic_store_n(&s->ctx, NULL, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&ctxSlotsLock);
  if (useMembarrier == 1) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0);
  /* calls inside notice closing at their next clock check (well under a millisecond) */
  engBackoff b = {0, 0};
  engBackoffCfg cfg = {.spin = 64, .yields = 64, .sleepMaxUs = 1000};
  while (callsInside(ctx, s)) engBackoffStep(&b, &cfg);
  ctx->magic = 0;
  ctx->slot = -1;
  ctx->ops->close(ctx);
}

int engOpsNoThreadInit(struct engCtx* ctx)
{
  (void)ctx;
  return mscclppSuccess;
}

int engOpsNoPublishTail(struct engCtx* ctx, uint64_t tail)
{
  (void)ctx, (void)tail;
  return mscclppSuccess;
}

void engOpsNoClose(struct engCtx* ctx) { (void)ctx; }

int engOpsValid(const engOps* ops)
{
  return ops != NULL && ops->size == sizeof(engOps) && ops->name != NULL && ops->op != NULL &&
         ops->threadInit != NULL && ops->publishTail != NULL && ops->close != NULL;
}

int engCtxInit(engCtx* ctx, engComm* comm, const engOps* ops)
{
  memset(ctx, 0, sizeof(*ctx));
  ctx->slot = -1;
  if (!engOpsValid(ops)) {
    engFail(comm, mscclppInternalError, "a transport's ops table does not follow transport.h");
    return -1;
  }
  ctx->magic = ENG_CTX_MAGIC;
  ctx->comm = comm;
  ctx->ops = ops;
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
