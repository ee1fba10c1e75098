/*
 * socket.c: the Ethernet transport's socket primitives, under every other
 * file of it: sending and receiving whole frames with the liveness rules of
 * eth.c's top (a tick per blocked call, deadNs without progress), the
 * receive tick (PINGs, a silent peer), and marking a connection dead.
 */
#define _GNU_SOURCE
#include "ethconn.h"

#include "../engine/backoff.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* Whether the sender of a frame on s must give up now: the context closes (destroy), or its
 * proxy stops after a reported failure (abandon). */
static int giveUp(ethConn* s)
{
  engCtx* x = s->c->ctx;
  return s->closing || __atomic_load_n(&x->closing, __ATOMIC_ACQUIRE) || __atomic_load_n(&x->abandon, __ATOMIC_ACQUIRE);
}

/* Sends every byte of iov (advancing it); 0, or the errno that stopped it: ETIMEDOUT when
 * nothing went out for deadMs, EHOSTUNREACH once the connection is declared dead, ESHUTDOWN when
 * the context is closing or abandons its sends before the frame started, ECANCELED when it
 * does inside the frame (the stream is then cut). Checked at every step: a blocked sendmsg
 * returns every tick (SO_SNDTIMEO), and ethAbort's shutdown releases it at once. */
int ethSendAll(ethConn* s, struct iovec* iov, int n)
{
  uint64_t progress = engNowNs();
  int started = 0;
  while (n > 0) {
    if (__atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) return EHOSTUNREACH;
    if (giveUp(s)) return started ? ECANCELED : ESHUTDOWN;
    ssize_t k = sendmsg(s->fd, &(struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)n}, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (__atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) return EHOSTUNREACH; /* shut down by ethMarkDead */
      if (giveUp(s)) return started ? ECANCELED : ESHUTDOWN; /* or by ethAbort */
      if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
      if (engNowNs() - progress >= s->deadNs) return ETIMEDOUT;
      continue;
    }
    progress = engNowNs();
    started = started || k > 0;
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

/* Declares the connection dead: later sends fail at once, and a sender blocked now is
 * released by the shutdown. */
void ethMarkDead(ethConn* s)
{
  __atomic_store_n(&s->dead, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&s->c->peerClosed, 1, __ATOMIC_RELEASE);
  shutdown(s->fd, SHUT_RDWR);
}

void ethPutHeader(unsigned char* h, uint32_t type, uint64_t a, uint64_t b, uint64_t c)
{
  uint32_t m = ETH_MAGIC;
  memcpy(h, &m, 4);
  memcpy(h + 4, &type, 4);
  memcpy(h + 8, &a, 8);
  memcpy(h + 16, &b, 8);
  memcpy(h + 24, &c, 8);
}

int ethSendFailed(engConn* c, ethConn* s, int err)
{
  if (err == ECANCELED && !s->closing && !__atomic_load_n(&c->ctx->closing, __ATOMIC_ACQUIRE)) {
    /* a frame cut by mscclppProxyStop after a failure: the stream cannot go on */
    int rc = engConnFail(c, mscclppRemoteError, "a send to rank %d was given up inside a frame (mscclppProxyStop after a failure): the connection is closed", c->peerRank);
    ethMarkDead(s);
    return rc;
  }
  if (s->closing || err == ESHUTDOWN || err == ECANCELED) return mscclppInvalidUsage;
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
  ethMarkDead(s);
  return rc;
}

/* A PING when nothing went out for a tick before now and the socket has room (never waiting
 * for the send lock: its holder is sending, and a stuck one fails by itself). */
static void pingIfDue(ethConn* s, uint64_t now)
{
  uint64_t sent = __atomic_load_n(&s->lastSendNs, __ATOMIC_RELAXED);
  if (now <= sent || now - sent < s->pingNs) return;
  if (pthread_mutex_trylock(&s->sendLock) != 0) return;
  struct pollfd p = {.fd = s->fd, .events = POLLOUT};
  if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT)) {
    unsigned char hdr[ETH_HDR_BYTES];
    ethPutHeader(hdr, ETH_PING, 0, 0, 0);
    struct iovec iov[1] = {{hdr, ETH_HDR_BYTES}};
    (void)ethSendAll(s, iov, 1); /* a failure shows on the receive side */
  }
  pthread_mutex_unlock(&s->sendLock);
}

/* The receive thread's tick: ETIMEDOUT when nothing came in for deadMs; else a PING when due. */
int ethRxTick(ethConn* s)
{
  uint64_t now = engNowNs();
  if (now - __atomic_load_n(&s->lastRecvNs, __ATOMIC_RELAXED) >= s->deadNs) return ETIMEDOUT;
  pingIfDue(s, now);
  return 0;
}

void ethRxFramePing(ethConn* s) { pingIfDue(s, __atomic_load_n(&s->lastRecvNs, __ATOMIC_RELAXED)); }

/* Fills every byte of iov (advancing it); 0, -1 on a clean end of stream before the first byte,
 * else an errno (ETIMEDOUT: nothing came in for deadMs). A blocked recvmsg returns every tick
 * (SO_RCVTIMEO). For the first s->spinNs (a reading wait's spin budget) it does not block: a
 * thread asleep in recv pays a CPU's wake-up per segment that arrives. */
int ethRecvIov(ethConn* s, struct iovec* iov, int n)
{
  int started = 0;
  uint64_t spin = s->spinNs, t0 = spin > 0 ? engNowNs() : 0;
  for (;;) {
    while (n > 0 && iov->iov_len == 0) iov++, n--;
    if (n == 0) return 0;
    int flags = MSG_WAITALL;
    if (spin > 0) {
      if (engNowNs() - t0 < spin)
        flags = MSG_DONTWAIT;
      else
        spin = 0;
    }
    ssize_t k = recvmsg(s->fd, &(struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)n}, flags);
    if (k == 0) return started ? ECONNRESET : -1;
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
      if (flags == MSG_DONTWAIT) continue; /* still spinning */
      int rc = ethRxTick(s);
      if (rc != 0) return rc;
      continue;
    }
    started = 1;
    __atomic_store_n(&s->lastRecvNs, engNowNs(), __ATOMIC_RELAXED);
    while (n > 0 && (size_t)k >= iov->iov_len) {
      k -= (ssize_t)iov->iov_len;
      iov++, n--;
    }
    if (n == 0) return 0;
    iov->iov_base = (char*)iov->iov_base + k;
    iov->iov_len -= (size_t)k;
    if (ethRxTick(s) != 0) return ETIMEDOUT; /* a long receive still pings */
  }
}

int ethRecvAll(ethConn* s, void* buf, size_t n)
{
  struct iovec iov[1] = {{buf, n}};
  return ethRecvIov(s, iov, 1);
}
