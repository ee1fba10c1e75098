/*
 * eth.c: the Ethernet transport's ops table and receive threads (see eth.h).
 *
 * Liveness: a lost link or a stopped peer must not hang anyone. Every socket
 * gets SO_SNDTIMEO and SO_RCVTIMEO of one tick (pingNs), so no send or receive
 * blocks longer than that; a send that makes no progress for deadNs (the
 * bootstrap timeout) fails, and the receive thread, woken every tick, sends a
 * PING when nothing else went out for a tick and declares the peer
 * unreachable when nothing at all (data, signal or PING) came in for deadNs.
 * Either way the connection is marked dead and its socket shut down, which
 * releases every sender at once, and the communicator records
 * mscclppRemoteError naming the peer, which ends every wait on it.
 */
#define _GNU_SOURCE
#include "eth.h"
#include "ethwire.h"

#include "backoff.h"

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

typedef struct ethConn {
  int fd;
  pthread_mutex_t sendLock; /* one message at a time on the socket */
  pthread_t rx;
  int rxStarted;
  volatile int closing; /* set by close: EOF and errors from here on are expected */
  volatile int peerBye; /* the peer said it closes on purpose */
  uint64_t fenceSeen;   /* the last fence number received */
  char* sendStage;      /* CUDA mode: pinned buffers device memory travels through */
  char* recvStage;
  uint64_t stageBytes;
  engConn* c;
  uint64_t deadNs;     /* no progress (send) or nothing received for this long: the peer is unreachable */
  uint64_t pingNs;     /* the tick: a PING goes out when nothing else did for this long */
  uint64_t lastSendNs; /* atomics: when a send last made progress, when a byte last came in */
  uint64_t lastRecvNs;
  volatile int dead; /* declared unreachable: the socket is shut down, every send fails at once */
} ethConn;

typedef struct ethRegs {
  engReg* chunk[ETH_MAX_REGS / ETH_REG_CHUNK];
  int n; /* published with release after the entry is filled */
} ethRegs;

struct ethCtx {
  ethConn* conns[ENG_MAX_CONNS];
  ethRegs* regs[ENG_MAX_CONNS]; /* mscclppRegisterBuffer registrations by connId, or NULL */
  struct cudaP2PState* cuda; /* CUDA mode, else NULL */
};

/* cuda/calls.h (the cuda package, linked into the same library) */
int cudaStateThreadInit(struct engCtx* ctx, struct cudaP2PState* st);
int cudaStatePublishTail(struct engCtx* ctx, struct cudaP2PState* st, uint64_t tail);
int cudaStageToHost(struct cudaP2PState* st, void* dst, uint64_t src, size_t n, char* err, int errLen);
int cudaStageToDevice(struct cudaP2PState* st, uint64_t dst, const void* src, size_t n, char* err, int errLen);

struct ethCtx* ethCtxNew(struct cudaP2PState* cuda)
{
  struct ethCtx* e = (struct ethCtx*)calloc(1, sizeof(struct ethCtx));
  if (e != NULL) e->cuda = cuda;
  return e;
}

static struct ethCtx* ctxState(engConn* c) { return (struct ethCtx*)c->ctx->transport; }

static ethConn* connState(engConn* c)
{
  struct ethCtx* e = ctxState(c);
  return e == NULL ? NULL : e->conns[c->connId];
}

/* Sends every byte of iov (advancing it); 0, or the errno that stopped it: ETIMEDOUT when
 * nothing went out for deadMs, EHOSTUNREACH once the connection is declared dead, ESHUTDOWN when
 * the context is closing. A blocked sendmsg returns every tick (SO_SNDTIMEO) to look. */
static int sendAll(ethConn* s, struct iovec* iov, int n)
{
  uint64_t progress = engNowNs();
  while (n > 0) {
    if (__atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) return EHOSTUNREACH;
    ssize_t k = sendmsg(s->fd, &(struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)n}, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (__atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) return EHOSTUNREACH; /* shut down by markDead */
      if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
      if (s->closing || __atomic_load_n(&s->c->ctx->closing, __ATOMIC_ACQUIRE)) return ESHUTDOWN;
      if (engNowNs() - progress >= s->deadNs) return ETIMEDOUT;
      continue;
    }
    progress = engNowNs();
    __atomic_store_n(&s->lastSendNs, progress, __ATOMIC_RELAXED);
    while (n > 0 && (size_t)k >= iov->iov_len) {
      k -= (ssize_t)iov->iov_len;
      iov++, n--;
    }
    if (n > 0) {
      iov->iov_base = (char*)iov->iov_base + k;
      iov->iov_len -= (size_t)k;
    }
  }
  return 0;
}

