/*
 * transport.h: the one contract between the engine (proxy thread, host
 * initiators, host waits) and a transport. A transport is a const engOps
 * table written with designated initializers that sets only what the
 * transport implements; the engine fills every entry left out from the
 * named defaults below (engOpsFill, rdma-core's verbs_set_ops pattern), so
 * the engine never tests an entry for NULL, never names a transport (a check
 * in tests/layers keeps the engine's files free of transport names and
 * hooks), and no table spells out a no-op.
 *
 * A context has its transport's table (filled); a connection has its
 * context's unless the transport gives it one of its own (engine.go's
 * Conn.SetOps, engConnSetOps), e.g. where waits on that connection must
 * deliver queued data. What a transport keeps per connection hangs off
 * engConn.transport, which only the transport reads.
 *
 * This table is the data plane of a transport; its control plane (declare,
 * describe, finish, register, close) is the Go interface Transport of
 * impl/transport, whose doc restates the rules below in short: one contract.
 *
 * THE CONTRACT
 *
 * Concurrency. op, sendSignal and putSignal run on the proxy thread and on any
 * number of host initiators' threads at once, on the same connection too: a
 * transport locks what its own state needs (a QP, a socket's stream). Waits
 * (waitPoll, waitPending) run on the waiting threads, concurrently with the
 * operations. threadInit and publishTail run on the proxy thread only; close
 * runs once, after the proxy stopped and no call is inside the context.
 *
 * Signals belong to the engine. A trigger or a host call with a Flag is split
 * by the engine (engConnDo, conndo.h): the data part (op with Data), then the
 * signal, then the Sync part (op with Sync). The engine picks the value a
 * signal sends, the count of signals done on the connection plus one, under
 * the connection's signal lock (engConn.sigLock), and calls sendSignal (or
 * putSignal) with that lock held, so two signallers never send their counts
 * out of order and the peer's epoch never goes backwards. The transport must
 * deliver value after the data of every operation on the connection that
 * returned before sendSignal was called (its own put included), and store it
 * into the peer's epoch of the connection (localSignalEpochId->proxy) as it
 * is: no count of its own. A transport that can send a put and its signal
 * together (one frame, one queue entry, one copy under the lock) sets
 * putSignal and putSignalMax: a put of 1 to putSignalMax bytes with a signal
 * is then one putSignal call under the lock. After the lock is released the
 * engine wakes the peer's threads asleep on the epoch where the connection
 * has a sleeper count (engConn.remoteSleepers).
 *
 * Return codes, and what the proxy does with each:
 *   mscclppSuccess          done (with opsComplete) or started;
 *   mscclppInvalidArgument  the trigger was refused (bad handles, offsets, sizes): recorded on the
 *                           communicator (engConnFail), the caller's mscclppFifoWaitServed of that
 *                           trigger reports it, and the proxy keeps serving;
 *   mscclppRemoteError      the connection failed (its peer or the path to it; engConnFail marks it
 *                           failed): every wait on it ends, the proxy's tail says failed, the other
 *                           connections' waits go on;
 *   anything else           the context failed (its proxy's tail says failed from then on).
 * Every failure is recorded with engConnFail (or engFail) before it is returned.
 *
 * Registrations. What a transport maps or registers for a peer's buffers (the
 * handles an op names) stays valid until close: MSCCL++ 0.1 has no call that
 * deregisters a buffer, so no operation races a deregistration. Traffic
 * meets teardown only at mscclppCommDestroy, which stops the proxy and waits
 * for every call inside the context to leave before close runs (the C
 * transports suite's destroy busy, stopped and proxystop cases, run over SHM,
 * Ethernet and IB).
 *
 * Peer close. When a transport learns that the peer's side of a connection
 * is gone it sets engConn.peerClosed (release) and wakes the threads asleep
 * on the local epoch (engFutexWake on it where localSleepers counts any, or
 * its own receive thread's wake): a wait on that connection then ends with
 * mscclppRemoteError instead of sleeping until its deadline.
 */
#ifndef MSCCLPP_ENGINE_TRANSPORT_H_
#define MSCCLPP_ENGINE_TRANSPORT_H_

#include <stdint.h>

struct engConn;
struct engCtx;
struct engWait;

