/*
 * p2p.c: the CUDA P2P transport of the C engine (its engOps table). The
 * engine's registrations hold device pointers: mine from cuMemAlloc (or the
 * application's cudaMalloc), the peer's opened with cuIpcOpenMemHandle. A
 * put is a cuMemcpyDtoDAsync on the context's stream; a signal copies the
 * number of signals served on the connection into the peer's proxy epoch on
 * the same stream, so it lands after every earlier put; a flush waits for the
 * stream. The FIFO tail goes to device memory on a stream of its own, as
 * upstream's fifoStream (cuda/p2p.c, through impl/cudaproxy): the tail only
 * frees FIFO slots (the proxy cleared them before publishing), so it need not
 * wait for the copies, and a GPU blocked on a full FIFO is not held up behind
 * megabytes of data. A Sync trigger still waits for every earlier copy (p2pOp
 * synchronizes the data stream) before the proxy publishes the tail that
 * covers it. Runs on the proxy thread (and on host initiators' threads),
 * never calls into Go.
 */
#include "p2p.h"

#include "../cudaproxy/cudaproxy.h"

static int cudaFail(engConn* c, const cuwApi* a, const char* call, cuwResult rc)
{
  char buf[32];
  return engConnFail(c, mscclppUnhandledCudaError, "%s: %s", call, cudaProxyErrName(a, rc, buf, sizeof(buf)));
}

/* Makes st's context current on the calling thread (host initiators may call from a thread where
 * another context, or none, is current): the previous one into *prev, to give back with ctxLeave. */
static int ctxEnterP2P(engConn* c, cudaProxyState* st, cuwContext* prev)
{
  const cuwApi* a = st->api;
  cuwResult rc = a->ctxGetCurrent(prev);
  if (rc != CUW_SUCCESS) return cudaFail(c, a, "cuCtxGetCurrent", rc);
  if (*prev != st->ctx && (rc = a->ctxSetCurrent(st->ctx)) != CUW_SUCCESS) return cudaFail(c, a, "cuCtxSetCurrent", rc);
  return mscclppSuccess;
}

static void ctxLeaveP2P(cudaProxyState* st, cuwContext prev)
{
  if (prev != st->ctx) st->api->ctxSetCurrent(prev);
}

/* The data part: Data (a copy on the stream) and/or Sync (the stream synchronized). */
static int p2pOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                 uint64_t size)
{
  cudaProxyState* st = (cudaProxyState*)c->transport;
  if (st == NULL) return engConnFail(c, mscclppInvalidUsage, "P2P operation before connection setup");
  const cuwApi* a = st->api;
  uint64_t srcAddr = 0, dstAddr = 0;
  if (type & mscclppData) {
    const engReg *s, *d;
    int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &s, &d);
    if (rc != mscclppSuccess) return rc;
    srcAddr = s->addr + srcOff;
    dstAddr = d->addr + dstOff;
  }
  cuwContext prev = NULL;
  int ret = ctxEnterP2P(c, st, &prev);
  if (ret != mscclppSuccess) return ret;
  cuwResult rc;
  if ((type & mscclppData) && size > 0 &&
      (rc = a->memcpyDtoDAsync((cuwDevicePtr)dstAddr, (cuwDevicePtr)srcAddr, (size_t)size, st->stream)) != CUW_SUCCESS)
    ret = cudaFail(c, a, "cuMemcpyDtoDAsync", rc);
  else if ((type & mscclppSync) && (rc = a->streamSynchronize(st->stream)) != CUW_SUCCESS)
    ret = cudaFail(c, a, "cuStreamSynchronize", rc);
  ctxLeaveP2P(st, prev);
  return ret;
}

/* The signal: value (the engine's count, fixed in trigger order under its signal lock) copied into
 * the peer's proxy epoch on the data stream, after every earlier copy. Copying the device epoch
 * instead would send it as it is when the copy runs, which may already count later signals whose
 * data is still queued. The value waits in a ring of host slots until its copy ran: every
 * CUDA_PROXY_FLAG_RING signals the stream is synchronized before a slot is reused. */
static int p2pSignal(engConn* c, uint64_t value)
{
  cudaProxyState* st = (cudaProxyState*)c->transport;
  if (st == NULL) return engConnFail(c, mscclppInvalidUsage, "P2P operation before connection setup");
  if (c->remoteProxyEpoch == NULL || c->dev == NULL || c->dev->localSignalEpochId == NULL)
    return engConnFail(c, mscclppInvalidUsage, "signal before connection setup");
  const cuwApi* a = st->api;
  cuwContext prev = NULL;
  int ret = ctxEnterP2P(c, st, &prev);
  if (ret != mscclppSuccess) return ret;
  cuwResult rc;
  if (st->flagPos > 0 && st->flagPos % CUDA_PROXY_FLAG_RING == 0 &&
      (rc = a->streamSynchronize(st->stream)) != CUW_SUCCESS) {
    ret = cudaFail(c, a, "cuStreamSynchronize", rc);
  } else {
    uint64_t* slot = &st->flagRing[st->flagPos++ % CUDA_PROXY_FLAG_RING];
    *slot = value;
    rc = a->memcpyHtoDAsync((cuwDevicePtr)(uintptr_t)c->remoteProxyEpoch, slot, sizeof(uint64_t), st->stream);
    if (rc != CUW_SUCCESS) ret = cudaFail(c, a, "cuMemcpyHtoDAsync", rc);
  }
  ctxLeaveP2P(st, prev);
  return ret;
}

/* P2P state is the Go side's to free (cuda.FreeProxyState, after the streams are synchronized). */
const engOps p2pOps = {
    .name = "P2P",
    .op = p2pOp,
    .sendSignal = p2pSignal,
    .threadInit = cudaProxyThreadInit,
    .publishTail = cudaProxyPublishTail,
    /* opsComplete 0: a Sync waits for the copies queued on the stream */
};