static void putHeader(unsigned char* h, uint32_t type, uint64_t a, uint64_t b, uint64_t c);

/* The receive thread's tick: ETIMEDOUT when nothing came in for deadMs; else a PING when
 * nothing went out for a tick and the socket has room (never waiting for the send lock: its
 * holder is sending, and a stuck one fails by itself). */
static int rxTick(ethConn* s)
{
  uint64_t now = engNowNs();
  if (now - __atomic_load_n(&s->lastRecvNs, __ATOMIC_RELAXED) >= s->deadNs) return ETIMEDOUT;
  if (now - __atomic_load_n(&s->lastSendNs, __ATOMIC_RELAXED) < s->pingNs) return 0;
  if (pthread_mutex_trylock(&s->sendLock) != 0) return 0;
  struct pollfd p = {.fd = s->fd, .events = POLLOUT};
  if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT)) {
    unsigned char hdr[ETH_HDR_BYTES];
    putHeader(hdr, ETH_PING, 0, 0, 0);
    struct iovec iov[1] = {{hdr, ETH_HDR_BYTES}};
    (void)sendAll(s, iov, 1); /* a failure shows on the receive side */
  }
  pthread_mutex_unlock(&s->sendLock);
  return 0;
}

/* Reads exactly n bytes; 0, -1 on a clean end of stream before the first byte, else an errno
 * (ETIMEDOUT: nothing came in for deadMs). A blocked recv returns every tick (SO_RCVTIMEO). */
static int recvAll(ethConn* s, void* buf, size_t n)
{
  size_t got = 0;
  while (got < n) {
    ssize_t k = recv(s->fd, (char*)buf + got, n - got, MSG_WAITALL);
    if (k == 0) return got == 0 ? -1 : ECONNRESET;
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
      int rc = rxTick(s);
      if (rc != 0) return rc;
      continue;
    }
    got += (size_t)k;
    __atomic_store_n(&s->lastRecvNs, engNowNs(), __ATOMIC_RELAXED);
    if (got < n && rxTick(s) != 0) return ETIMEDOUT; /* a long receive still pings */
  }
  return 0;
}

/* Declares the connection dead: later sends fail at once, and a sender blocked now is
 * released by the shutdown. */
static void markDead(ethConn* s)
{
  __atomic_store_n(&s->dead, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&s->c->peerClosed, 1, __ATOMIC_RELEASE);
  shutdown(s->fd, SHUT_RDWR);
}

static void putHeader(unsigned char* h, uint32_t type, uint64_t a, uint64_t b, uint64_t c)
{
  uint32_t m = ETH_MAGIC;
  memcpy(h, &m, 4);
  memcpy(h + 4, &type, 4);
  memcpy(h + 8, &a, 8);
  memcpy(h + 16, &b, 8);
  memcpy(h + 24, &c, 8);
}

static int sendFailed(engConn* c, ethConn* s, int err)
{
  if (s->closing || err == ESHUTDOWN) return mscclppInvalidUsage;
  char what[200];
  if (err == ETIMEDOUT)
    snprintf(what, sizeof(what),
             "rank %d is unreachable: sending to it made no progress for %llu ms (link down, or the peer stopped)",
             c->peerRank, (unsigned long long)(s->deadNs / 1000000ull));
  else if (err == EHOSTUNREACH)
    snprintf(what, sizeof(what), "rank %d is unreachable: its connection was declared dead", c->peerRank);
  else
    snprintf(what, sizeof(what), "sending to rank %d over TCP failed: %s", c->peerRank, strerror(err));
  int rc = engConnFail(c, mscclppRemoteError, "%s", what);
  markDead(s);
  return rc;
}

/* A put from device memory: the header, then the payload chunk by chunk through the pinned
 * staging buffer (copied from the device, then sent), all under the send lock. */