/* How a host wait on a connection backs off between looks at its epoch (engOps.waitStyle). */
enum {
  /* Spins on the epoch (first inline, before any call), then yields, then sleeps on the
   * futex: the peer's signal lands in memory this thread polls. The default (0). */
  ENG_WAIT_SPIN = 0,
  /* As ENG_WAIT_SPIN, but waitPoll runs from the first look: no inline spin before it. */
  ENG_WAIT_POLL = 1,
  /* No spin and no yield: a thread of this process (a transport's receive thread) delivers
   * the signals and wakes sleepers, and a spinning or yielding wait would only keep the CPU
   * from it. Sleeps on the futex at once (yields where the connection has no sleeper count). */
  ENG_WAIT_SLEEP = 2,
};

/* What waitPoll did. */
enum {
  ENG_POLL_IDLE = 0,    /* nothing: the wait backs off as usual */
  ENG_POLL_MOVED = 1,   /* it delivered something: the wait looks at its epoch again, then backs off */
  ENG_POLL_BLOCKED = 2, /* it blocked for a while: the wait looks at its epoch and its conditions, no back-off */
};

typedef struct engOps {
  const char* name; /* for messages: "SHM", "P2P", ... (required) */
  /* The data part of one operation on connection c (required): Data (copy size bytes from local
   * handle srcHandle at srcOff to remote handle dstHandle at dstOff) and/or Sync (finish earlier
   * work, the signals sent before it included); never a Flag (the engine sends signals). */
  int (*op)(struct engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle,
            uint64_t srcOff, uint64_t size);
  /* Sends value, the engine's count of signals done on c, into the peer's epoch, after every
   * earlier operation's data (required; called with c's signal lock held: see the contract). */
  int (*sendSignal)(struct engConn* c, uint64_t value);
  /* A put of 1..putSignalMax bytes and its signal value in one call, under c's signal lock (default:
   * op with Data, then sendSignal). */
  int (*putSignal)(struct engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                   uint64_t size, uint64_t value);
  uint64_t putSignalMax; /* 0 (the default): a put with a signal is op, then signal */
  /* A host wait on c for *epoch to reach want calls this every time round, before it backs off:
   * the transport delivers what no other thread will deliver soon (data the peer queued for
   * this side, frames a socket holds). w NULL: deliver only what already arrived, never block;
   * else it may block until *epoch reaches want, the wait's deadline (engWaitDeadline(w)) or
   * about a millisecond passed; longer (up to 20 ms) only while a thread of the transport is
   * busy for this connection and wakes the wait when it is done or fails (Ethernet's receive
   * thread inside a frame). Returns ENG_POLL_*. (A wait skips the default, engOpsNoWaitPoll.) */
  int (*waitPoll)(struct engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w);
  /* Whether something arrived that waitPoll would deliver: a wait never sleeps over it (asked
   * after the waiter counted itself asleep, see engWaitFutex). Default: never. */
  int (*waitPending)(struct engConn* c);
  int waitStyle; /* ENG_WAIT_*: how waits back off between polls (default ENG_WAIT_SPIN) */
  /* 1 when op and sendSignal return only once their work is complete (the sources may be reused,
   * nothing is left in flight): a Sync then has nothing to finish, and the engine serves it
   * without calling op. 0 (the default; IB, P2P) when a Sync must wait for work started. */
  int opsComplete;
  /* Runs first on the proxy thread (e.g. make a CUDA context current, bind CPUs). Default: nothing. */
  int (*threadInit)(struct engCtx* ctx);
  /* Makes the proxy's tail visible to initiators after the engine's own release store
   * (e.g. a copy to device memory). A tail with MSCCLPP_FIFO_TAIL_FAILED set (the
   * communicator failed) must be visible when it returns. Default: nothing (host memory). */
  int (*publishTail)(struct engCtx* ctx, uint64_t tail);
  /* Releases the context's transport state once the proxy stopped and no call is inside.
   * Default: nothing. */
  void (*close)(struct engCtx* ctx);
} engOps;

/* Copies src into dst with every entry src leaves out set to its default below. */
void engOpsFill(engOps* dst, const engOps* src);

/* The defaults (transport.c). engOpsNoOp and engOpsNoSignal refuse with mscclppInternalError:
 * a table without them is a transport's bug, reported on the connection. */
int engOpsNoOp(struct engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle,
               uint64_t srcOff, uint64_t size);
int engOpsNoSignal(struct engConn* c, uint64_t value);
int engOpsSplitPutSignal(struct engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                         uint64_t size, uint64_t value);
int engOpsNoWaitPoll(struct engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w);
int engOpsNoWaitPending(struct engConn* c);
int engOpsNoThreadInit(struct engCtx* ctx);
int engOpsNoPublishTail(struct engCtx* ctx, uint64_t tail);
void engOpsNoClose(struct engCtx* ctx);

#endif
