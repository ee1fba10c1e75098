/*
 * proxystate.c: the driver side of a CUDA-mode proxy's state (cudaProxyState): a proxy
 * context's two streams (one for copies in trigger order, one for the FIFO
 * tail, as upstream's fifoStream), the tail word in device memory with its
 * pinned staging words, and the proxy thread's setup (context current,
 * bound near the GPU). Driver calls only, returning a cuwResult and the
 * failing call's name: the transports that use the state (impl/p2p's engOps
 * table, Ethernet and IB in CUDA mode, through impl/cudaproxy) turn those into
 * engine errors. Runs on the proxy thread (and on host initiators' threads),
 * never calls into Go.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "calls.h"
#include "../include/mscclpp.h"

/* The driver's name of rc, or its number. */
static const char* errName(const cuwApi* a, cuwResult rc, char* buf, size_t len)
{
  const char* s = NULL;
  if (a->getErrorName(rc, &s) == CUW_SUCCESS && s != NULL) return s;
  snprintf(buf, len, "CUresult %d", (int)rc);
  return buf;
}

int cudaProxyStateEnter(cudaProxyState* st, const char** call)
{
  cuwResult rc = st->api->ctxSetCurrent(st->ctx);
  if (rc != CUW_SUCCESS) *call = "cuCtxSetCurrent";
  if (st->cpus != NULL) {
    /* a refused binding is not an error: Go logs it from bindErr */
    st->bindErr = pthread_setaffinity_np(pthread_self(), st->cpusSize, (cpu_set_t*)st->cpus);
  }
  __atomic_store_n(&st->bindDone, 1, __ATOMIC_RELEASE);
  return rc;
}

int cudaProxyStatePushTail(cudaProxyState* st, uint64_t tail)
{
  /* hostTail is pinned: the copy reads it when it runs, and a newer tail is
   * always a valid one to publish */
  __atomic_store_n(st->hostTail, tail, __ATOMIC_RELEASE);
  return st->api->memcpyHtoDAsync(st->devTail, st->hostTail, sizeof(uint64_t), st->tailStream);
}

int cudaProxyStatePushTailNow(cudaProxyState* st, uint64_t tail)
{
  cuwResult rc = cudaProxyStatePushTail(st, tail);
  return rc != CUW_SUCCESS ? rc : st->api->streamSynchronize(st->tailStream);
}

/* A synchronous copy on one of st's streams with st's context current on the calling thread
 * (the caller's own context is restored). */
static int stageCopy(cudaProxyState* st, cuwStream stream, cuwDevicePtr dst, cuwDevicePtr src, size_t n, int toDevice,
                     char* err, int errLen)
{
  const cuwApi* a = st->api;
  cuwContext prev = NULL;
  cuwResult rc = a->ctxGetCurrent(&prev);
  const char* call = "cuCtxGetCurrent";
  if (rc == CUW_SUCCESS && prev != st->ctx) {
    call = "cuCtxSetCurrent";
    rc = a->ctxSetCurrent(st->ctx);
  }
  if (rc == CUW_SUCCESS) {
    call = toDevice ? "cuMemcpyHtoDAsync" : "cuMemcpyAsync";
    rc = toDevice ? a->memcpyHtoDAsync(dst, (const void*)(uintptr_t)src, n, stream) : a->memcpyAsync(dst, src, n, stream);
  }
  if (rc == CUW_SUCCESS) {
    call = "cuStreamSynchronize";
    rc = a->streamSynchronize(stream);
  }
  if (prev != st->ctx) a->ctxSetCurrent(prev);
  if (rc != CUW_SUCCESS) {
    char buf[32];
    snprintf(err, (size_t)errLen, "%s of %zu bytes: %s", call, n, errName(a, rc, buf, sizeof(buf)));
    return mscclppUnhandledCudaError;
  }
  return mscclppSuccess;
}

int cudaStageToHost(cudaProxyState* st, void* dst, uint64_t src, size_t n, char* err, int errLen)
{
  return stageCopy(st, st->stream, (cuwDevicePtr)(uintptr_t)dst, (cuwDevicePtr)src, n, 0, err, errLen);
}

int cudaStageToDevice(cudaProxyState* st, uint64_t dst, const void* src, size_t n, char* err, int errLen)
{
  /* the tail stream: receiving never waits behind the proxy's own copies */
  return stageCopy(st, st->tailStream, (cuwDevicePtr)dst, (cuwDevicePtr)(uintptr_t)src, n, 1, err, errLen);
}

