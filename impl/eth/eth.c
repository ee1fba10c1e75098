/*
 * eth.c: the Ethernet transport's ops table, its send side, connection start,
 * fences and close (see eth.h); sends go through socket.c, reading is ethread.c's.
 *
 * Liveness: a lost link or a stopped peer must not hang anyone. Every socket
 * gets SO_SNDTIMEO and SO_RCVTIMEO of one tick (pingNs; SO_RCVTIMEO is a wait's
 * 1 ms period where waits read the socket, ethread.c), so no send or receive
 * blocks longer than that; a send that makes no progress for deadNs (the
 * bootstrap timeout) fails, and the reader (the receive thread, woken every
 * tick, or a wait reading the socket) sends a PING when nothing else went out
 * for a tick, at every tick and after every frame that came in (a rank that
 * only receives must still say it is alive), and declares the peer
 * unreachable when nothing at all (data, signal or PING) came in for deadNs.
 * Either way the connection is marked dead and its socket shut down, which
 * releases every sender at once, and the communicator records
 * mscclppRemoteError naming the peer, which ends every wait on it.
 */
#define _GNU_SOURCE
#include "eth.h"

#include "../engine/backoff.h"
#include "../../cuda/calls.h" /* cuda/: the CUDA-mode proxy state and its staging copies (linked into the same library) */
#include "../cudaproxy/cudaproxy.h" /* the CUDA-mode proxy thread's setup and tail publication */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

struct ethCtx* ethCtxNew(struct cudaProxyState* cuda)
{
  struct ethCtx* e = (struct ethCtx*)calloc(1, sizeof(struct ethCtx));
  if (e != NULL) e->cuda = cuda;
  return e;
}

/* A put from host memory: header and payload in one sendmsg and, with a signal value (sig), the
 * count too (ETH_DATASIG: one frame, so the peer's receive thread wakes once for both). */
static int sendPut(engConn* c, ethConn* s, uint64_t dstHandle, uint64_t dstOff, char* src, uint64_t size, int sig,
                   uint64_t count)
{
  unsigned char hdr[ETH_HDR_BYTES];
  struct iovec iov[3] = {{hdr, ETH_HDR_BYTES}, {src, (size_t)size}, {&count, ETH_SIG_BYTES}};
  ethPutHeader(hdr, sig ? ETH_DATASIG : ETH_DATA, dstHandle, dstOff, size);
  pthread_mutex_lock(&s->sendLock);
  int err = ethSendAll(s, iov, sig ? 3 : 2);
  pthread_mutex_unlock(&s->sendLock);
  /* Sync: the send returned, so the source may be reused */
  return err != 0 ? ethSendFailed(c, s, err) : mscclppSuccess;
}

/* A put of size bytes (size > 0), with its signal value when sig: host memory in one frame, device
 * memory staged (stage.c) and then the signal alone. */
static int ethPut(engConn* c, ethConn* s, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                  uint64_t size, int sig, uint64_t value)
{
  const engReg *src, *dst;
  int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &src, &dst);
  if (rc != mscclppSuccess) return rc;
  if (src->mapped != NULL) return sendPut(c, s, dstHandle, dstOff, src->mapped + srcOff, size, sig, value);
  unsigned char hdr[ETH_HDR_BYTES];
  ethPutHeader(hdr, ETH_DATA, dstHandle, dstOff, size);
  rc = ethSendStaged(c, s, hdr, src->addr + srcOff, size);
  return rc != mscclppSuccess || !sig ? rc : c->ops->sendSignal(c, value);
}

/* The data part: a put (Sync: every send returned, so the sources may be reused; nothing else to
 * wait for). */
static int ethOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                 uint64_t size)
{
  ethConn* s = connState(c);
  if (s == NULL) return engConnFail(c, mscclppInvalidUsage, "Ethernet operation before connection setup");
  if ((type & mscclppData) && size > 0) return ethPut(c, s, dstHandle, dstOff, srcHandle, srcOff, size, 0, 0);
  return mscclppSuccess;
}

