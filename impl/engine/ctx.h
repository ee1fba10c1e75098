/*
 * ctx.h: communicators' and proxy contexts' lifetimes, and the process-wide
 * table of live contexts through which every host call enters a context
 * (ctx.c says how a call holds one against engCtxClose).
 */
#ifndef MSCCLPP_ENGINE_CTX_H_
#define MSCCLPP_ENGINE_CTX_H_

#include "objects.h"

/* Live contexts. A host call on a mscclppDevConn first looks its FIFO pointer
 * up in a process-wide table of live contexts (engEnter), so a pointer that
 * is not a live context of this library is never dereferenced, and holds a
 * reference until engLeave; engCtxClose removes the context from the table
 * and waits until no call is inside it. The table is the one piece of global
 * state: an application's struct carries a pointer, and only a table can say
 * whether it is still valid. */
#define ENG_MAX_CTXS 256
/* The table and how a host call holds a context: engEnter and engLeave are inline, since
 * every host put and wait makes both. */
typedef struct engCtxSlot {
  engCtx* ctx;
  int64_t users; /* counting mode only */
  char pad[48];
} engCtxSlot;
/* One thread's record (membarrier mode): the context its current host call is inside. Records
 * are never freed; a thread that exits leaves its record to the next new thread. */
typedef struct engThread {
  const void* inside;
  int taken;
  struct engThread* next;
} engThread;
extern engCtxSlot engCtxSlots[ENG_MAX_CTXS];
extern int engCtxSlotsUsed;  /* slots [0, engCtxSlotsUsed) were ever used */
extern int engUseMembarrier; /* 1: membarrier mode; 0: counting mode; -1: no context made yet */
/* initial-exec: a plain %fs-relative load instead of a __tls_get_addr call on every host call
 * (the library is STATIC_TLS already: the Go runtime's own TLS is initial-exec) */
extern __thread engThread* engThreadSelf __attribute__((tls_model("initial-exec")));
engThread* engThreadRecordNew(void);       /* the calling thread's first record */
/* Counting mode: the context the calling thread's host call is inside, or NULL (for
 * engThreadInside; a plain store beside the locked count of engEnterCounting and engLeave). */
extern __thread const void* engCountingInside __attribute__((tls_model("initial-exec")));
/* The context the calling thread's host call is inside, or NULL: a destroy on that thread (from
 * a signal handler that interrupted the call) would wait for the call, i.e. for itself. */
const void* engThreadInside(void);
/* size bytes, zeroed, on cache lines of their own (64-aligned, rounded up to whole lines), or
 * NULL: for objects that one thread writes while others read their neighbours (a thread's
 * record, a connection's state), which calloc would pack into shared lines. free() releases it. */
void* engCallocLines(size_t size);
engCtx* engEnterCounting(const void* p);   /* engEnter in counting mode */

/* engEnter in membarrier mode for thread t, whose record exists (the caller checked both): the
 * live context at p (not NULL) held by t, or NULL, nothing held. It makes no call, so that a caller
 * whose other paths are all tail calls keeps no registers across one. */
static inline engCtx* engEnterRecorded(engThread* t, const void* p)
{
  __atomic_store_n(&t->inside, p, __ATOMIC_RELAXED);
  __asm__ __volatile__("" ::: "memory"); /* the closer's membarrier orders this store before its check */
  int n = __atomic_load_n(&engCtxSlotsUsed, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (__atomic_load_n(&engCtxSlots[i].ctx, __ATOMIC_RELAXED) == p) return (engCtx*)p;
  __atomic_store_n(&t->inside, NULL, __ATOMIC_RELEASE);
  return NULL;
}

/* The live context at p (a mscclppDevConn's fifo.triggerFifo) with a reference held, or NULL:
 * the caller records p in its thread's record, then looks for it in the table. */
static inline engCtx* engEnter(const void* p)
{
  if (p == NULL) return NULL;
  if (__builtin_expect(__atomic_load_n(&engUseMembarrier, __ATOMIC_ACQUIRE) != 1, 0)) return engEnterCounting(p);
  engThread* t = engThreadSelf;
  if (__builtin_expect(t == NULL, 0) && (t = engThreadRecordNew()) == NULL) return NULL;
  return engEnterRecorded(t, p);
}

/* engLeave of a context t entered with engEnterRecorded. */
static inline void engLeaveRecorded(engThread* t) { __atomic_store_n(&t->inside, NULL, __ATOMIC_RELEASE); }

static inline void engLeave(engCtx* ctx)
{
  if (ctx == NULL) return;
  if (engUseMembarrier == 1) {
    engLeaveRecorded(engThreadSelf);
  } else {
    engCountingInside = NULL;
    __atomic_fetch_sub(&engCtxSlots[ctx->slot].users, 1, __ATOMIC_RELEASE);
  }
}

/* How host calls hold contexts, for the whole process: membarrier 1 uses membarrier(2)'s
 * private expedited command where the kernel offers it, 0 the counting mode. Takes effect
 * only before the first context is made (the settings of the first communicator). */
void engSetMembarrier(int membarrier);
/* Marks ctx closing before its proxy stops (the destroy of its communicator): the transports'
 * sends in progress and host waits give up at once, so joining the proxy waits for no peer. */
void engCtxMarkClosing(engCtx* ctx);
/* Sets ctx->abandon (on: 1) or clears it: see engCtx. */
void engCtxAbandon(engCtx* ctx, int on);
/* Removes ctx from the live table and waits until no host call is inside it. Idempotent. */
void engCtxClose(engCtx* ctx);

/* Allocation and teardown (called from Go). A communicator's engine state with its
 * back-off knobs (the defaults are impl/config.go's). */
engComm* engCommNew(int rank, engBackoffCfg wait, engBackoffCfg proxy);
/* Sets the idle policy of c's proxy threads; running ones read each field as it changes. */
void engCommSetProxyBackoff(engComm* c, engBackoffCfg proxy);
void engCommFree(engComm* c);
/* A heap context for the transport ops with its per-context state. */
engCtx* engCtxNewOps(engComm* comm, const engOps* ops, void* transport);
void engCtxFree(engCtx* ctx); /* engCtxClose, then free */
/* Initialises a context in memory the caller allocated (e.g. pinned host memory) and
 * makes it live; engCtxClose before that memory is freed. Returns 0, or -1 when the
 * table of live contexts is full. */
int engCtxInit(engCtx* ctx, engComm* comm, const engOps* ops);

#endif
