/*
 * cudaproxy.c: a CUDA-mode proxy context's threadInit and publishTail over cuda's proxy
 * state (cuda/proxystate.c makes the driver calls), reporting failures through engFail. Shared
 * by the transports whose proxies run in CUDA mode (impl/p2p, impl/eth, impl/ib).
 */
#include <stdio.h>

#include "cudaproxy.h"

const char* cudaProxyErrName(const cuwApi* a, int rc, char* buf, size_t len)
{
  const char* s = cuwErrorName(a, rc);
  if (s != NULL) return s;
  snprintf(buf, len, "CUresult %d", rc);
  return buf;
}

int cudaProxyStateThreadInit(engCtx* ctx, cudaProxyState* st)
{
  if (st == NULL) return engFail(ctx->comm, mscclppInvalidUsage, "proxy: no CUDA state on its context");
  const char* call = "";
  int rc = cudaProxyStateEnter(st, &call);
  if (rc != CUW_SUCCESS) {
    char buf[32];
    return engFail(ctx->comm, mscclppUnhandledCudaError, "%s proxy: %s: %s", ctx->ops->name, call,
                   cudaProxyErrName(st->api, rc, buf, sizeof(buf)));
  }
  return mscclppSuccess;
}

int cudaProxyStatePublishTail(engCtx* ctx, cudaProxyState* st, uint64_t tail)
{
  if (st == NULL) return mscclppInvalidUsage;
  /* a failed communicator's tail is visible before the slot of the trigger that failed empties */
  int now = (tail & MSCCLPP_FIFO_TAIL_FAILED) != 0;
  int rc = now ? cudaProxyStatePushTailNow(st, tail) : cudaProxyStatePushTail(st, tail);
  if (rc != CUW_SUCCESS) {
    char buf[32];
    return engFail(ctx->comm, mscclppUnhandledCudaError, "%s proxy: %s of the FIFO tail: %s", ctx->ops->name,
                   now ? "cuMemcpyHtoDAsync + cuStreamSynchronize" : "cuMemcpyHtoDAsync",
                   cudaProxyErrName(st->api, rc, buf, sizeof(buf)));
  }
  return mscclppSuccess;
}

int cudaProxyThreadInit(engCtx* ctx) { return cudaProxyStateThreadInit(ctx, (cudaProxyState*)ctx->transport); }

int cudaProxyPublishTail(engCtx* ctx, uint64_t tail)
{
  return cudaProxyStatePublishTail(ctx, (cudaProxyState*)ctx->transport, tail);
}
