/*
 * stage.c: per-connection streams for host-side transports in CUDA mode
 * (Ethernet): each connection copies between device memory and its pinned
 * staging buffers on streams of its own, so that a copy can run while the
 * connection's socket moves the previous chunk (double buffering) and no
 * connection waits behind another's copies. See calls.h.
 */
#include "calls.h"

#include <stdio.h>

#include "../include/mscclpp.h"

/* Runs with st's context current on the calling thread (a proxy or receive thread). */
typedef struct stageCall {
  cuwContext prev;
  int switched;
} stageCall;

static cuwResult enter(cudaProxyState* st, stageCall* c)
{
  c->switched = 0;
  cuwResult rc = st->api->ctxGetCurrent(&c->prev);
  if (rc == CUW_SUCCESS && c->prev != st->ctx) {
    rc = st->api->ctxSetCurrent(st->ctx);
    c->switched = rc == CUW_SUCCESS;
  }
  return rc;
}

static void leave(cudaProxyState* st, stageCall* c)
{
  if (c->switched) st->api->ctxSetCurrent(c->prev);
}

static int failed(cudaProxyState* st, const char* call, size_t n, cuwResult rc, char* err, int errLen)
{
  const char* name = NULL;
  if (st->api->getErrorName(rc, &name) != CUW_SUCCESS || name == NULL) name = "unknown CUresult";
  snprintf(err, (size_t)errLen, "%s of %zu bytes: %s (%d)", call, n, name, (int)rc);
  return mscclppUnhandledCudaError;
}

int cudaStageStreamNew(cudaProxyState* st, void** stream, char* err, int errLen)
{
  stageCall c;
  cuwResult rc = enter(st, &c);
  if (rc == CUW_SUCCESS) rc = st->api->streamCreate((cuwStream*)stream, CUW_STREAM_NON_BLOCKING);
  leave(st, &c);
  return rc == CUW_SUCCESS ? mscclppSuccess : failed(st, "cuStreamCreate", 0, rc, err, errLen);
}

void cudaStageStreamFree(cudaProxyState* st, void* stream)
{
  if (stream == NULL) return;
  stageCall c;
  if (enter(st, &c) == CUW_SUCCESS) st->api->streamDestroy((cuwStream)stream); /* waits for its copies */
  leave(st, &c);
}

int cudaStageAsync(cudaProxyState* st, void* stream, uint64_t dst, uint64_t src, size_t n, int toDevice, char* err,
                   int errLen)
{
  stageCall c;
  cuwResult rc = enter(st, &c);
  if (rc == CUW_SUCCESS)
    rc = toDevice ? st->api->memcpyHtoDAsync(dst, (const void*)(uintptr_t)src, n, (cuwStream)stream)
                  : st->api->memcpyAsync(dst, src, n, (cuwStream)stream);
  leave(st, &c);
  return rc == CUW_SUCCESS ? mscclppSuccess
                           : failed(st, toDevice ? "cuMemcpyHtoDAsync" : "cuMemcpyAsync", n, rc, err, errLen);
}

int cudaStageWait(cudaProxyState* st, void* stream, char* err, int errLen)
{
  stageCall c;
  cuwResult rc = enter(st, &c);
  if (rc == CUW_SUCCESS) rc = st->api->streamSynchronize((cuwStream)stream);
  leave(st, &c);
  return rc == CUW_SUCCESS ? mscclppSuccess : failed(st, "cuStreamSynchronize", 0, rc, err, errLen);
}