static int sendStaged(engConn* c, ethConn* s, unsigned char* hdr, uint64_t src, uint64_t size)
{
  struct cudaP2PState* cuda = ctxState(c)->cuda;
  if (cuda == NULL || s->sendStage == NULL)
    return engConnFail(c, mscclppInvalidUsage, "Ethernet put from memory the host cannot read (not CUDA mode)");
  char what[300];
  int rc = mscclppSuccess;
  pthread_mutex_lock(&s->sendLock);
  struct iovec iov[1] = {{hdr, ETH_HDR_BYTES}};
  int err = sendAll(s, iov, 1);
  for (uint64_t off = 0; err == 0 && off < size; off += s->stageBytes) {
    size_t n = (size_t)(size - off < s->stageBytes ? size - off : s->stageBytes);
    char why[200];
    if (cudaStageToHost(cuda, s->sendStage, src + off, n, why, sizeof(why)) != mscclppSuccess) {
      snprintf(what, sizeof(what), "Ethernet put from device memory: %s", why);
      rc = mscclppUnhandledCudaError;
      /* the header promised size bytes: keep the stream in step with zeros, the peer gets them */
      memset(s->sendStage, 0, n);
    }
    struct iovec d[1] = {{s->sendStage, n}};
    err = sendAll(s, d, 1);
  }
  pthread_mutex_unlock(&s->sendLock);
  if (err != 0) return sendFailed(c, s, err);
  if (rc != mscclppSuccess) return engConnFail(c, rc, "%s", what);
  return mscclppSuccess;
}

static int ethOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                 uint64_t size)
{
  ethConn* s = connState(c);
  if (s == NULL) return engConnFail(c, mscclppInvalidUsage, "Ethernet operation before connection setup");
  unsigned char hdr[ETH_HDR_BYTES];
  if ((type & mscclppData) && size > 0) {
    const engReg *src, *dst;
    int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &src, &dst);
    if (rc != mscclppSuccess) return rc;
    putHeader(hdr, ETH_DATA, dstHandle, dstOff, size);
    if (src->mapped != NULL) {
      struct iovec iov[2] = {{hdr, ETH_HDR_BYTES}, {src->mapped + srcOff, (size_t)size}};
      pthread_mutex_lock(&s->sendLock);
      int err = sendAll(s, iov, 2);
      pthread_mutex_unlock(&s->sendLock);
      if (err != 0) return sendFailed(c, s, err);
    } else {
      rc = sendStaged(c, s, hdr, src->addr + srcOff, size);
      if (rc != mscclppSuccess) return rc;
    }
  }
  if (type & mscclppFlag) {
    /* the count is taken after this operation's data went out, under the lock that orders the
     * stream: a count always follows the data of every signal it counts */
    pthread_mutex_lock(&s->sendLock);
    uint64_t v = ++c->signalsDone;
    putHeader(hdr, ETH_FLAG, v, 0, 0);
    struct iovec iov[1] = {{hdr, ETH_HDR_BYTES}};
    int err = sendAll(s, iov, 1);
    pthread_mutex_unlock(&s->sendLock);
    if (err != 0) return sendFailed(c, s, err);
  }
  /* Sync: every send above returned, so the sources may be reused; nothing else to wait for */
  return mscclppSuccess;
}

/* Drops n bytes of a rejected message so the stream stays in step. */
static int skip(ethConn* s, uint64_t n)
{
  char buf[4096];
  while (n > 0) {
    size_t k = n < sizeof(buf) ? (size_t)n : sizeof(buf);
    int rc = recvAll(s, buf, k);
    if (rc != 0) return rc;
    n -= k;
  }
  return 0;
}

/* The registration idx of connection c (NULL when there is none). */
static const engReg* regAt(engConn* c, uint64_t idx)
{
  ethRegs* r = ctxState(c)->regs[c->connId];
  if (r == NULL || idx >= (uint64_t)__atomic_load_n(&r->n, __ATOMIC_ACQUIRE)) return NULL;
  return &r->chunk[idx / ETH_REG_CHUNK][idx % ETH_REG_CHUNK];
}

/* ETH_REG: n bytes into registration idx at off, or dropped (recorded) when out of range;
 * 0, or the receive error. */
static int recvReg(engConn* c, ethConn* s, uint64_t idx, uint64_t off, uint64_t n)
{
  const engReg* r = regAt(c, idx);
  const char* bad = ethRegBad(r, off, n);
  if (bad == NULL) return recvAll(s, r->mapped + off, (size_t)n);
  char what[300];
  snprintf(what, sizeof(what), "rank %d wrote %llu bytes at offset %llu of registered buffer %llu: %s; dropped",
           c->peerRank, (unsigned long long)n, (unsigned long long)off, (unsigned long long)idx, bad);
  engConnFail(c, mscclppRemoteError, "%s", what);
  return skip(s, n);
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
  putHeader(hdr, ETH_REG, idx, off, size);
  struct iovec iov[2] = {{hdr, ETH_HDR_BYTES}, {(void*)src, (size_t)size}};
  pthread_mutex_lock(&s->sendLock);
  int err = sendAll(s, iov, 2);
  pthread_mutex_unlock(&s->sendLock);
  return err != 0 ? sendFailed(c, s, err) : mscclppSuccess;
}

