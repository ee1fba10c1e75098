/*
 * p2p.c: the CUDA P2P transport of the C engine (an engOps table). The
 * engine's registrations hold device pointers: mine from cuMemAlloc (or the
 * application's cudaMalloc), the peer's opened with cuIpcOpenMemHandle. A
 * put is a cuMemcpyDtoDAsync on the context's stream; a signal copies the
 * number of signals served on the connection into the peer's proxy epoch on
 * the same stream, so it lands after every earlier put; a flush waits for the
 * stream. The FIFO tail goes to device memory on a stream of its own, as
 * upstream's fifoStream: the tail only frees FIFO slots (the proxy cleared
 * them before publishing), so it need not wait for the copies, and a GPU
 * blocked on a full FIFO is not held up behind megabytes of data. A Sync
 * trigger still waits for every earlier copy (p2pOp synchronizes the data
 * stream) before the proxy publishes the tail that covers it. Runs on the
 * proxy thread (and on host initiators' threads), never calls into Go.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "calls.h"
#include "engine.h"

/* The driver's name of rc, or its number. */
static const char* errName(const cuwApi* a, cuwResult rc, char* buf, size_t len)
{
  const char* s = NULL;
  if (a->getErrorName(rc, &s) == CUW_SUCCESS && s != NULL) return s;
  snprintf(buf, len, "CUresult %d", (int)rc);
  return buf;
}

static int cudaFail(engConn* c, const cuwApi* a, const char* call, cuwResult rc)
{
  char buf[32];
  return engConnFail(c, mscclppUnhandledCudaError, "%s: %s", call, errName(a, rc, buf, sizeof(buf)));
}

static int p2pOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                 uint64_t size)
{
  cudaP2PState* st = (cudaP2PState*)c->transport;
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
  if ((type & mscclppFlag) && (c->remoteProxyEpoch == NULL || c->dev == NULL || c->dev->localSignalEpochId == NULL))
    return engConnFail(c, mscclppInvalidUsage, "signal before connection setup");

  /* Host initiators may call from a thread where another context (or none) is current. */
  cuwContext prev = NULL;
  cuwResult rc = a->ctxGetCurrent(&prev);
  if (rc != CUW_SUCCESS) return cudaFail(c, a, "cuCtxGetCurrent", rc);
  if (prev != st->ctx && (rc = a->ctxSetCurrent(st->ctx)) != CUW_SUCCESS)
    return cudaFail(c, a, "cuCtxSetCurrent", rc);

  int ret = mscclppSuccess;
  if ((type & mscclppData) && size > 0) {
    rc = a->memcpyDtoDAsync((cuwDevicePtr)dstAddr, (cuwDevicePtr)srcAddr, (size_t)size, st->stream);
    if (rc != CUW_SUCCESS) {
      ret = cudaFail(c, a, "cuMemcpyDtoDAsync", rc);
      goto out;
    }
  }
  if (type & mscclppFlag) {
    /* The value is fixed now, in trigger order: the count of signals served on
     * this connection. Copying the device epoch instead would send it as it is
     * when the copy runs, which may already count later signals whose data is
     * still queued. Each signal increments the epoch once and pushes one Flag,
     * so the two agree once every trigger is served. Signals come from the
     * proxy thread only (host threads may not signal a CUDA-mode connection). */
    if (st->flagPos > 0 && st->flagPos % CUDA_P2P_FLAG_RING == 0 &&
        (rc = a->streamSynchronize(st->stream)) != CUW_SUCCESS) {
      ret = cudaFail(c, a, "cuStreamSynchronize", rc);
      goto out;
    }
    uint64_t* slot = &st->flagRing[st->flagPos++ % CUDA_P2P_FLAG_RING];
    *slot = ++c->signalsDone;
    rc = a->memcpyHtoDAsync((cuwDevicePtr)(uintptr_t)c->remoteProxyEpoch, slot, sizeof(uint64_t), st->stream);
    if (rc != CUW_SUCCESS) {
      ret = cudaFail(c, a, "cuMemcpyHtoDAsync", rc);
      goto out;
    }
  }
  if (type & mscclppSync) {
    rc = a->streamSynchronize(st->stream);
    if (rc != CUW_SUCCESS) ret = cudaFail(c, a, "cuStreamSynchronize", rc);
  }
out:
  if (prev != st->ctx) a->ctxSetCurrent(prev);
  return ret;
}

