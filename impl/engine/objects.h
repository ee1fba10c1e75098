/*
 * objects.h: the engine's object graph, the types every engine file and
 * every transport's C shares (engine.h includes it for them):
 *   engComm (one per communicator: error slot, back-off knobs)
 *   <- engCtx (one per proxy/transport context: the FIFO, head, tail, the
 *      connections it serves by connId, the proxy thread)
 *   <- engConn (one per connection: local and remote registrations, where a
 *      signal goes, the peer's pid, its ops table and its transport's state).
 * A mscclppDevConn finds its engCtx from fifo.triggerFifo (the FIFO is
 * embedded in engCtx), so copies of a mscclppDevConn work too. Also the one
 * way the engine and the transports record an error (engFail, engConnFail).
 */
#ifndef MSCCLPP_ENGINE_OBJECTS_H_
#define MSCCLPP_ENGINE_OBJECTS_H_

#include <pthread.h>
#include <stdint.h>

#include "../status/errs.h" /* impl/status: the one home of error text */
#include "../../include/mscclpp.h"
#include "transport.h"

/* Connections per context: every connId a trigger can carry (include/mscclppfifo.h). */
#define ENG_MAX_CONNS (1 << MSCCLPP_BITS_CONNID)
#define ENG_REG_MAGIC 0x4d5343434c505052ull /* "MSCCLPPR" */

/* Back-off knobs: spin with a pause, then sched_yield, then sleep doubling up to sleepMaxUs. */
typedef struct engBackoffCfg {
  uint32_t spin;       /* pause iterations before yielding */
  uint32_t yields;     /* sched_yield calls before sleeping */
  uint32_t sleepMaxUs; /* cap of the doubling sleep */
} engBackoffCfg;

/* Large puts into mapped memory (copy.c): per power-of-two size band from 1 MiB, the
 * best time per byte seen of each way (0 memcpy, 1 non-temporal stores), the samples, and
 * the puts since the choice was made (every ENG_COPY_RECHECK-th times the other way again). */