/* The signal: a FLAG frame with value, behind every earlier frame of the stream. */
static int ethSignal(engConn* c, uint64_t value)
{
  ethConn* s = connState(c);
  if (s == NULL) return engConnFail(c, mscclppInvalidUsage, "Ethernet operation before connection setup");
  unsigned char hdr[ETH_HDR_BYTES];
  ethPutHeader(hdr, ETH_FLAG, value, 0, 0);
  struct iovec iov[1] = {{hdr, ETH_HDR_BYTES}};
  pthread_mutex_lock(&s->sendLock);
  int err = ethSendAll(s, iov, 1);
  pthread_mutex_unlock(&s->sendLock);
  return err != 0 ? ethSendFailed(c, s, err) : mscclppSuccess;
}

/* A put and its signal: one frame from host memory (every put with a signal comes here:
 * putSignalMax is unbounded, as the stream's lock is held across a frame anyway). */
static int ethPutSignal(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                        uint64_t size, uint64_t value)
{
  ethConn* s = connState(c);
  if (s == NULL) return engConnFail(c, mscclppInvalidUsage, "Ethernet operation before connection setup");
  return ethPut(c, s, dstHandle, dstOff, srcHandle, srcOff, size, 1, value);
}

int ethAddReg(struct ethCtx* e, int connId, void* ptr, uint64_t size)
{
  if (e == NULL || connId < 0 || connId >= ENG_MAX_CONNS) return -1;
  if (e->regs[connId] == NULL && (e->regs[connId] = (ethRegs*)calloc(1, sizeof(ethRegs))) == NULL) return -1;
  ethRegs* r = e->regs[connId];
  int i = r->n;
  if (i >= ETH_MAX_REGS) return -1;
  engReg** ch = &r->chunk[i / ETH_REG_CHUNK];
  if (*ch == NULL && (*ch = (engReg*)calloc(ETH_REG_CHUNK, sizeof(engReg))) == NULL) return -1;
  engReg* g = &(*ch)[i % ETH_REG_CHUNK];
  g->magic = ENG_REG_MAGIC;
  g->mapped = (char*)ptr;
  g->addr = (uint64_t)(uintptr_t)ptr;
  g->size = size;
  __atomic_store_n(&r->n, i + 1, __ATOMIC_RELEASE);
  return i;
}

int ethWriteReg(engConn* c, uint64_t idx, uint64_t off, const void* src, uint64_t size)
{
  ethConn* s = connState(c);
  if (s == NULL) return engConnFail(c, mscclppInvalidUsage, "Ethernet registered write before connection setup");
  unsigned char hdr[ETH_HDR_BYTES];
  ethPutHeader(hdr, ETH_REG, idx, off, size);
  struct iovec iov[2] = {{hdr, ETH_HDR_BYTES}, {(void*)src, (size_t)size}};
  pthread_mutex_lock(&s->sendLock);
  int err = ethSendAll(s, iov, 2);
  pthread_mutex_unlock(&s->sendLock);
  return err != 0 ? ethSendFailed(c, s, err) : mscclppSuccess;
}

/* The tick of a connection whose peer is declared unreachable after deadMs: an eighth of it
 * (pings at most every quarter), at least 10 ms, at most 500 ms (so a loss is reported within
 * deadMs + 0.5 s). */
static uint64_t tickNs(uint64_t deadNs)
{
  uint64_t t = deadNs / 8;
  if (t < 10000000ull) t = 10000000ull;
  if (t > 500000000ull) t = 500000000ull;
  return t;
}

