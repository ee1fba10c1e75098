/*
 * engine.c: host-initiated operations on connections and the host side of
 * the trigger FIFO (see engine.h). In C so that a put + signal costs a
 * function call and a copy, not a call into the Go runtime.
 */
#define _GNU_SOURCE
#include "engine.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backoff.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

engComm* engCommNew(int rank)
{
  engComm* c = (engComm*)calloc(1, sizeof(engComm));
  if (c == NULL) return NULL;
  pthread_mutex_init(&c->lock, NULL);
  c->rank = rank;
  c->waitCfg = (engBackoffCfg){.spin = 4000, .yields = 2000, .sleepMaxUs = 1000};
  c->proxyCfg = (engBackoffCfg){.spin = 1000, .yields = 100, .sleepMaxUs = 200};
  return c;
}

void engCommFree(engComm* c)
{
  if (c == NULL) return;
  pthread_mutex_destroy(&c->lock);
  free(c);
}

int engCommError(engComm* c, char* buf, int len)
{
  pthread_mutex_lock(&c->lock);
  int err = c->asyncErr;
  if (buf != NULL && len > 0) snprintf(buf, (size_t)len, "%s", c->errMsg);
  pthread_mutex_unlock(&c->lock);
  return err;
}

void engCommSetError(engComm* c, int err, const char* msg)
{
  pthread_mutex_lock(&c->lock);
  if (c->asyncErr == 0) {
    snprintf(c->errMsg, sizeof(c->errMsg), "%s", msg);
    __atomic_store_n(&c->asyncErr, err, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&c->lock);
}

void engCtxInit(engCtx* ctx, engComm* comm, const engOps* ops)
{
  memset(ctx, 0, sizeof(*ctx));
  ctx->magic = ENG_CTX_MAGIC;
  ctx->comm = comm;
  ctx->ops = ops;
}

engCtx* engCtxNew(engComm* comm)
{
  engCtx* ctx = NULL;
  if (posix_memalign((void**)&ctx, 64, sizeof(engCtx)) != 0) return NULL;
  engCtxInit(ctx, comm, &engShmOps);
  return ctx;
}

void engCtxFree(engCtx* ctx)
{
  if (ctx == NULL) return;
  ctx->magic = 0;
  free(ctx);
}

/* capi's process-wide last-error text; weak so that the engine links without capi (Go tests). */
extern void capiSetGlobalError(const char* msg) __attribute__((weak));

/* The engine connection behind a device connection; NULL (and the process-wide
 * last error set) when there is none. */
static engConn* connOf(struct mscclppDevConn* dev, const char* fn)
{
  const char* why = NULL;
  engConn* c = NULL;
  if (dev == NULL) {
    why = "conn is NULL";
  } else if (dev->fifo.triggerFifo == NULL || ((engCtx*)(void*)dev->fifo.triggerFifo)->magic != ENG_CTX_MAGIC) {
    why = "not a connection returned by mscclppGetAllDeviceConnections, or its communicator was destroyed";
  } else if (dev->fifo.connId < 0 || dev->fifo.connId >= ENG_MAX_CONNS) {
    why = "fifo.connId out of range";
  } else if ((c = ((engCtx*)(void*)dev->fifo.triggerFifo)->conns[dev->fifo.connId]) == NULL) {
    why = "connection not set up: call mscclppConnectionSetup first";
  }
  if (why != NULL && capiSetGlobalError != NULL) {
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: %s", fn, why);
    capiSetGlobalError(msg);
  }
  return c;
}

/* A copy that bypasses the cache with non-temporal stores: for large puts the
 * destination is the peer's, and pulling it through this core's cache only
 * evicts useful lines. glibc switches to such stores only far above the L3
 * size (192 MiB here), and from there its own copy is faster than this one:
 * measured here, memcpy 5.6 / this 7.3 GB/s at 16 MiB, 7.3 / 6.4 at 256 MiB. */
static void copyStreaming(char* dst, const char* src, size_t n)
{
#if defined(__SSE2__)
  size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (head > n) head = n;
  memcpy(dst, src, head);
  dst += head, src += head, n -= head;
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)src), b = _mm_loadu_si128((const __m128i*)(src + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(src + 32)), d = _mm_loadu_si128((const __m128i*)(src + 48));
    _mm_stream_si128((__m128i*)dst, a);
    _mm_stream_si128((__m128i*)(dst + 16), b);
    _mm_stream_si128((__m128i*)(dst + 32), c);
    _mm_stream_si128((__m128i*)(dst + 48), d);
  }
  _mm_sfence(); /* the streamed data is visible before any later signal store */