int cudaStateThreadInit(engCtx* ctx, cudaP2PState* st)
{
  if (st == NULL) {
    return engFail(ctx->comm, mscclppInvalidUsage, "proxy: no CUDA state on its context");
  }
  int ret = mscclppSuccess;
  cuwResult rc = st->api->ctxSetCurrent(st->ctx);
  if (rc != CUW_SUCCESS) {
    char buf[32];
    ret = engFail(ctx->comm, mscclppUnhandledCudaError, "%s proxy: cuCtxSetCurrent: %s", ctx->ops->name,
                  errName(st->api, rc, buf, sizeof(buf)));
  }
  if (st->cpus != NULL) {
    /* a refused binding is not an error: Go logs it from bindErr */
    st->bindErr = pthread_setaffinity_np(pthread_self(), st->cpusSize, (cpu_set_t*)st->cpus);
  }
  __atomic_store_n(&st->bindDone, 1, __ATOMIC_RELEASE);
  return ret;
}

int cudaStatePublishTail(engCtx* ctx, cudaP2PState* st, uint64_t tail)
{
  if (st == NULL) return mscclppInvalidUsage;
  /* hostTail is pinned: the copy reads it when it runs, and a newer tail is
   * always a valid one to publish */
  __atomic_store_n(st->hostTail, tail, __ATOMIC_RELEASE);
  cuwResult rc = st->api->memcpyHtoDAsync(st->devTail, st->hostTail, sizeof(uint64_t), st->tailStream);
  if (rc != CUW_SUCCESS) {
    char buf[32];
    return engFail(ctx->comm, mscclppUnhandledCudaError, "%s proxy: cuMemcpyHtoDAsync of the FIFO tail: %s",
                   ctx->ops->name, errName(st->api, rc, buf, sizeof(buf)));
  }
  return mscclppSuccess;
}

static int p2pThreadInit(engCtx* ctx) { return cudaStateThreadInit(ctx, (cudaP2PState*)ctx->transport); }

static int p2pPublishTail(engCtx* ctx, uint64_t tail)
{
  return cudaStatePublishTail(ctx, (cudaP2PState*)ctx->transport, tail);
}

/* A synchronous copy on one of st's streams with st's context current on the calling thread
 * (the caller's own context is restored). */
static int stageCopy(cudaP2PState* st, cuwStream stream, cuwDevicePtr dst, cuwDevicePtr src, size_t n, int toDevice,
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

int cudaStageToHost(cudaP2PState* st, void* dst, uint64_t src, size_t n, char* err, int errLen)
{
  return stageCopy(st, st->stream, (cuwDevicePtr)(uintptr_t)dst, (cuwDevicePtr)src, n, 0, err, errLen);
}

int cudaStageToDevice(cudaP2PState* st, uint64_t dst, const void* src, size_t n, char* err, int errLen)
{
  /* the tail stream: receiving never waits behind the proxy's own copies */
  return stageCopy(st, st->tailStream, (cuwDevicePtr)dst, (cuwDevicePtr)(uintptr_t)src, n, 1, err, errLen);
}

/* P2P state is the Go side's to free (cuda.FreeP2PState, after the streams are synchronized). */
const engOps cudaP2POps = ENG_OPS("P2P", p2pOp, p2pThreadInit, p2pPublishTail, engOpsNoClose);

const void* cudaP2POpsPtr(void) { return &cudaP2POps; }

int cudaP2PStateNew(const cuwApi* a, cuwContext ctx, const int* cpus, int nCpus, int numaNode, cudaP2PState** out,
                    const char** call)
{
  *out = NULL;
  cudaP2PState* st = (cudaP2PState*)calloc(1, sizeof(*st));
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
  } else if ((rc = cuwPinnedOnNode(a, (void**)&st->hostTail, sizeof(uint64_t) * (1 + CUDA_P2P_FLAG_RING),
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
static cuwResult withCtx(cudaP2PState* st, cuwResult (*fn)(cudaP2PState*, const char**), const char** call)
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
static cuwResult syncStreams(cudaP2PState* st, const char** call)
{
  cuwResult rc = st->api->streamSynchronize(st->tailStream);
  if (rc == CUW_SUCCESS) rc = st->api->streamSynchronize(st->stream);
  if (rc != CUW_SUCCESS) *call = "cuStreamSynchronize";
  return rc;
}

int cudaP2PStateSync(cudaP2PState* st, const char** call)
{
  if (st == NULL) return CUW_SUCCESS;
  return withCtx(st, syncStreams, call);
}

int cudaP2PStateFree(cudaP2PState* st, const char** call)
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

void cudaP2PBindResult(const cudaP2PState* st, int* done, int* err)
{
  *done = __atomic_load_n(&st->bindDone, __ATOMIC_ACQUIRE);
  *err = *done ? st->bindErr : 0;
}
