/*
 * transport.h: the one contract between the engine (proxy thread, host
 * initiators, host waits) and a transport, rdma-core style: a transport is a
 * const ops table written with designated initializers. Every function entry
 * is set: a transport names the engOpsNo* default for what it does not need,
 * so the engine never tests for NULL and never names a transport (a check in
 * tests/layers keeps the engine's files free of transport names and hooks).
 *
 * A context has its transport's table; a connection has its context's
 * unless the transport gives it one of its own (engine.go's Conn.SetOps),
 * e.g. where waits on that connection must deliver queued data. What a
 * transport keeps per connection hangs off engConn.transport, which only the
 * transport reads.
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
  const char* name; /* for messages: "SHM", "P2P", ... */
  /* One trigger's work on connection c: Data (copy size bytes from local handle srcHandle at
   * srcOff to remote handle dstHandle at dstOff), Flag (send the count of signals done), Sync
   * (finish earlier work), OR-able. Failures are recorded with engConnFail and returned. */
  int (*op)(struct engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle,
            uint64_t srcOff, uint64_t size);
  /* A host wait on c for *epoch to reach want calls this every time round, before it backs off:
   * the transport delivers what no other thread will deliver soon (data the peer queued for
   * this side, frames a socket holds). w NULL: deliver only what already arrived, never block;
   * else it may block until *epoch reaches want, the wait's deadline (engWaitDeadline(w)) or
   * about a millisecond passed; longer (up to 20 ms) only while a thread of the transport is
   * busy for this connection and wakes the wait when it is done or fails (Ethernet's receive
   * thread inside a frame). Returns ENG_POLL_*. (A wait skips the default, engOpsNoWaitPoll.) */
  int (*waitPoll)(struct engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w);
  /* Whether something arrived that waitPoll would deliver: a wait never sleeps over it (asked
   * after the waiter counted itself asleep, see engWaitFutex). */
  int (*waitPending)(struct engConn* c);
  int waitStyle; /* ENG_WAIT_*: how waits back off between polls */
  /* 1 when op returns only once its work is complete (the sources may be reused, nothing is left
   * in flight): a Sync trigger alone then has nothing to finish, and the proxy serves it without
   * calling op. 0 (IB, P2P) when a Sync must wait for work op started. */
  int opsComplete;
  /* Runs first on the proxy thread (e.g. make a CUDA context current, bind CPUs). */
  int (*threadInit)(struct engCtx* ctx);
  /* Makes the proxy's tail visible to initiators after the engine's own release store
   * (e.g. a copy to device memory). A tail with MSCCLPP_FIFO_TAIL_FAILED set (the
   * communicator failed) must be visible when it returns. */
  int (*publishTail)(struct engCtx* ctx, uint64_t tail);
  /* Releases the context's transport state once the proxy stopped and no call is inside. */
  void (*close)(struct engCtx* ctx);
} engOps;

/* Defaults for the entries a transport does not need (transport.c). */
int engOpsNoWaitPoll(struct engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w);
int engOpsNoWaitPending(struct engConn* c);
int engOpsNoThreadInit(struct engCtx* ctx);
int engOpsNoPublishTail(struct engCtx* ctx, uint64_t tail);
void engOpsNoClose(struct engCtx* ctx);

#endif
