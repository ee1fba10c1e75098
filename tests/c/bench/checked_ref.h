/*
 * checked_ref.h: reference (e) of the 8-byte host rows, protocol (b) (memcpy
 * into the peer's mapped buffer, then a release store of an epoch the peer
 * spins on) behind two calls into a shared library of its own
 * (libchecked_ref.so) that check their arguments first, as any library that
 * refuses a bad or stale handle must: the handle against the library's table
 * of open connections, the offsets and size against the buffers. Nothing
 * else: no lock for concurrent signallers, no wake of a sleeping waiter, no
 * second count. Beside ours and (b) it shows what being a checked library
 * call costs the round trip, apart from what the library's own guarantees
 * cost.
 */
#ifndef MSCCLPP_BENCH_CHECKED_REF_H_
#define MSCCLPP_BENCH_CHECKED_REF_H_

#include <stdint.h>

typedef struct chkConn {
  char* dst;                    /* the peer's mapped buffer */
  uint64_t dstSize;
  const char* src;              /* my buffer */
  uint64_t srcSize;
  volatile uint64_t* peerEpoch; /* where my signals go */
  volatile uint64_t* myEpoch;   /* where the peer's arrive */
  uint64_t sent, seen;
} chkConn;

/* Opens c (adds it to the table of open connections): 0, or -1 when the table is full. */
int chkOpen(chkConn* c);
/* Closes c: later calls on it fail. */
void chkClose(chkConn* c);
/* Copies size bytes from src + srcOff to dst + dstOff, then stores the next epoch: 0, or -1
 * for a connection that is not open, -2 for a range outside a buffer. */
int chkPutWithSignal(chkConn* c, uint64_t dstOff, uint64_t srcOff, uint64_t size);
/* Spins until the peer's next epoch arrived: 0, or -1 for a connection that is not open. */
int chkWait(chkConn* c);

#endif
