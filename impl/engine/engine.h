/*
 * engine.h: the host data path of libmscclpp, in C because it is the hot
 * path: host-initiated ops (put, signal, flush, wait), the host side of the
 * trigger FIFO, and the proxy thread that serves FIFO triggers. None of it
 * calls into Go; Go builds these structs at connection setup and reads the
 * error slot.
 *
 * Object graph: engComm (one per communicator: error slot, back-off knobs)
 *   <- engCtx (one per proxy/transport context: the FIFO, head, tail, the
 *      connections it serves by connId, the proxy thread)
 *   <- engConn (one per connection: local and remote registrations, where a
 *      signal goes, the peer's pid).
 * A mscclppDevConn finds its engCtx from fifo.triggerFifo (the FIFO is
 * embedded in engCtx), so copies of a mscclppDevConn work too.
 */
#ifndef MSCCLPP_ENGINE_H_
#define MSCCLPP_ENGINE_H_

#include <pthread.h>
#include <stdint.h>

#include "errs.h" /* impl/status: the one home of error text */
#include "mscclpp.h"

/* Connections per context: every connId a trigger can carry (include/mscclppfifo.h). */
#define ENG_MAX_CONNS (1 << MSCCLPP_BITS_CONNID)
#define ENG_CTX_MAGIC 0x4d5343434c505043ull /* "MSCCLPPC" */
#define ENG_REG_MAGIC 0x4d5343434c505052ull /* "MSCCLPPR" */

/* Back-off knobs: spin with a pause, then sched_yield, then sleep doubling up to sleepMaxUs. */
typedef struct engBackoffCfg {
  uint32_t spin;       /* pause iterations before yielding */
  uint32_t yields;     /* sched_yield calls before sleeping */
  uint32_t sleepMaxUs; /* cap of the doubling sleep */
} engBackoffCfg;

/* Large puts into mapped memory (copy.c): per power-of-two size band from 1 MiB, the
 * best time per byte seen of each way (0 memcpy, 1 non-temporal stores) and the samples. */
#define ENG_COPY_BANDS 12
#define ENG_COPY_PROBES 3
typedef struct engCopyBand {
  uint64_t best[2]; /* picoseconds per byte, 0 before the first sample */
  uint32_t n[2];
} engCopyBand;

typedef struct engComm {
  errRecord err;          /* its first asynchronous and its last error (impl/status/errs.h) */
  engBackoffCfg waitCfg;  /* host waits and FIFO pushes */
  engBackoffCfg proxyCfg; /* the idle proxy */
  int rank;
  uint64_t streamBytes;    /* puts of [streamBytes, streamMaxBytes) bytes into mapped memory may bypass */
  uint64_t streamMaxBytes; /* the cache with this library's copy (streamBytes 0: never) */
  int streamAuto;          /* 1: there, the faster of memcpy and that copy, timed (copy.c); 0: always that copy */
  engCopyBand copyBands[ENG_COPY_BANDS];
  uint64_t eagerBytes;     /* SHM puts of up to this many bytes into unmapped memory go through the eager ring (0: never) */
  uint64_t hangReportNs;   /* a signal wait without progress this long reports the connections (report.c); 0: never */
  int hangReported;        /* set once the report was made: one per communicator */
  /* A remote failure is sticky per connection: connFailed[connId] is set (atomic) once a remote
   * error was recorded on that connection, and ends every wait on it; broken is set when the
   * communicator itself is lost (its bootstrap failed) and ends every wait. */
  volatile int broken;
  uint32_t nConnFailed; /* connections marked failed so far (atomic): a proxy rescans its own when it moves */
  uint8_t connFailed[ENG_MAX_CONNS];
} engComm;

/* Marks comm lost (broken: every wait ends), and whether connection connId is marked failed. */
static inline void engSetBroken(engComm* comm) { __atomic_store_n(&comm->broken, 1, __ATOMIC_RELEASE); }
static inline int engConnFailed(engComm* comm, int connId)
{
  return connId >= 0 && connId < ENG_MAX_CONNS && __atomic_load_n(&comm->connFailed[connId], __ATOMIC_ACQUIRE);
}
/* Marks connection connId of comm failed by a remote error (its waits end). */
static inline void engMarkConnFailed(engComm* comm, int connId)
{
  if (comm != NULL && connId >= 0 && connId < ENG_MAX_CONNS &&
      __atomic_exchange_n(&comm->connFailed[connId], 1, __ATOMIC_ACQ_REL) == 0)
    __atomic_fetch_add(&comm->nConnFailed, 1, __ATOMIC_RELEASE);
}

