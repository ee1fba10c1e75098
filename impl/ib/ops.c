/*
 * ops.c: the IB transport of the C engine, written against
 * impl/engine/engine.h as it is (read-only include). It runs on the proxy
 * thread and on host initiators' threads and never calls into Go.
 *
 * A signal sends the engine's count of signals done on the connection
 * (transport.h), not the device epoch: the value is fixed under the
 * engine's signal lock, staged in a slot of the QP's signal buffer, and
 * written after every earlier put of the same QP (RC executes a QP's
 * writes in order; the signal MR has strict ordering).
 */
#include "ops.h"

#include "../cudaproxy/cudaproxy.h" /* the CUDA-mode proxy thread's setup and tail publication */

#include <stddef.h>
#include <stdio.h>

static int ibFail(engConn* c, ibQp* q, const char* what)
{
  const char* why = ibQpError(q);
  char msg[IB_ERR_LEN + 64];
  snprintf(msg, sizeof(msg), "IB %s: %s", what, why ? why : "failed");
  /* an error completion means the peer (or the path to it) refused the write */
  return engConnFail(c, ibQpFailed(q) ? mscclppRemoteError : mscclppSystemError, "%s", msg);
}

int ibEngOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
            uint64_t size)
{
  ibConnState* st = (ibConnState*)c->transport;
  if (st == NULL || st->qp == NULL) return engConnFail(c, mscclppInvalidUsage, "IB operation before connection setup");
  ibQp* q = st->qp;
  int sync = (type & mscclppSync) != 0;
  if (type & mscclppData) {
    const engReg *s, *d;
    int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &s, &d);
    if (rc != mscclppSuccess) return rc;
    if ((int64_t)srcHandle >= st->nLocal || (int64_t)dstHandle >= st->nRemote)
      return engConnFail(c, mscclppInternalError, "IB put: a handle without a memory region");
    const ibRemoteMr* r = &st->remote[dstHandle];
    if (ibWrite(q, st->localMr[srcHandle], srcOff, r->addr, r->rkey, dstOff, size, sync) != 0)
      return ibFail(c, q, "put");
  }
  if (sync && ibFlush(q, 0) != 0) return ibFail(c, q, "flush");
  return mscclppSuccess;
}

/* The signal: value (the engine's, under its signal lock) staged in a slot of the QP's signal
 * buffer and written after every earlier write of the QP. */
static int ibEngSignal(engConn* c, uint64_t value)
{
  ibConnState* st = (ibConnState*)c->transport;
  if (st == NULL || st->qp == NULL) return engConnFail(c, mscclppInvalidUsage, "IB operation before connection setup");
  if (st->nRemote < 1) return engConnFail(c, mscclppInvalidUsage, "signal before connection setup");
  const ibRemoteMr* r = &st->remote[0];
  if (ibWriteSignal(st->qp, value, r->addr + offsetof(mscclppDevConnSignalEpochId, proxy), r->rkey, 0) != 0)
    return ibFail(c, st->qp, "signal");
  return mscclppSuccess;
}

/* per-connection state (engConn.transport) is freed by the Go side (ConnState.Free); a Sync
 * waits for the RDMA writes posted before it (opsComplete 0) */
const engOps ibEngOps = {
    .name = "IB",
    .op = ibEngOp,
    .sendSignal = ibEngSignal,
};

/* CUDA mode: the context is a CUDA-mode proxy's (impl/cudaproxy) and its transport state that
 * proxy's cudaProxyState (cuda/calls.h): the proxy thread runs in the GPU's context and publishes
 * the FIFO tail to device memory; the writes themselves are the same RDMA writes, from and into
 * device memory registered for GPUDirect RDMA. */
const engOps ibCudaEngOps = {
    .name = "IB",
    .op = ibEngOp,
    .sendSignal = ibEngSignal,
    .threadInit = cudaProxyThreadInit,
    .publishTail = cudaProxyPublishTail,
};