#endif
  memcpy(dst, src, n);
}

int engWrite(engComm* comm, const engReg* r, uint64_t off, const void* src, uint64_t size, char* err, int errLen)
{
  if (r->mapped != NULL) {
    if (comm != NULL && comm->streamBytes != 0 && size >= comm->streamBytes && size < comm->streamMaxBytes)
      copyStreaming(r->mapped + off, (const char*)src, (size_t)size);
    else
      memcpy(r->mapped + off, src, size);
    return mscclppSuccess;
  }
  uint64_t done = 0;
  while (done < size) {
    struct iovec l = {(void*)((const char*)src + done), (size_t)(size - done)};
    struct iovec rv = {(void*)(uintptr_t)(r->addr + off + done), (size_t)(size - done)};
    ssize_t n = process_vm_writev(r->pid, &l, 1, &rv, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      snprintf(err, (size_t)errLen, "process_vm_writev of %llu bytes into pid %d failed: %s",
               (unsigned long long)(size - done), r->pid, strerror(e));
      return (e == ESRCH) ? mscclppRemoteError : mscclppSystemError;
    }
    if (n == 0) {
      snprintf(err, (size_t)errLen, "process_vm_writev into pid %d made no progress", r->pid);
      return mscclppSystemError;
    }
    done += (uint64_t)n;
  }
  return mscclppSuccess;
}

int engConnFail(engConn* c, int code, const char* what)
{
  char msg[512];
  snprintf(msg, sizeof(msg), "connection %d (rank %d, tag %d): %s", c->connId, c->peerRank, c->tag, what);
  engCommSetError(c->comm, code, msg);
  return code;
}

int engCheckPut(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff, uint64_t size,
                const engReg** src, const engReg** dst)
{
  char what[400];
  if (c->nLocal <= 0 || c->nRemote <= 0 || srcHandle >= (uint64_t)c->nLocal || dstHandle >= (uint64_t)c->nRemote) {
    snprintf(what, sizeof(what), "put from handle %llu to handle %llu: only %d local and %d remote handles",
             (unsigned long long)srcHandle, (unsigned long long)dstHandle, c->nLocal, c->nRemote);
    return engConnFail(c, mscclppInvalidArgument, what);
  }
  const engReg* s = &c->local[srcHandle];
  const engReg* d = &c->remote[dstHandle];
  if (srcOff > s->size || size > s->size - srcOff) {
    snprintf(what, sizeof(what), "put reads %llu bytes at offset %llu of local handle %llu, which has %llu bytes",
             (unsigned long long)size, (unsigned long long)srcOff, (unsigned long long)srcHandle,
             (unsigned long long)s->size);
    return engConnFail(c, mscclppInvalidArgument, what);
  }
  if (dstOff > d->size || size > d->size - dstOff) {
    snprintf(what, sizeof(what), "put writes %llu bytes at offset %llu of remote handle %llu, which has %llu bytes",
             (unsigned long long)size, (unsigned long long)dstOff, (unsigned long long)dstHandle,
             (unsigned long long)d->size);
    return engConnFail(c, mscclppInvalidArgument, what);
  }
  *src = s;
  *dst = d;
  return mscclppSuccess;
}

int engOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
          uint64_t size)
{
  char what[400];
  if (type & mscclppData) {
    const engReg *s, *d;
    int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &s, &d);
    if (rc != mscclppSuccess) return rc;
    if (size > 0) {
      int rc = engWrite(c->comm, d, dstOff, s->mapped + srcOff, size, what, sizeof(what));
      if (rc != mscclppSuccess) return engConnFail(c, rc, what);
    }
  }
  if (type & mscclppFlag) {
    if (c->remoteProxyEpoch == NULL) return engConnFail(c, mscclppInvalidUsage, "signal before connection setup");
    /* Send the number of signals completed on this connection, not the device
     * epoch: a Flag the proxy serves late must not announce signals whose
     * triggers (and data) are still queued behind it. Each signal increments
     * the epoch once and sends one Flag, so the two agree once all are served.
     * The acq_rel count orders every counted signal's data before the value;
     * the max keeps the peer's epoch monotonic when signallers race. */
    uint64_t v = __atomic_add_fetch(&c->signalsDone, 1, __ATOMIC_ACQ_REL);
    uint64_t cur = v - 1; /* the usual previous value: the first CAS takes the line once */
    while (cur < v &&
           !__atomic_compare_exchange_n(c->remoteProxyEpoch, &cur, v, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
      ;
  }
  /* Sync: every operation above completed before returning; nothing is left to flush. */
  return mscclppSuccess;
}

const engOps engShmOps = {"SHM", engOp, NULL, NULL};

static engCtx* hostCtxOf(struct mscclppDevConn* conn, const char* fn);

/* A host Flag or Sync covers every earlier put, including triggers pushed into the
 * FIFO: wait until the proxy has served everything pushed before this call. */
static int drainFifo(engConn* c)
{
  engCtx* ctx = c->ctx;
  if (ctx == NULL || ctx->devHead != NULL) return mscclppSuccess;
  uint64_t head = __atomic_load_n(&ctx->head, __ATOMIC_ACQUIRE);
  if (__atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE) >= head) return mscclppSuccess;
  engBackoff b = {0, 0};
  while (__atomic_load_n(&ctx->tail, __ATOMIC_ACQUIRE) < head) {
    if (!__atomic_load_n(&ctx->running, __ATOMIC_ACQUIRE))
      return engConnFail(c, mscclppInvalidUsage,
                    "signal or flush with triggers queued in the FIFO and no proxy running (call mscclppProxyLaunch)");
    engBackoffStep(&b, &c->comm->waitCfg);
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppConnOp(struct mscclppDevConn* conn, uint64_t type, uint64_t dstDataOffset,
                              uint64_t srcDataOffset, uint64_t dataSize)
{
  engConn* c = connOf(conn, "mscclppConnOp");
  if (c == NULL) return mscclppInvalidUsage;
  /* a signal sends the epoch host threads cannot count on a CUDA-mode connection */
  if ((type & mscclppFlag) && c->ctx->devHead != NULL && hostCtxOf(conn, "mscclppConnOp") == NULL)
    return mscclppInvalidUsage;
  if (type & (mscclppFlag | mscclppSync)) {
    int rc = drainFifo(c);
    if (rc != mscclppSuccess) return (mscclppResult_t)rc;
  }
  return (mscclppResult_t)c->ops->op(c, type, 1, dstDataOffset, 1, srcDataOffset, dataSize);
}

mscclppResult_t mscclppConnPutHandle(struct mscclppDevConn* conn, mscclppBufferHandle_t dst, uint64_t dstDataOffset,
                                     mscclppBufferHandle_t src, uint64_t srcDataOffset, uint64_t dataSize)
{
  engConn* c = connOf(conn, "mscclppConnPutHandle");
  if (c == NULL) return mscclppInvalidUsage;
  return (mscclppResult_t)c->ops->op(c, mscclppData, dst, dstDataOffset, src, srcDataOffset, dataSize);
}

int engProcessGone(int pid)
{
  if (pid <= 0) return 0;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 1;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* The host-mode context behind conn; NULL, with the process-wide last error set, for a
 * connection whose counters live in device memory (CUDA mode), which host threads
 * must not touch. */
static engCtx* hostCtxOf(struct mscclppDevConn* conn, const char* fn)
{
  engCtx* ctx = (conn != NULL && conn->fifo.triggerFifo != NULL) ? (engCtx*)(void*)conn->fifo.triggerFifo : NULL;
  const char* why = NULL;
  if (ctx == NULL || ctx->magic != ENG_CTX_MAGIC)
    why = "not a connection returned by mscclppGetAllDeviceConnections, or its communicator was destroyed";
  else if (ctx->devHead != NULL)
    why = "this connection runs in CUDA mode: its counters are in device memory, so its methods are for device code";
  if (why == NULL) return ctx;
  if (capiSetGlobalError != NULL) {
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: %s", fn, why);
    capiSetGlobalError(msg);
  }
  return NULL;
}

void mscclppConnEpochIncrement(struct mscclppDevConn* conn)
{
  if (hostCtxOf(conn, "mscclppConnEpochIncrement") == NULL) return;
  __atomic_fetch_add(&conn->localSignalEpochId->device, 1, __ATOMIC_RELAXED);
}

static mscclppResult_t waitFor(engConn* c, struct mscclppDevConn* conn, int64_t timeoutMs);

mscclppResult_t mscclppConnWaitNext(struct mscclppDevConn* conn, int64_t timeoutMs)
{
  if (hostCtxOf(conn, "mscclppConnWaitNext") == NULL) return mscclppInvalidUsage;
  engConn* c = connOf(conn, "mscclppConnWaitNext");
  if (c == NULL) return mscclppInvalidUsage;
  *conn->waitEpochId += 1;
  return waitFor(c, conn, timeoutMs);
}

mscclppResult_t mscclppConnWait(struct mscclppDevConn* conn, int64_t timeoutMs)
{
  if (hostCtxOf(conn, "mscclppConnWait") == NULL) return mscclppInvalidUsage;
  engConn* c = connOf(conn, "mscclppConnWait");
  if (c == NULL) return mscclppInvalidUsage;
  return waitFor(c, conn, timeoutMs);
}

/* Waits until conn's proxy epoch reaches *waitEpochId (see mscclppConnWait). */
static mscclppResult_t waitFor(engConn* c, struct mscclppDevConn* conn, int64_t timeoutMs)
{
  volatile uint64_t* proxy = &conn->localSignalEpochId->proxy;
  uint64_t want = *conn->waitEpochId;
  if (__atomic_load_n(proxy, __ATOMIC_ACQUIRE) >= want) return mscclppSuccess;
  engBackoff b = {0, 0};
  uint64_t start = engNowNs(), lastCheck = 0;
  for (;;) {
    if (__atomic_load_n(proxy, __ATOMIC_ACQUIRE) >= want) return mscclppSuccess;
    if (engBackoffStep(&b, &c->comm->waitCfg)) {
      uint64_t now = engNowNs();
      if (timeoutMs >= 0 && now - start >= (uint64_t)timeoutMs * 1000000ull) return mscclppInProgress;
      if (now - lastCheck > 5000000ull) { /* every 5 ms */
        lastCheck = now;
        /* only a remote failure ends the wait: a rejected put of this rank's does not */
        if (__atomic_load_n(&c->comm->asyncErr, __ATOMIC_ACQUIRE) == mscclppRemoteError) return mscclppRemoteError;
        if (engProcessGone(c->peerPid)) {
          char msg[200];
          snprintf(msg, sizeof(msg), "rank %d (pid %d) exited while rank %d waited for its signal", c->peerRank,
                   c->peerPid, c->comm->rank);
          engCommSetError(c->comm, mscclppRemoteError, msg);
          return mscclppRemoteError;
        }
      }
    }
  }
}

uint64_t mscclppFifoPush(struct mscclppConcurrentFifo* fifo, uint64_t type, uint64_t dstDataOffset,
                         uint64_t srcDataOffset, uint64_t dataSize)
{
  engCtx* ctx = (engCtx*)(void*)fifo->triggerFifo;
  const engBackoffCfg* cfg = &ctx->comm->waitCfg;
  if (MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize) == 0) {
    /* an empty put: it would read as an empty slot, so push it as a marker that moves no data */
    type &= ~(uint64_t)mscclppData;
    dataSize = 1;
  }
  uint64_t h = __atomic_fetch_add(fifo->triggerFifoHead, 1, __ATOMIC_RELAXED);
  engBackoff b = {0, 0};
  while (h >= MSCCLPP_PROXY_FIFO_SIZE + __atomic_load_n(fifo->triggerFifoTail, __ATOMIC_ACQUIRE))
    engBackoffStep(&b, cfg);
  mscclppTrigger* slot = &fifo->triggerFifo[h % MSCCLPP_PROXY_FIFO_SIZE];
  while (__atomic_load_n(&slot->value[0], __ATOMIC_ACQUIRE) != 0) engBackoffStep(&b, cfg);
  __atomic_store_n(&slot->value[1], MSCCLPP_TRIGGER_WORD1(type, fifo->connId, dstDataOffset), __ATOMIC_RELAXED);
  __atomic_store_n(&slot->value[0], MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize), __ATOMIC_RELEASE);
  return h;
}

void mscclppFifoWaitServed(struct mscclppConcurrentFifo* fifo, uint64_t seq)
{
  engCtx* ctx = (engCtx*)(void*)fifo->triggerFifo;
  mscclppTrigger* slot = &fifo->triggerFifo[seq % MSCCLPP_PROXY_FIFO_SIZE];
  engBackoff b = {0, 0};
  while (__atomic_load_n(&slot->value[0], __ATOMIC_ACQUIRE) != 0 &&
         __atomic_load_n(fifo->triggerFifoTail, __ATOMIC_ACQUIRE) <= seq)
    engBackoffStep(&b, &ctx->comm->waitCfg);
}