/* A registration as seen from this process. */
typedef struct engReg {
  uint64_t magic;  /* ENG_REG_MAGIC while valid */
  char* mapped;    /* directly addressable here (memcpy), or NULL */
  uint64_t addr;   /* address in the owner process (process_vm_writev) */
  uint64_t size;
  int pid;         /* owner process */
  uint32_t key;    /* the transport's remote key (IB rkey), or 0 */
} engReg;

#include "transport.h"

typedef struct engConn {
  int connId;
  int peerRank;
  int peerPid;
  int tag;
  struct mscclppDevConn* dev; /* the connection's entry in the array handed out */
  int nLocal;
  engReg* local;  /* my registrations, by handle */
  int nRemote;
  engReg* remote; /* the peer's registrations, by handle */
  volatile uint64_t* remoteProxyEpoch; /* the peer's localSignalEpochId->proxy for this connection */
  uint64_t signalsDone;                /* signals served on this connection: the value a signal sends */
  int signalLock; /* SHM without an eager ring: held while a signal counts and stores (shm.c) */
  volatile int peerClosed;  /* set by a transport when the peer's side of the connection is gone */
  uint32_t* localSleepers;  /* threads asleep (futex) on my epoch slot of this connection, or NULL */
  uint32_t* remoteSleepers; /* threads asleep on the peer's slot I signal, or NULL: wake them after a signal */
  int yieldFirst; /* a thread of this process (a transport's receive thread) delivers the signals a
                   * wait looks for and may share the waiter's CPU: waits yield from the start */
  int sleepFirst; /* with localSleepers: the delivering thread wakes sleepers, so waits sleep on the
                   * futex at once (no yield loop that keeps the CPU and its run queue busy) */
  struct engComm* comm;
  const engOps* ops;
  void* transport; /* the transport's own state: for CUDA P2P, its context's state */
  struct engCtx* ctx;
  /* Data the peer queued for this side that waits must land first (SHM's eager ring), or NULL:
   * land lands what is published (a count, or -1 when another thread is landing); landPending
   * says whether anything is published and not landed, so that a wait never sleeps over it. */
  int (*land)(struct engConn* c);
  int (*landPending)(struct engConn* c);
  /* A wait that may read the peer's frames itself instead of a receive thread (Ethernet host
   * mode), or NULL: reads, blocking, until *epoch reaches want, deadlineNs (absolute, engNowNs)
   * or a millisecond passed (the wait then looks at its conditions and calls again); returns 0
   * at once when another thread reads them or reading is over (the wait backs off as usual). */
  int (*readSelf)(struct engConn* c, volatile uint64_t* epoch, uint64_t want, uint64_t deadlineNs);
  /* For reports (report.c), relaxed: bytes this side put (host calls and proxy triggers), and
   * the epoch the last wait without progress waited for and since when (engNowNs). */
  uint64_t bytesPut;
  uint64_t stallWant, stallSince;
  /* Waits that the inline spin of mscclppConnWaitNext answered (tests read it). */
  uint64_t spinAnswered;
} engConn;

typedef struct engCtx {
  mscclppTrigger fifo[MSCCLPP_PROXY_FIFO_SIZE]; /* first: triggerFifo points here */
  uint64_t magic;
  uint64_t head __attribute__((aligned(64))); /* written by initiators */
  uint64_t tail __attribute__((aligned(64))); /* published by the proxy */
  engComm* comm;
  const engOps* ops;  /* threadInit / publishTail of this context's transport */
  void* transport;    /* the transport's own per-context state (e.g. CUDA context and stream) */
  uint64_t* devHead;  /* where initiators count pushes when not &head (device memory), or NULL */
  engConn* conns[ENG_MAX_CONNS];
  pthread_t thread;
  volatile int running;
  volatile int stop;
  volatile int closing; /* set by engCtxClose (or engCtxMarkClosing before the proxy stops): host calls
                         * still inside leave with InvalidUsage, a transport's send in progress gives up */
  volatile int abandon; /* mscclppProxyStop after a reported failure: sends give up instead of waiting */
  int slot;             /* index in the table of live contexts, or -1 */
  uint64_t served;      /* triggers served, for tests and stats */
  int failed;           /* set by the proxy thread (atomic): its published tail carries MSCCLPP_FIFO_TAIL_FAILED */
  int opFailed;         /* proxy thread only: an operation failed other than for a bad trigger */
  uint64_t refused;     /* set by the proxy thread (atomic): 1 + the sequence number of the last trigger it
                         * refused (bad arguments), 0 when none: its mscclppFifoWaitServed reports it */
  uint32_t failedSeen;  /* proxy thread only: engComm.nConnFailed when it last looked at its connections */
} engCtx;