int cudaProxyStateNew(const cuwApi* a, cuwContext ctx, const int* cpus, int nCpus, int numaNode, cudaProxyState** out,
                    const char** call)
{
  *out = NULL;
  cudaProxyState* st = (cudaProxyState*)calloc(1, sizeof(*st));
  if (st == NULL) {
    *call = "calloc";
    return CUW_ERROR_OUT_OF_MEMORY;
  }
  st->api = a;
  st->ctx = ctx;
  if (nCpus > 0) {
    int max = 0;
    for (int i = 0; i < nCpus; i++)
      if (cpus[i] > max) max = cpus[i];
    st->cpus = CPU_ALLOC(max + 1);
    if (st->cpus == NULL) {
      free(st);
      *call = "CPU_ALLOC";
      return CUW_ERROR_OUT_OF_MEMORY;
    }
    st->cpusSize = CPU_ALLOC_SIZE(max + 1);
    CPU_ZERO_S(st->cpusSize, (cpu_set_t*)st->cpus);
    for (int i = 0; i < nCpus; i++)
      if (cpus[i] >= 0) CPU_SET_S((size_t)cpus[i], st->cpusSize, (cpu_set_t*)st->cpus);
  }
  cuwContext prev = NULL;
  cuwResult rc = a->ctxGetCurrent(&prev);
  if (rc != CUW_SUCCESS) {
    *call = "cuCtxGetCurrent";
    goto fail;
  }
  if (prev != ctx && (rc = a->ctxSetCurrent(ctx)) != CUW_SUCCESS) {
    *call = "cuCtxSetCurrent";
    goto fail;
  }
  int placed = 0;
  if ((rc = a->streamCreate(&st->stream, CUW_STREAM_NON_BLOCKING)) != CUW_SUCCESS) {
    *call = "cuStreamCreate";
  } else if ((rc = a->streamCreate(&st->tailStream, CUW_STREAM_NON_BLOCKING)) != CUW_SUCCESS) {
    *call = "cuStreamCreate";
  } else if ((rc = a->memAlloc(&st->devTail, sizeof(uint64_t))) != CUW_SUCCESS) {
    *call = "cuMemAlloc";
  } else if ((rc = a->memsetD8(st->devTail, 0, sizeof(uint64_t))) != CUW_SUCCESS) {
    *call = "cuMemsetD8";
  } else if ((rc = a->streamSynchronize(NULL)) != CUW_SUCCESS) { /* the memset ran on the legacy stream */
    *call = "cuStreamSynchronize";
  } else if ((rc = cuwPinnedOnNode(a, (void**)&st->hostTail, sizeof(uint64_t) * (1 + CUDA_PROXY_FLAG_RING),
                                     CUW_MEMHOSTALLOC_PORTABLE, numaNode, &placed)) != CUW_SUCCESS) {
    *call = "cuMemHostAlloc";
  }
  if (rc != CUW_SUCCESS) {
    if (st->devTail != 0) a->memFree(st->devTail);
    if (st->tailStream != NULL) a->streamDestroy(st->tailStream);
    if (st->stream != NULL) a->streamDestroy(st->stream);
  }
  if (prev != ctx) a->ctxSetCurrent(prev);
  if (rc != CUW_SUCCESS) goto fail;
  *st->hostTail = 0;
  st->flagRing = st->hostTail + 1;
  *out = st;
  return CUW_SUCCESS;
fail:
  if (st->cpus != NULL) CPU_FREE(st->cpus);
  free(st);
  return rc;
}

/* Runs fn(st) with st's context current on the calling thread, restoring the thread's own after. */
static cuwResult withCtx(cudaProxyState* st, cuwResult (*fn)(cudaProxyState*, const char**), const char** call)
{
  const cuwApi* a = st->api;
  cuwContext prev = NULL;
  cuwResult rc = a->ctxGetCurrent(&prev);
  if (rc != CUW_SUCCESS) {
    *call = "cuCtxGetCurrent";
    return rc;
  }
  if (prev != st->ctx && (rc = a->ctxSetCurrent(st->ctx)) != CUW_SUCCESS) {
    *call = "cuCtxSetCurrent";
    return rc;
  }
  rc = fn(st, call);
  if (prev != st->ctx) a->ctxSetCurrent(prev);
  return rc;
}

/* The tail's stream first (it is never long), then the data: what upstream's proxy does on exit. */
static cuwResult syncStreams(cudaProxyState* st, const char** call)
{
  cuwResult rc = st->api->streamSynchronize(st->tailStream);
  if (rc == CUW_SUCCESS) rc = st->api->streamSynchronize(st->stream);
  if (rc != CUW_SUCCESS) *call = "cuStreamSynchronize";
  return rc;
}

int cudaProxyStateSync(cudaProxyState* st, const char** call)
{
  if (st == NULL) return CUW_SUCCESS;
  return withCtx(st, syncStreams, call);
}

int cudaProxyStateFree(cudaProxyState* st, const char** call)
{
  if (st == NULL) return CUW_SUCCESS;
  const cuwApi* a = st->api;
  cuwContext prev = NULL;
  cuwResult rc = a->ctxGetCurrent(&prev), first = CUW_SUCCESS;
  if (rc == CUW_SUCCESS && prev != st->ctx) rc = a->ctxSetCurrent(st->ctx);
  if (rc != CUW_SUCCESS) {
    *call = "cuCtxSetCurrent";
    first = rc;
  } else {
#define KEEP(expr, name)                                   \
  do {                                                     \
    cuwResult r_ = (expr);                                 \
    if (r_ != CUW_SUCCESS && first == CUW_SUCCESS) {      \
      first = r_;                                          \
      *call = name;                                        \
    }                                                      \
  } while (0)
    KEEP(a->streamSynchronize(st->tailStream), "cuStreamSynchronize");
    KEEP(a->streamSynchronize(st->stream), "cuStreamSynchronize");
    KEEP(a->streamDestroy(st->tailStream), "cuStreamDestroy");
    KEEP(a->streamDestroy(st->stream), "cuStreamDestroy");
    KEEP(a->memFree(st->devTail), "cuMemFree");
    KEEP(a->memFreeHost(st->hostTail), "cuMemFreeHost");
#undef KEEP
    if (prev != st->ctx) a->ctxSetCurrent(prev);
  }
  if (st->cpus != NULL) CPU_FREE(st->cpus);
  free(st);
  return first;
}

void cudaProxyStateBindResult(const cudaProxyState* st, int* done, int* err)
{
  *done = __atomic_load_n(&st->bindDone, __ATOMIC_ACQUIRE);
  *err = *done ? st->bindErr : 0;
}