int ethConnStart(engConn* c, int fd, void* sendStage, void* recvStage, uint64_t stageBytes, int64_t deadMs)
{
  struct ethCtx* e = c == NULL || c->ctx == NULL ? NULL : ctxState(c);
  if (e == NULL || c->connId < 0 || c->connId >= ENG_MAX_CONNS || e->conns[c->connId] != NULL)
    return mscclppInternalError;
  if (e->cuda != NULL && (sendStage == NULL || recvStage == NULL || stageBytes < 16)) return mscclppInternalError;
  ethConn* s = (ethConn*)calloc(1, sizeof(ethConn));
  if (s == NULL) return mscclppSystemError;
  if (ethConnStreamsNew(e, s) != mscclppSuccess) {
    free(s);
    return mscclppUnhandledCudaError;
  }
  s->fd = fd;
  s->c = c;
  s->sendStage = (char*)sendStage;
  s->recvStage = (char*)recvStage;
  s->stageBytes = stageBytes;
  s->deadNs = (uint64_t)(deadMs > 0 ? deadMs : 1) * 1000000ull;
  s->pingNs = tickNs(s->deadNs);
  s->lastSendNs = s->lastRecvNs = engNowNs();
  s->direct = e->cuda == NULL; /* host mode: waits may read frames (ethread.c); set before the receive thread looks */
  struct timeval tv = {.tv_sec = (time_t)(s->pingNs / 1000000000ull),
                       .tv_usec = (suseconds_t)(s->pingNs % 1000000000ull / 1000)};
  /* waits that read the socket block in recv for ETH_WAIT_POLL_NS at most (ethread.c) */
  struct timeval rtv = s->direct ? (struct timeval){.tv_sec = 0, .tv_usec = ETH_WAIT_POLL_NS / 1000} : tv;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rtv, sizeof(rtv)) != 0) {
    ethConnStreamsFree(e, s);
    free(s);
    return mscclppSystemError;
  }
  pthread_mutex_init(&s->sendLock, NULL);
  if (pthread_create(&s->rx, NULL, ethRxMain, s) != 0) {
    pthread_mutex_destroy(&s->sendLock);
    ethConnStreamsFree(e, s);
    free(s);
    return mscclppSystemError;
  }
  s->rxStarted = 1;
  e->conns[c->connId] = s;
  return mscclppSuccess;
}

/* Whether a connection of e was declared unreachable (err says which). */
static int anyDead(struct ethCtx* e, char* err, int errLen)
{
  for (int i = 0; i < ENG_MAX_CONNS; i++) {
    ethConn* s = e->conns[i];
    if (s != NULL && __atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) {
      snprintf(err, (size_t)errLen, "rank %d is unreachable: no fence from it or the other peers is awaited",
               s->c->peerRank);
      return 1;
    }
  }
  return 0;
}

int ethFence(struct ethCtx* e, uint64_t seq, int64_t timeoutMs, char* err, int errLen)
{
  unsigned char hdr[ETH_HDR_BYTES];
  ethPutHeader(hdr, ETH_FENCE, seq, 0, 0);
  for (int i = 0; i < ENG_MAX_CONNS; i++) {
    ethConn* s = e->conns[i];
    if (s == NULL) continue;
    struct iovec iov[1] = {{hdr, ETH_HDR_BYTES}};
    pthread_mutex_lock(&s->sendLock);
    int rc = ethSendAll(s, iov, 1);
    pthread_mutex_unlock(&s->sendLock);
    if (rc != 0) {
      snprintf(err, (size_t)errLen, "fence to rank %d: %s", s->c->peerRank, strerror(rc));
      return mscclppRemoteError;
    }
  }
  engWait w;
  engWaitInit(&w, timeoutMs);
  engBackoffCfg cfg = {.spin = 64, .yields = 256, .sleepMaxUs = 1000};
  for (int i = 0; i < ENG_MAX_CONNS; i++) {
    ethConn* s = e->conns[i];
    if (s == NULL) continue;
    while (__atomic_load_n(&s->fenceSeen, __ATOMIC_ACQUIRE) < seq) {
      if (__atomic_load_n(&s->c->peerClosed, __ATOMIC_ACQUIRE)) {
        snprintf(err, (size_t)errLen, "rank %d %s before its fence", s->c->peerRank,
                 s->dead ? "became unreachable" : "closed its connection");
        return mscclppRemoteError;
      }
      /* a peer declared unreachable will send no fence: none of this context's will matter */
      int st = engWaitStep(&w, &cfg);
      if ((st == ENG_WAIT_SLOW || st == ENG_WAIT_TIMEOUT) && anyDead(e, err, errLen)) return mscclppRemoteError;
      if (st == ENG_WAIT_TIMEOUT) {
        snprintf(err, (size_t)errLen, "rank %d sent no fence within %lld ms", s->c->peerRank, (long long)timeoutMs);
        return mscclppRemoteError;
      }
    }
  }
  return mscclppSuccess;
}

