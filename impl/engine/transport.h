/*
 * transport.h: the C contract between the engine (proxy thread, host
 * initiators) and a transport, rdma-core style: a transport is a const ops
 * table. The table starts with its own size, so the engine can refuse a table
 * built against another version, and has no optional entries: a transport
 * names the engOpsNo* defaults for what it does not need, so the proxy never
 * tests for NULL. engCtxInit refuses a table that breaks these rules.
 */
#ifndef MSCCLPP_ENGINE_TRANSPORT_H_
#define MSCCLPP_ENGINE_TRANSPORT_H_

#include <stddef.h>
#include <stdint.h>

struct engConn;
struct engCtx;

typedef struct engOps {
  size_t size;      /* sizeof(engOps) as the transport was built: first, always */
  const char* name; /* for messages: "SHM", "P2P", ... */
  /* One trigger's work on connection c: Data (copy size bytes from local handle srcHandle at
   * srcOff to remote handle dstHandle at dstOff), Flag (send the count of signals done), Sync
   * (finish earlier work), OR-able. Failures are recorded with engConnFail and returned. */
  int (*op)(struct engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle,
            uint64_t srcOff, uint64_t size);
  /* Runs first on the proxy thread (e.g. make a CUDA context current, bind CPUs). */
  int (*threadInit)(struct engCtx* ctx);
  /* Makes the proxy's tail visible to initiators after the engine's own release store
   * (e.g. a copy to device memory). A tail with MSCCLPP_FIFO_TAIL_FAILED set (the
   * communicator failed) must be visible when it returns. */
  int (*publishTail)(struct engCtx* ctx, uint64_t tail);
  /* Releases the context's transport state once the proxy stopped and no call is inside. */
  void (*close)(struct engCtx* ctx);
} engOps;

/* Whether ops follows the rules above: its size first, every entry set (1) or not (0). */
int engOpsValid(const engOps* ops);

/* Defaults for the entries a transport does not need. */
int engOpsNoThreadInit(struct engCtx* ctx);
int engOpsNoPublishTail(struct engCtx* ctx, uint64_t tail);
void engOpsNoClose(struct engCtx* ctx);

/* An ops table initializer: ENG_OPS("NAME", op, threadInit, publishTail, close). */
#define ENG_OPS(name, op, threadInit, publishTail, close) {sizeof(engOps), (name), (op), (threadInit), (publishTail), (close)}

#endif
