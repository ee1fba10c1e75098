/*
 * duplex.c: one step of the bootstrap ring for large slots (coll.go,
 * ringLarge): send a header and a slot on one socket while receiving a header
 * and a slot from another, in one thread polling both non-blocking sockets,
 * as the plain-TCP reference does. Bounded by sliceMs, so that the Go caller
 * regains control (deadline, abort) at least that often.
 */
#include "duplex.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* Fills iov with the part of {hdr, slot} from byte done on; returns the count. */
static int rest(struct iovec* iov, void* hdr, size_t hdrLen, void* slot, size_t slotLen, size_t done)
{
  int n = 0;
  if (done < hdrLen) {
    iov[n].iov_base = (char*)hdr + done;
    iov[n++].iov_len = hdrLen - done;
    done = hdrLen;
  }
  if (done - hdrLen < slotLen) {
    iov[n].iov_base = (char*)slot + (done - hdrLen);
    iov[n++].iov_len = slotLen - (done - hdrLen);
  }
  return n;
}

static long long nowNs(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int bootDuplex(bootDuplexStep* d, void* shdr, void* sslot, void* rhdr, void* rslot, int sliceMs, int spinUs)
{
  size_t sTotal = d->hdrLen + d->slotLen, rTotal = d->hdrLen + d->slotLen;
  long long idleSince = 0; /* start of the current stretch without progress (0: none) */
  for (;;) {
    int progress = 0;
    struct iovec iov[2];
    if (d->sent < sTotal) {
      struct msghdr m = {0};
      m.msg_iov = iov;
      m.msg_iovlen = (size_t)rest(iov, shdr, d->hdrLen, sslot, d->slotLen, d->sent);
      ssize_t k = sendmsg(d->sfd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) d->sent += (size_t)k, progress = 1;
      else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return d->err = errno, BOOT_DUPLEX_SEND_ERR;
    }
    if (d->recvd < rTotal) {
      struct msghdr m = {0};
      m.msg_iov = iov;
      m.msg_iovlen = (size_t)rest(iov, rhdr, d->hdrLen, rslot, d->slotLen, d->recvd);
      ssize_t k = recvmsg(d->rfd, &m, MSG_DONTWAIT);
      if (k > 0) d->recvd += (size_t)k, progress = 1;
      else if (k == 0) return BOOT_DUPLEX_EOF;
      else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return d->err = errno, BOOT_DUPLEX_RECV_ERR;
    }
    if (d->sent == sTotal && d->recvd == rTotal) return BOOT_DUPLEX_DONE;
    if (progress) {
      idleSince = 0;
      continue;
    }
    /* no progress: yield the CPU for up to spinUs (a peer that shares it may be the one to
     * send), then sleep in poll */
    if (spinUs > 0) {
      long long now = nowNs();
      if (idleSince == 0) idleSince = now;
      if (now - idleSince < (long long)spinUs * 1000) {
        sched_yield();
        continue;
      }
    }
    {
      struct pollfd p[2];
      nfds_t np = 0;
      if (d->sent < sTotal) p[np].fd = d->sfd, p[np].events = POLLOUT, p[np].revents = 0, np++;
      if (d->recvd < rTotal) p[np].fd = d->rfd, p[np].events = POLLIN, p[np].revents = 0, np++;
      int r = poll(p, np, sliceMs);
      if (r == 0) return BOOT_DUPLEX_SLICE;
      if (r < 0 && errno != EINTR) return d->err = errno, BOOT_DUPLEX_RECV_ERR;
    }
  }
}