void ethAbortConn(ethConn* s)
{
  if (s == NULL || __atomic_load_n(&s->closing, __ATOMIC_ACQUIRE)) return;
  __atomic_store_n(&s->closing, 1, __ATOMIC_RELEASE);
  /* at a frame boundary (nobody holds the send lock) a goodbye ends the stream cleanly; a sender
   * inside a frame is released by the shutdown, and the peer sees the frame cut: RemoteError */
  if (pthread_mutex_trylock(&s->sendLock) == 0) {
    unsigned char hdr[ETH_HDR_BYTES];
    ethPutHeader(hdr, ETH_BYE, 0, 0, 0);
    (void)send(s->fd, hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_DONTWAIT); /* best effort */
    shutdown(s->fd, SHUT_WR);
    pthread_mutex_unlock(&s->sendLock);
  } else {
    shutdown(s->fd, SHUT_WR);
  }
}

void ethAbort(struct ethCtx* e)
{
  if (e == NULL) return;
  for (int i = 0; i < ENG_MAX_CONNS; i++) ethAbortConn(e->conns[i]);
}

/* Closes every connection's socket and joins its receive thread, then frees the state. */
static void ethClose(engCtx* ctx)
{
  struct ethCtx* e = (struct ethCtx*)ctx->transport;
  if (e == NULL) return;
  ethAbort(e); /* a goodbye on every connection, unless ethAbort said it already */
  for (int i = 0; i < ENG_MAX_CONNS; i++) {
    ethConn* s = e->conns[i];
    if (s == NULL) continue;
    shutdown(s->fd, SHUT_RDWR);
    ethReaderEnd(s); /* a receive thread parked while a wait read wakes and exits */
    if (s->rxStarted) pthread_join(s->rx, NULL);
    ethConnStreamsFree(e, s);
    close(s->fd);
    pthread_mutex_destroy(&s->sendLock);
    free(s);
    e->conns[i] = NULL;
  }
  for (int i = 0; i < ENG_MAX_CONNS; i++) {
    if (e->regs[i] == NULL) continue;
    for (int k = 0; k < ETH_MAX_REGS / ETH_REG_CHUNK; k++) free(e->regs[i]->chunk[k]);
    free(e->regs[i]);
  }
  free(e);
  ctx->transport = NULL;
}

/* In CUDA mode the proxy thread runs in the GPU's context and publishes its tail to the device. */
static int ethThreadInit(engCtx* ctx)
{
  struct ethCtx* e = (struct ethCtx*)ctx->transport;
  return (e != NULL && e->cuda != NULL) ? cudaProxyStateThreadInit(ctx, e->cuda) : mscclppSuccess;
}

static int ethPublishTail(engCtx* ctx, uint64_t tail)
{
  struct ethCtx* e = (struct ethCtx*)ctx->transport;
  return (e != NULL && e->cuda != NULL) ? cudaProxyStatePublishTail(ctx, e->cuda, tail) : mscclppSuccess;
}

/* Host waits read the socket themselves while no other thread does (ethWaitPoll); otherwise
 * the receive thread delivers the signals and wakes a wait asleep on the epoch (rxFlag; eth.go
 * installs the sleeper count), so waits sleep at once (ENG_WAIT_SLEEP): a spinning or yielding
 * wait would keep the CPU the receive thread needs. CUDA-mode connections take no host waits. */
const engOps ethOps = {
    .name = "Ethernet",
    .op = ethOp,
    .sendSignal = ethSignal,
    .putSignal = ethPutSignal,
    .putSignalMax = UINT64_MAX,
    .waitPoll = ethWaitPoll,
    .waitStyle = ENG_WAIT_SLEEP,
    .opsComplete = 1,
    .threadInit = ethThreadInit,
    .publishTail = ethPublishTail,
    .close = ethClose,
};