/* Records why the receive thread stops (recvAll's rc; inPut: the size of the put it was in, or
 * 0): a goodbye and an end of stream is a destroyed communicator, anything else a remote error. */
static void rxFailed(ethConn* s, int rc, uint64_t inPut)
{
  engConn* c = s->c;
  char what[300];
  if (rc == ETIMEDOUT) {
    snprintf(what, sizeof(what),
             "rank %d is unreachable: nothing came from it for %llu ms (link down, or the peer stopped)",
             c->peerRank, (unsigned long long)(s->deadNs / 1000000ull));
    engConnFail(c, mscclppRemoteError, "%s", what);
    markDead(s);
    return;
  }
  __atomic_store_n(&c->peerClosed, 1, __ATOMIC_RELEASE);
  if (inPut == 0 && rc == -1 && s->peerBye) {
    snprintf(what, sizeof(what), "rank %d destroyed its communicator", c->peerRank);
    errSet(&c->comm->err, mscclppRemoteError, what); /* its last error, not an asynchronous one */
    return;
  }
  if (inPut != 0)
    snprintf(what, sizeof(what), "rank %d's TCP connection ended inside a %llu-byte put", c->peerRank,
             (unsigned long long)inPut);
  else if (rc == -1)
    snprintf(what, sizeof(what), "rank %d's TCP connection ended without a goodbye: it exited or crashed",
             c->peerRank);
  else
    snprintf(what, sizeof(what), "receiving from rank %d over TCP failed: %s", c->peerRank, strerror(rc));
  engConnFail(c, mscclppRemoteError, "%s", what);
}

