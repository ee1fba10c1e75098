package engine

// Whether a trigger waits in a context's FIFO: what the watcher of a communicator whose
// proxies were never launched looks at (impl/launchwatch.go).

/*
#cgo CFLAGS: -O2 -Wall
#include "engine.h"

// The connection of the trigger written in the slot at ctx's tail (pushed, not served), or -1
// when that slot is empty; *tailOut is the tail read. Reads only host memory (the FIFO is pinned
// host memory in CUDA mode).
static int engCtxWaitingConn(engCtx* ctx, uint64_t* tailOut)
{
  uint64_t tail = __atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE);
  *tailOut = tail;
  mscclppTrigger* slot = &ctx->fifo[tail % MSCCLPP_PROXY_FIFO_SIZE];
  if (__atomic_load_n(&slot->value[0], __ATOMIC_ACQUIRE) == 0) return -1;
  return (int)MSCCLPP_TRIGGER_CONNID(__atomic_load_n(&slot->value[1], __ATOMIC_RELAXED));
}
*/
import "C"

// Waiting returns the connection of the oldest trigger pushed into x's FIFO and not served yet,
// and the FIFO's tail (how many were served); connID is -1 when none waits.
func (x *Ctx) Waiting() (connID int, tail uint64) {
	var t C.uint64_t
	connID = int(C.engCtxWaitingConn(x.p, &t))
	return connID, uint64(t)
}
