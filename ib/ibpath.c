/*
 * ibpath.c: the data path of the IB provider (see ibcore.h): RDMA writes and
 * signal writes posted on an RC QP, with the completion accounting that
 * makes a full send queue wait and a flush complete, and the CQ poll
 * (ibPoll) that advances it and records a QP's first failure. Plain C,
 * called on the proxy thread; never enters Go.
 */
#define _GNU_SOURCE
#include "ibcore.h"

#include <errno.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define IB_MAX_WR_BYTES (1ull << 30) /* one WR moves at most 1 GiB (max_msg_sz is usually 2 GiB) */

/* ---------------------------------------------------------------- data path */

/* Back-off of the poll loops: spin, then yield, then sleep up to 100 us. */
static void backoff(unsigned* n)
{
  unsigned i = (*n)++;
  if (i < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else if (i < 256) {
    sched_yield();
  } else {
    struct timespec ts = {0, i < 1024 ? 10000 : 100000};
    nanosleep(&ts, NULL);
  }
}

static int64_t nowMs(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One poll of q's CQ while waiting for its completions: the number of completions reaped, or
 * -1 once the QP failed (already, or through an error this poll found, recorded as its failure). */
static int pollStep(ibQp* q)
{
  if (__atomic_load_n(&q->failed, __ATOMIC_ACQUIRE)) return -1;
  char err[IB_ERR_LEN];
  int got = ibPoll(q->cq, err, sizeof(err));
  if (got < 0) ibQpSetFailed(q, "%s", err);
  return got;
}

/* Polls until the send queue has room for one more WR. Called with q->lock held. */
static int waitRoom(ibQp* q)
{
  unsigned n = 0;
  while (q->posted - __atomic_load_n(&q->completed, __ATOMIC_ACQUIRE) >= q->maxSendWr) {
    if (__atomic_load_n(&q->abandon, __ATOMIC_ACQUIRE)) {
      snprintf(q->err, sizeof(q->err), "send queue to %s full while its communicator closes", q->peer);
      return -1;
    }
    int got = pollStep(q);
    if (got < 0) return -1;
    if (got == 0) backoff(&n);
  }
  return 0;
}

/* Posts one WR (q->lock held). sge may be NULL for a zero-length write. */
static int postOne(ibQp* q, struct iba_sge* sge, uint64_t raddr, uint32_t rkey, int signaled, int inl)
{
  if (__atomic_load_n(&q->failed, __ATOMIC_ACQUIRE)) return -1;
  if (waitRoom(q) != 0) return -1;
  uint64_t id = q->posted + 1;
  if (!signaled && q->unsignaled + 1 >= q->signalEvery) signaled = 1;
  struct iba_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = id;
  wr.sg_list = sge;
  wr.num_sge = sge != NULL ? 1 : 0;
  wr.opcode = IBA_WR_RDMA_WRITE;
  wr.send_flags = (signaled ? IBA_SEND_SIGNALED : 0) | (inl ? IBA_SEND_INLINE : 0);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  int rc = iba_post_send(q->qp, &wr, &bad);
  if (rc != 0) {
    /* not sticky: the QP did not take the WR (e.g. posted before RTS) */
    snprintf(q->err, sizeof(q->err), "ibv_post_send to %s (qpn %u, state %d): %s", q->peer, q->qp->qp_num,
             (int)q->qp->state, strerror(rc > 0 ? rc : EINVAL));
    return -1;
  }
  q->posted = id;
  q->unsignaled = signaled ? 0 : q->unsignaled + 1;
  q->lastSignaled = signaled;
  q->lastRaddr = raddr;
  q->lastRkey = rkey;
  return 0;
}

int ibWrite(ibQp* q, const struct iba_mr* mr, uint64_t loff, uint64_t raddr, uint32_t rkey, uint64_t roff,
            uint64_t size, int signaled)
{
  if (loff > mr->length || size > mr->length - loff) {
    pthread_mutex_lock(&q->lock);
    snprintf(q->err, sizeof(q->err), "RDMA write to %s reads %llu bytes at offset %llu of a %llu-byte MR", q->peer,
             (unsigned long long)size, (unsigned long long)loff, (unsigned long long)mr->length);
    pthread_mutex_unlock(&q->lock);
    return -1;
  }
  pthread_mutex_lock(&q->lock);
  int rc = 0;
  uint64_t done = 0;
  do {
    uint64_t n = size - done < IB_MAX_WR_BYTES ? size - done : IB_MAX_WR_BYTES;
    struct iba_sge sge = {(uint64_t)(uintptr_t)mr->addr + loff + done, (uint32_t)n, mr->lkey};
    int last = done + n == size;
    rc = postOne(q, n > 0 ? &sge : NULL, raddr + roff + done, rkey, signaled && last, 0);
    done += n;
  } while (rc == 0 && done < size);
  pthread_mutex_unlock(&q->lock);
  return rc;
}

int ibWriteSignal(ibQp* q, uint64_t value, uint64_t raddr, uint32_t rkey, int signaled)
{
  pthread_mutex_lock(&q->lock);
  int rc = waitRoom(q);
  if (rc == 0) {
    /* Slot (posted+1) % maxSendWr: the WR that used it last is maxSendWr WRs
     * back and has completed (waitRoom), so the HCA no longer reads it. */
    uint64_t* slot = &q->sigBuf[(q->posted + 1) % q->maxSendWr];
    *slot = value;
    struct iba_sge sge = {(uint64_t)(uintptr_t)slot, sizeof(uint64_t), q->sigMr->lkey};
    rc = postOne(q, &sge, raddr, rkey, signaled, q->maxInline >= sizeof(uint64_t));
  }
  pthread_mutex_unlock(&q->lock);
  return rc;
}

int ibFlush(ibQp* q, int timeoutMs)
{
  pthread_mutex_lock(&q->lock);
  if (__atomic_load_n(&q->failed, __ATOMIC_ACQUIRE)) {
    pthread_mutex_unlock(&q->lock);
    return -1;
  }
  /* the last WR's completion is the one that says all are done */
  if (!q->lastSignaled && q->posted > __atomic_load_n(&q->completed, __ATOMIC_ACQUIRE)) {
    if (postOne(q, NULL, q->lastRaddr, q->lastRkey, 1, 0) != 0) {
      pthread_mutex_unlock(&q->lock);
      return -1;
    }
  }
  uint64_t target = q->posted;
  pthread_mutex_unlock(&q->lock);
  int64_t deadline = timeoutMs > 0 ? nowMs() + timeoutMs : 0;
  unsigned n = 0;
  while (__atomic_load_n(&q->completed, __ATOMIC_ACQUIRE) < target) {
    int got = pollStep(q);
    if (got < 0) return -1;
    if (got == 0) {
      if (__atomic_load_n(&q->abandon, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&q->lock);
        snprintf(q->err, sizeof(q->err), "flush to %s given up: its communicator closes", q->peer);
        pthread_mutex_unlock(&q->lock);
        return -1;
      }
      if (deadline && nowMs() > deadline) {
        pthread_mutex_lock(&q->lock);
        snprintf(q->err, sizeof(q->err), "flush to %s: %llu of %llu WRs completed after %d ms", q->peer,
                 (unsigned long long)__atomic_load_n(&q->completed, __ATOMIC_ACQUIRE), (unsigned long long)target,
                 timeoutMs);
        pthread_mutex_unlock(&q->lock);
        return -1;
      }
      backoff(&n);
    }
  }
  return __atomic_load_n(&q->failed, __ATOMIC_ACQUIRE) ? -1 : 0;
}

void ibQpAbandon(ibQp* q, int on) { __atomic_store_n(&q->abandon, on, __ATOMIC_RELEASE); }

const char* ibQpError(ibQp* q)
{
  int f = __atomic_load_n(&q->failed, __ATOMIC_ACQUIRE);
  if (f == 1) return q->failMsg;
  if (f == 2) return "an error completion is being recorded";
  return q->err[0] ? q->err : NULL;
}
int ibQpFailed(ibQp* q) { return __atomic_load_n(&q->failed, __ATOMIC_ACQUIRE) != 0; }
uint64_t ibQpPosted(ibQp* q)
{
  pthread_mutex_lock(&q->lock);
  uint64_t p = q->posted;
  pthread_mutex_unlock(&q->lock);
  return p;
}
uint64_t ibQpCompleted(ibQp* q) { return __atomic_load_n(&q->completed, __ATOMIC_ACQUIRE); }

/* ---------------------------------------------------------------- completions */

void ibQpSetFailed(ibQp* q, const char* fmt, ...)
{
  /* the first error completion wins: later ones are flushes caused by it.
   * failed: 0, 2 while the message is written, 1 once it is readable. */
  int zero = 0;
  if (!__atomic_compare_exchange_n(&q->failed, &zero, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(q->failMsg, sizeof(q->failMsg), fmt, ap);
  va_end(ap);
  __atomic_store_n(&q->failed, 1, __ATOMIC_RELEASE);
}

int ibPoll(ibCq* cq, char* err, int errLen)
{
  struct iba_wc wc[16];
  pthread_mutex_lock(&cq->lock);
  int n = iba_poll_cq(cq->cq, 16, wc);
  if (n < 0) {
    pthread_mutex_unlock(&cq->lock);
    return ibErrf(err, errLen, "ibv_poll_cq(%s): returned %d", cq->ctx->name, n);
  }
  for (int i = 0; i < n; i++) {
    ibQp* q = NULL;
    for (int j = 0; j < cq->nqp; j++)
      if (cq->qps[j]->qp->qp_num == wc[i].qp_num) q = cq->qps[j];
    if (q == NULL) continue; /* a QP destroyed with completions still queued */
    if (wc[i].status != IBA_WC_SUCCESS) {
      const char* what = cq->ctx->api->wc_status_str(wc[i].status);
      ibQpSetFailed(q, "RDMA to %s failed: %s (wc status %d, vendor error %#x, wr %llu, qpn %u on %s)", q->peer,
                  what ? what : "?", (int)wc[i].status, wc[i].vendor_err, (unsigned long long)wc[i].wr_id,
                  wc[i].qp_num, cq->ctx->name);
    }
    /* an errored WR is done too: later ones complete as flush errors */
    uint64_t cur = __atomic_load_n(&q->completed, __ATOMIC_ACQUIRE);
    while (cur < wc[i].wr_id &&
           !__atomic_compare_exchange_n(&q->completed, &cur, wc[i].wr_id, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      ;
  }
  cq->polled += (uint64_t)n;
  pthread_mutex_unlock(&cq->lock);
  return n;
}
