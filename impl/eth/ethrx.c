/*
 * ethrx.c: what the Ethernet transport does with a frame it received, whoever
 * reads it (the receive thread or a wait, ethread.c): data straight into the
 * registered buffers, signal counts into the epoch, fences, goodbyes and
 * pings; and the record of why reading stopped.
 */
#define _GNU_SOURCE
#include "ethconn.h"
#include "ethwire.h"

#include "../engine/backoff.h"
#include "../../cuda/calls.h" /* cuda/: the CUDA-mode proxy state and its staging copies */

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* Drops n bytes of a rejected message so the stream stays in step. */
static int skip(ethConn* s, uint64_t n)
{
  char buf[4096];
  while (n > 0) {
    size_t k = n < sizeof(buf) ? (size_t)n : sizeof(buf);
    int rc = ethRecvAll(s, buf, k);
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
  if (bad == NULL) return ethRecvAll(s, r->mapped + off, (size_t)n);
  char what[300];
  snprintf(what, sizeof(what), "rank %d wrote %llu bytes at offset %llu of registered buffer %llu: %s; dropped",
           c->peerRank, (unsigned long long)n, (unsigned long long)off, (unsigned long long)idx, bad);
  engConnFail(c, mscclppRemoteError, "%s", what);
  return skip(s, n);
}

/* Records why the receive thread stops (recvAll's rc; inPut: the size of the put it was in, or
 * 0): a goodbye and an end of stream is a destroyed communicator, anything else a remote error. */
void ethRxFailed(ethConn* s, int rc, uint64_t inPut)
{
  engConn* c = s->c;
  char what[300];
  if (rc == ETIMEDOUT) {
    snprintf(what, sizeof(what),
             "rank %d is unreachable: nothing came from it for %llu ms (link down, or the peer stopped)",
             c->peerRank, (unsigned long long)(s->deadNs / 1000000ull));
    engConnFail(c, mscclppRemoteError, "%s", what);
    ethMarkDead(s);
    return;
  }
  /* peerClosed is set after the error is recorded: a wait it ends finds the error there */
  if (inPut == 0 && rc == -1 && s->peerBye) {
    /* its last error, not an asynchronous one, and only while it has none (a goodbye is no failure) */
    snprintf(what, sizeof(what), "rank %d destroyed its communicator", c->peerRank);
    errSetUnlessFailed(&c->comm->err, mscclppRemoteError, what);
    __atomic_store_n(&c->peerClosed, 1, __ATOMIC_RELEASE);
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
  __atomic_store_n(&c->peerClosed, 1, __ATOMIC_RELEASE);
}

/* A signal: the count a of signals the peer sent, into my epoch (device memory in CUDA mode).
 * Returns 1 when it woke a wait asleep on the epoch. */
static int rxFlag(ethConn* s, uint64_t a)
{
  engConn* c = s->c;
  volatile uint64_t* epoch = &c->dev->localSignalEpochId->proxy;
  struct cudaProxyState* cuda = ctxState(c)->cuda;
  if (cuda != NULL) {
    /* the epoch is device memory: one in-order receive thread, so the counts only grow */
    (void)ethFlagStaged(c, s, (uint64_t)(uintptr_t)epoch, a);
    return 0;
  }
  uint64_t cur = __atomic_load_n(epoch, __ATOMIC_RELAXED);
  while (cur < a && !__atomic_compare_exchange_n(epoch, &cur, a, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
    ;
  if (c->localSleepers == NULL || __atomic_load_n(c->localSleepers, __ATOMIC_SEQ_CST) == 0) return 0;
  engFutexWake(epoch);
  return 1;
}

/* A put: h->a is my handle, h->b the offset, h->n the size; checked against my registrations
 * (ethDataBad), then received straight into the registration (device memory: through the
 * staging buffer). A put that fails the checks is skipped. A DATASIG's count (sig non-NULL)
 * follows its payload: received with it in one call into host memory, else after it. Returns 0
 * or what recvAll returned. */
static int rxData(ethConn* s, const ethHdr* h, uint64_t* sig)
{
  engConn* c = s->c;
  struct cudaProxyState* cuda = ctxState(c)->cuda;
  uint64_t a = h->a, b = h->b, n = h->n;
  char what[300];
  int rc;
  const char* bad = ethDataBad(h, c->local, c->nLocal, cuda != NULL && s->recvStage != NULL);
  if (bad != NULL) {
    snprintf(what, sizeof(what), "rank %d put %llu bytes at offset %llu of handle %llu: %s; dropped", c->peerRank,
             (unsigned long long)n, (unsigned long long)b, (unsigned long long)a, bad);
    engConnFail(c, mscclppRemoteError, "%s", what);
    rc = skip(s, n);
  } else if (c->local[a].mapped != NULL) {
    struct iovec iov[2] = {{c->local[a].mapped + b, (size_t)n}, {sig, ETH_SIG_BYTES}};
    return ethRecvIov(s, iov, sig != NULL ? 2 : 1);
  } else {
    rc = ethRecvStaged(c, s, c->local[a].addr + b, n); /* device memory, double-buffered (stage.c) */
  }
  return rc == 0 && sig != NULL ? ethRecvAll(s, sig, ETH_SIG_BYTES) : rc;
}

/* Handles the frame whose header is hdr (its payload still in the socket): data straight into
 * the registered buffers, counts into my epoch. 0 to go on; 1 when the stream ended (recorded:
 * no more frames will be read on it). *woke: set when a count woke a sleeping wait. */
int ethRxFrame(ethConn* s, const unsigned char* hdr, int* woke)
{
  engConn* c = s->c;
  char what[300];
  ethHdr h;
  int malformed = ethHdrDecode(hdr, &h);
  uint32_t magic = h.magic, type = h.type;
  uint64_t a = h.a, b = h.b, n = h.n;
  if (malformed) {
    snprintf(what, sizeof(what), "rank %d sent a malformed message (magic %#x, type %u): connection dropped",
             c->peerRank, magic, type);
    engConnFail(c, mscclppRemoteError, "%s", what);
    __atomic_store_n(&c->peerClosed, 1, __ATOMIC_RELEASE); /* after the error: a wait it ends finds it */
    shutdown(s->fd, SHUT_RDWR);
    return 1;
  }
  int rc = 0;
  if (type == ETH_FENCE) {
    __atomic_store_n(&s->fenceSeen, a, __ATOMIC_RELEASE);
  } else if (type == ETH_BYE) {
    s->peerBye = 1;
  } else if (type == ETH_FLAG) {
    *woke |= rxFlag(s, a);
  } else if (type == ETH_REG) {
    rc = recvReg(c, s, a, b, n);
  } else if (type != ETH_PING) { /* a PING's arrival was the point */
    uint64_t count = 0;
    rc = rxData(s, &h, type == ETH_DATASIG ? &count : NULL);
    if (rc == 0 && type == ETH_DATASIG) *woke |= rxFlag(s, count); /* after its data, even a dropped put's */
  }
  if (rc == 0) {
    ethRxFramePing(s);
    return 0;
  }
  if (!s->closing && !s->dead) ethRxFailed(s, rc, n);
  return 1;
}