#define ENG_COPY_BANDS 12
#define ENG_COPY_PROBES 3
#define ENG_COPY_RECHECK 64
typedef struct engCopyBand {
  uint64_t best[2]; /* picoseconds per byte, 0 before the first sample */
  uint32_t n[2];
  uint32_t chosen;  /* puts copied the chosen way since the probes ended */
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
  int64_t opTimeoutMs;     /* a push waiting for room in a full FIFO gives up after this long (< 0: never) */
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

/* A lock biased to the first thread that takes it (bias.h has its functions): a connection's
 * signal lock. */
typedef struct engBiasLock {
  const struct engThread* owner; /* the thread the lock is biased to, or one of bias.h's ENG_BIAS_* */
  int busy;          /* the owner is inside (its plain stores) */
  int word;          /* the lock word (exchange) once the bias is revoked */
} engBiasLock;

/* A registration as seen from this process. */
typedef struct engReg {
  uint64_t magic;  /* ENG_REG_MAGIC while valid */
  char* mapped;    /* directly addressable here (memcpy), or NULL */
  uint64_t addr;   /* address in the owner process (process_vm_writev) */
  uint64_t size;
  int pid;         /* owner process */
  int pidfd;       /* a pidfd of that very process (process_vm_writev checks it first), or 0 */
  uint64_t pidfdChecked; /* engNowNs when a poll of pidfd last found the process running (relaxed) */
  uint32_t key;    /* the transport's remote key of the registration, or 0 */
} engReg;

typedef struct engConn {
  int connId;
  int peerRank;
  int peerPid;
  int peerPidfd; /* a pidfd of that very process, or 0: a pid reused after it exited is not it */
  int tag;
  struct mscclppDevConn* dev; /* the connection's entry in the array handed out */
  int nLocal;
  engReg* local;  /* my registrations, by handle */
  int nRemote;
  engReg* remote; /* the peer's registrations, by handle */
  volatile uint64_t* remoteProxyEpoch; /* the peer's localSignalEpochId->proxy for this connection */
  /* Signals sent on this connection, the last value sent (conndo.h): read and written under sigLock. */
  uint64_t signalsDone;
  engBiasLock sigLock; /* held while the engine picks a signal's value and the transport sends it */
  volatile int peerClosed;  /* set by a transport when the peer's side of the connection is gone */
  uint32_t* localSleepers;  /* threads asleep (futex) on my epoch slot of this connection, or NULL */
  uint32_t* remoteSleepers; /* threads asleep on the peer's slot I signal, or NULL: wake them after a signal */
  struct engComm* comm;
  const engOps* ops; /* its context's table, or ownOps: one its transport chose for it (transport.h) */
  engOps ownOps;     /* engConnSetOps' table, filled (engOpsFill) */
  void* transport;   /* the transport's own state, which only the transport reads (its context's by default) */
  struct engCtx* ctx;
  /* For reports (report.c), relaxed: bytes this side put (host calls and proxy triggers), and
   * the epoch the last wait without progress waited for and since when (engNowNs). */
  uint64_t bytesPut;
  uint64_t stallWant, stallSince;
  /* Waits that the inline spin of mscclppConnWaitNext answered, and the rounds the waits on it
   * went through after that (a look at the epoch after a poll or a back-off step; tests read
   * them). */
  uint64_t spinAnswered;
  uint64_t waitRounds;
} engConn;

typedef struct engCtx {
  mscclppTrigger fifo[MSCCLPP_PROXY_FIFO_SIZE]; /* first: triggerFifo points here */
  uint64_t head __attribute__((aligned(64))); /* written by initiators */
  /* A tail some initiator read (release store, acquire load: it also says the slots below it
   * are empty), never ahead of tail, on the initiators' line: a push reads the shared tail,
   * which the proxy writes on every publish, only when this says full. */
  uint64_t tailSeen;
  /* 1 while a host-mode proxy sleeps on the futex of head's low 32 bits (proxy.c): a push that
   * sees it after its claim wakes the proxy. */
  uint32_t proxyAsleep;
  /* 1 when the last host call on this FIFO was a push, 0 after a mscclppFifoWaitServed (relaxed:
   * a hint): a push that follows a push is part of a burst, which asks for lines ahead (fifo.c). */
  uint32_t pushRun;
  uint64_t tail __attribute__((aligned(64))); /* published by the proxy */
  /* Triggers served, for tests and stats: written by the proxy thread only, for every trigger, so
   * on the tail's line, which the initiators seldom read, and not on the line of failed and
   * refused, which every mscclppFifoWaitServed reads. */
  uint64_t served;
  /* The fields below start a new cache line: every push and every trigger reads them, and the
   * proxy's tail stores would otherwise take their line away from the producers on each publish.
   * Only this process reads engCtx: the device sees the tail through ops->publishTail. */
  engComm* comm __attribute__((aligned(64)));
  const engOps* ops;  /* &ownOps: this context's transport's table, filled (engOpsFill) */
  void* transport;    /* the transport's own per-context state (e.g. CUDA context and stream) */
  uint64_t* devHead;  /* where initiators count pushes when not &head (device memory), or NULL */
  /* 1 while every connection's ops table has opsComplete (engCtxInit: its own table's; lowered, never
   * raised, by engConnSetOps): a Sync alone then needs no transport call, which the proxy knows from
   * this line it reads anyway instead of a connection's table, two dependent loads further. */
  int syncsFree;
  int prefetchW; /* 1 where the CPU has PREFETCHW (engCtxInit asks cpuid): pushes ask for lines ahead */
  engConn* conns[ENG_MAX_CONNS];
  pthread_t thread;
  volatile int running;
  volatile int stop;
  volatile int closing; /* set by engCtxClose (or engCtxMarkClosing before the proxy stops): host calls
                         * still inside leave with InvalidUsage, a transport's send in progress gives up */
  volatile int abandon; /* mscclppProxyStop after a reported failure: sends give up instead of waiting */
  int slot;             /* index in the table of live contexts, or -1 */
  int failed;           /* set by the proxy thread (atomic): its published tail carries MSCCLPP_FIFO_TAIL_FAILED */
  int opFailed;         /* proxy thread only: an operation failed other than for a bad trigger */
  uint64_t refused;     /* set by the proxy thread (atomic): 1 + the sequence number of the last trigger it
                         * refused (bad arguments), 0 when none: its mscclppFifoWaitServed reports it */
  uint32_t failedSeen;  /* proxy thread only: engComm.nConnFailed when it last looked at its connections */
  uint64_t typelessSeen; /* looks of the proxy at a slot with word 0 but no type yet (atomic; for tests) */
  int stopTailFailed;    /* proxy thread: its last tail, published as it stopped, carries MSCCLPP_FIFO_TAIL_FAILED */
  int live;              /* set by the proxy thread (atomic) once it serves: engProxyStart waits for it */
  engOps ownOps;
} engCtx;

/* The one way the engine and the transports record an error: the formatted message
 * becomes comm's first asynchronous error (unless one is recorded already), its last
 * error and the process's (comm NULL: the process's only); evaluates to code:
 * `return engFail(comm, code, fmt, ...)`. */
#define engFail(comm, code, ...) errFailAsync(engErrRecord(comm), (code), __VA_ARGS__)
static inline errRecord* engErrRecord(engComm* c) { return c != NULL ? &c->err : NULL; }

/* engFail on connection c (any struct with comm, connId, peerRank and tag: an engConn, or a
 * transport's own per-connection record), the message prefixed with its id, peer and tag;
 * returns code. A remote error also marks the connection failed (engMarkConnFailed): sticky for
 * it, not for the others. The error is recorded before the mark, so a wait the mark ends finds it. */
#define engConnFail(c, code, fmt, ...)                                                                            \
  ({                                                                                                             \
    int rc_ = engFail((c)->comm, (code), "connection %d (rank %d, tag %d): " fmt, (c)->connId, (c)->peerRank,     \
                      (c)->tag, ##__VA_ARGS__);                                                                  \
    if (rc_ == mscclppRemoteError) engMarkConnFailed((c)->comm, (c)->connId);                                    \
    rc_;                                                                                                         \
  })

/* Counts size bytes put on c (relaxed: a statistic, no locked instruction on the data path). */
static inline void engCountPut(engConn* c, uint64_t size)
{
  __atomic_store_n(&c->bytesPut, __atomic_load_n(&c->bytesPut, __ATOMIC_RELAXED) + size, __ATOMIC_RELAXED);
}

/* Gives c the ops table ops (transport.h), filled with the defaults, first lowering its context's
 * syncsFree when ops does not complete its operations before they return, so that no Sync the
 * proxy serves meanwhile skips a transport call that c's table needs. Called at setup, before
 * any operation on c (transport.c). */
void engConnSetOps(engConn* c, const engOps* ops);

/* 1 when pid no longer runs (gone, or a zombie nobody reaped yet): process.c. */
int engProcessGone(int pid);
/* 1 when the peer process is gone: pidfd's process where there is a pidfd (another process
 * that took its pid since is not it), else pid's (engProcessGone). */
int engPeerGone(int pid, int pidfd);
/* 1 when the process of pidfd (> 0) has exited: one poll, for the hot path. */
int engPidfdExited(int pidfd);

#endif