/* Live contexts. A host call on a mscclppDevConn first looks its FIFO pointer
 * up in a process-wide table of live contexts (engEnter), so a pointer that
 * is not a live context of this library is never dereferenced, and holds a
 * reference until engLeave; engCtxClose removes the context from the table
 * and waits until no call is inside it. The table is the one piece of global
 * state: an application's struct carries a pointer, and only a table can say
 * whether it is still valid. */
#define ENG_MAX_CTXS 256
/* The table and how a host call holds a context (ctx.c says how): engEnter and engLeave are
 * inline, since every host put and wait makes both. */
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
engThread* engThreadRecordNew(void);       /* the calling thread's first record (ctx.c) */
engCtx* engEnterCounting(const void* p);   /* engEnter in counting mode (ctx.c) */

/* The live context at p (a mscclppDevConn's fifo.triggerFifo) with a reference held, or NULL:
 * the caller records p in its thread's record, then looks for it in the table. */
static inline engCtx* engEnter(const void* p)
{
  if (p == NULL) return NULL;
  if (__builtin_expect(__atomic_load_n(&engUseMembarrier, __ATOMIC_ACQUIRE) != 1, 0)) return engEnterCounting(p);
  engThread* t = engThreadSelf;
  if (__builtin_expect(t == NULL, 0) && (t = engThreadRecordNew()) == NULL) return NULL;
  __atomic_store_n(&t->inside, p, __ATOMIC_RELAXED);
  __asm__ __volatile__("" ::: "memory"); /* the closer's membarrier orders this store before its check */
  int n = __atomic_load_n(&engCtxSlotsUsed, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (__atomic_load_n(&engCtxSlots[i].ctx, __ATOMIC_RELAXED) == p) return (engCtx*)p;
  __atomic_store_n(&t->inside, NULL, __ATOMIC_RELEASE);
  return NULL;
}

static inline void engLeave(engCtx* ctx)
{
  if (ctx == NULL) return;
  if (engUseMembarrier == 1)
    __atomic_store_n(&engThreadSelf->inside, NULL, __ATOMIC_RELEASE);
  else
    __atomic_fetch_sub(&engCtxSlots[ctx->slot].users, 1, __ATOMIC_RELEASE);
}
/* Marks ctx closing before its proxy stops (the destroy of its communicator): the transports'
 * sends in progress and host waits give up at once, so joining the proxy waits for no peer. */
void engCtxMarkClosing(engCtx* ctx);
/* Sets ctx->abandon (on: 1) or clears it: see engCtx. */
void engCtxAbandon(engCtx* ctx, int on);
/* Removes ctx from the live table and waits until no host call is inside it. Idempotent. */
void engCtxClose(engCtx* ctx);

/* Allocation and teardown (called from Go). */
engComm* engCommNew(int rank);
void engCommFree(engComm* c);
/* A heap context for the transport ops (validated, see transport.h) with its per-context state. */
engCtx* engCtxNewOps(engComm* comm, const engOps* ops, void* transport);
void engCtxFree(engCtx* ctx); /* engCtxClose, then free */
/* Initialises a context in memory the caller allocated (e.g. pinned host memory) and
 * makes it live; engCtxClose before that memory is freed. Returns 0, or -1 when the
 * table of live contexts is full. */
int engCtxInit(engCtx* ctx, engComm* comm, const engOps* ops);
/* The one way the engine and the transports record an error: the formatted message
 * becomes comm's first asynchronous error (unless one is recorded already), its last
 * error and the process's (comm NULL: the process's only); evaluates to code:
 * `return engFail(comm, code, fmt, ...)`. */
#define engFail(comm, code, ...) errFailAsync(engErrRecord(comm), (code), __VA_ARGS__)
static inline errRecord* engErrRecord(engComm* c) { return c != NULL ? &c->err : NULL; }

int engProxyStart(engCtx* ctx);
/* Drains the FIFO, then stops and joins the proxy thread. */
void engProxyStop(engCtx* ctx);

/* engFail on connection c, the message prefixed with its id, peer and tag; returns code. A remote
 * error also marks the connection failed (engMarkConnFailed): sticky for it, not for the others. */
#define engConnFail(c, code, fmt, ...)                                                                           \
  (((code) == mscclppRemoteError ? engMarkConnFailed((c)->comm, (c)->connId) : (void)0),                        \
   engFail((c)->comm, (code), "connection %d (rank %d, tag %d): " fmt, (c)->connId, (c)->peerRank, (c)->tag, \
           ##__VA_ARGS__))
/* Checks a put's handles and ranges against the registrations; on success sets
 * *src and *dst, else records the failure (engConnFail) and returns its code. */
int engCheckPut(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff, uint64_t size,
                const engReg** src, const engReg** dst);
/* engCheckPut with the checks of a valid put inline (a put the checks refuse goes to engCheckPut,
 * which records why): for the transports' host data path. */
static inline int engCheckPutInline(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle,
                                    uint64_t srcOff, uint64_t size, const engReg** src, const engReg** dst)
{
  if (srcHandle != 0 && dstHandle != 0 && c->nLocal > 0 && c->nRemote > 0 && srcHandle < (uint64_t)c->nLocal &&
      dstHandle < (uint64_t)c->nRemote) {
    const engReg* s = &c->local[srcHandle];
    const engReg* d = &c->remote[dstHandle];
    if (srcOff <= s->size && size <= s->size - srcOff && dstOff <= d->size && size <= d->size - dstOff) {
      *src = s;
      *dst = d;
      return mscclppSuccess;
    }
  }
  return engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, src, dst);
}
/* 1 when pid no longer runs (gone, or a zombie nobody reaped yet). */
int engProcessGone(int pid);
/* Waits (backoff.h, comm's waitCfg; brief: a short spin and yield phase) until *seq reaches want,
 * published by process pid (asleep on a futex counted in *sleepers once the back-off would sleep):
 * ENG_SEQ_REACHED, or why not: timeoutMs passed, pid is gone, or comm recorded a remote error. */
enum { ENG_SEQ_REACHED = 0, ENG_SEQ_TIMEOUT = 1, ENG_SEQ_GONE = 2, ENG_SEQ_REMOTE = 3 };
int engWaitSeq(engComm* comm, volatile uint64_t* seq, uint64_t want, int pid, int64_t timeoutMs, uint32_t* sleepers,
               int brief);
/* Stores v into *seq and wakes the threads asleep on it (engWaitSeq) when *sleepers counts any. */
void engPublishSeq(volatile uint64_t* seq, uint64_t v, uint32_t* sleepers);
/* A signal wait on c for epoch want, begun at startNs (engNowNs), has not ended: when c's
 * communicator reports hangs and no progress was made for hangReportNs, reports once (report.c).
 * Called from a wait's slow checks only. */
void engHangCheck(engConn* c, uint64_t want, uint64_t startNs);
/* Counts size bytes put on c (relaxed: a statistic, no locked instruction on the data path). */
static inline void engCountPut(engConn* c, uint64_t size)
{
  __atomic_store_n(&c->bytesPut, __atomic_load_n(&c->bytesPut, __ATOMIC_RELAXED) + size, __ATOMIC_RELAXED);
}
/* Copies a put of [streamBytes, streamMaxBytes) bytes into mapped memory (copy.c). */
void engCopyLarge(engComm* comm, char* dst, const char* src, uint64_t size);
/* Whether a put of size bytes into mapped memory goes through engCopyLarge (comm may be NULL). */
static inline int engCopiesLarge(const engComm* comm, uint64_t size)
{
  return comm != NULL && comm->streamBytes != 0 && size >= comm->streamBytes && size < comm->streamMaxBytes;
}
/* The way engCopyLarge copies size bytes now: -1 while timing both, 0 memcpy, 1 streaming. */
int engCopyChoice(engComm* comm, uint64_t size);
/* Copies size bytes from src to the registration r at off (memcpy or process_vm_writev). */
int engWrite(engComm* comm, const engReg* r, uint64_t off, const void* src, uint64_t size, char* err, int errLen);

#endif