/* The receive thread: data straight into the registered buffers, counts into my epoch. */
static void* rxMain(void* arg)
{
  ethConn* s = (ethConn*)arg;
  engConn* c = s->c;
  volatile uint64_t* epoch = &c->dev->localSignalEpochId->proxy; /* device memory in CUDA mode */
  struct cudaP2PState* cuda = ctxState(c)->cuda;
  unsigned char hdr[ETH_HDR_BYTES];
  char what[300];
  for (;;) {
    int rc = recvAll(s, hdr, sizeof(hdr));
    if (rc != 0) {
      if (!s->closing && !s->dead) rxFailed(s, rc, 0);
      return NULL;
    }
    ethHdr h;
    int malformed = ethHdrDecode(hdr, &h);
    uint32_t magic = h.magic, type = h.type;
    uint64_t a = h.a, b = h.b, n = h.n;
    if (malformed) {
      snprintf(what, sizeof(what), "rank %d sent a malformed message (magic %#x, type %u): connection dropped",
               c->peerRank, magic, type);
      __atomic_store_n(&c->peerClosed, 1, __ATOMIC_RELEASE);
      engConnFail(c, mscclppRemoteError, "%s", what);
      shutdown(s->fd, SHUT_RDWR);
      return NULL;
    }
    if (type == ETH_FENCE) {
      __atomic_store_n(&s->fenceSeen, a, __ATOMIC_RELEASE);
      continue;
    }
    if (type == ETH_BYE) {
      s->peerBye = 1;
      continue;
    }
    if (type == ETH_PING) continue; /* its arrival was the point */
    if (type == ETH_FLAG && cuda != NULL) {
      /* the epoch is device memory: one in-order receive thread, so the counts only grow */
      char why[200];
      memcpy(s->recvStage, &a, sizeof(a));
      if (cudaStageToDevice(cuda, (uint64_t)(uintptr_t)epoch, s->recvStage, sizeof(a), why, sizeof(why)) !=
          mscclppSuccess) {
        snprintf(what, sizeof(what), "signal from rank %d into device memory: %s", c->peerRank, why);
        engConnFail(c, mscclppUnhandledCudaError, "%s", what);
      }
      continue;
    }
    if (type == ETH_FLAG) {
      uint64_t cur = __atomic_load_n(epoch, __ATOMIC_RELAXED);
      while (cur < a && !__atomic_compare_exchange_n(epoch, &cur, a, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        ;
      if (c->localSleepers != NULL && __atomic_load_n(c->localSleepers, __ATOMIC_SEQ_CST) != 0)
        engFutexWake(epoch);
      continue;
    }
    if (type == ETH_REG) {
      rc = recvReg(c, s, a, b, n);
      if (rc == 0) continue;
      if (!s->closing && !s->dead) rxFailed(s, rc, n);
      return NULL;
    }
    /* DATA: a is my handle, b the offset, n the size; checked against my registrations */
    const char* bad = ethDataBad(&h, c->local, c->nLocal, cuda != NULL && s->recvStage != NULL);
    if (bad != NULL) {
      snprintf(what, sizeof(what), "rank %d put %llu bytes at offset %llu of handle %llu: %s; dropped", c->peerRank,
               (unsigned long long)n, (unsigned long long)b, (unsigned long long)a, bad);
      engConnFail(c, mscclppRemoteError, "%s", what);
      rc = skip(s, n);
    } else if (c->local[a].mapped != NULL) {
      rc = recvAll(s, c->local[a].mapped + b, (size_t)n);
    } else {
      /* device memory: chunk by chunk through the pinned staging buffer */
      for (uint64_t off = 0; rc == 0 && off < n; off += s->stageBytes) {
        size_t k = (size_t)(n - off < s->stageBytes ? n - off : s->stageBytes);
        rc = recvAll(s, s->recvStage, k);
        char why[200];
        if (rc == 0 &&
            cudaStageToDevice(cuda, c->local[a].addr + b + off, s->recvStage, k, why, sizeof(why)) != mscclppSuccess) {
          snprintf(what, sizeof(what), "put from rank %d into device memory: %s", c->peerRank, why);
          engConnFail(c, mscclppUnhandledCudaError, "%s", what);
        }
      }
    }
    if (rc != 0 && !s->closing && !s->dead) {
      rxFailed(s, rc, n);
      return NULL;
    }
  }
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
  if (e->cuda != NULL && (sendStage == NULL || recvStage == NULL || stageBytes < 8)) return mscclppInternalError;
  ethConn* s = (ethConn*)calloc(1, sizeof(ethConn));
  if (s == NULL) return mscclppSystemError;
  s->fd = fd;
  s->c = c;
  s->sendStage = (char*)sendStage;
  s->recvStage = (char*)recvStage;
  s->stageBytes = stageBytes;
  s->deadNs = (uint64_t)(deadMs > 0 ? deadMs : 1) * 1000000ull;
  s->pingNs = tickNs(s->deadNs);
  s->lastSendNs = s->lastRecvNs = engNowNs();
  struct timeval tv = {.tv_sec = (time_t)(s->pingNs / 1000000000ull),
                       .tv_usec = (suseconds_t)(s->pingNs % 1000000000ull / 1000)};
  if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
    free(s);
    return mscclppSystemError;
  }
  pthread_mutex_init(&s->sendLock, NULL);
  if (pthread_create(&s->rx, NULL, rxMain, s) != 0) {
    pthread_mutex_destroy(&s->sendLock);
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
  putHeader(hdr, ETH_FENCE, seq, 0, 0);
  for (int i = 0; i < ENG_MAX_CONNS; i++) {
    ethConn* s = e->conns[i];
    if (s == NULL) continue;
    struct iovec iov[1] = {{hdr, ETH_HDR_BYTES}};
    pthread_mutex_lock(&s->sendLock);
    int rc = sendAll(s, iov, 1);
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

/* Closes every connection's socket and joins its receive thread, then frees the state. */
static void ethClose(engCtx* ctx)
{
  struct ethCtx* e = (struct ethCtx*)ctx->transport;
  if (e == NULL) return;
  for (int i = 0; i < ENG_MAX_CONNS; i++) {
    ethConn* s = e->conns[i];
    if (s == NULL) continue;
    __atomic_store_n(&s->closing, 1, __ATOMIC_RELEASE);
    unsigned char hdr[ETH_HDR_BYTES];
    putHeader(hdr, ETH_BYE, 0, 0, 0);
    pthread_mutex_lock(&s->sendLock);
    (void)send(s->fd, hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_DONTWAIT); /* best effort */
    pthread_mutex_unlock(&s->sendLock);
    shutdown(s->fd, SHUT_RDWR);
    if (s->rxStarted) pthread_join(s->rx, NULL);
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
  return (e != NULL && e->cuda != NULL) ? cudaStateThreadInit(ctx, e->cuda) : mscclppSuccess;
}

static int ethPublishTail(engCtx* ctx, uint64_t tail)
{
  struct ethCtx* e = (struct ethCtx*)ctx->transport;
  return (e != NULL && e->cuda != NULL) ? cudaStatePublishTail(ctx, e->cuda, tail) : mscclppSuccess;
}

const engOps ethOps = ENG_OPS("Ethernet", ethOp, ethThreadInit, ethPublishTail, ethClose);
