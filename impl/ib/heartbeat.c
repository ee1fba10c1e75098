/*
 * heartbeat.c: the beats of IB connections (see heartbeat.h). Ticked by one
 * goroutine of the transport; posts on the connection's QP under its lock,
 * as the proxy and host threads do.
 */
#include "heartbeat.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t nowNs(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

ibBeat* ibBeatNew(engConn* c, ibQp* q, volatile uint64_t* mine, uint64_t raddr, uint32_t rkey)
{
  ibBeat* b = (ibBeat*)calloc(1, sizeof(ibBeat));
  if (b == NULL) return NULL;
  b->q = q;
  b->comm = c->comm;
  b->connId = c->connId;
  b->peerRank = c->peerRank;
  b->tag = c->tag;
  b->mine = mine;
  b->raddr = raddr;
  b->rkey = rkey;
  b->seen = __atomic_load_n(mine, __ATOMIC_ACQUIRE);
  b->seenNs = nowNs();
  return b;
}

void ibBeatArm(ibBeat* b)
{
  b->seen = __atomic_load_n(b->mine, __ATOMIC_ACQUIRE);
  b->seenNs = nowNs();
}

/* Records the peer's loss as the connection's remote error (engConnFail). */
static void lost(ibBeat* b, const char* why)
{
  engConnFail(b, mscclppRemoteError, "rank %d is unreachable: %s", b->peerRank, why);
  b->done = 1;
}

void ibBeatTick(ibBeat* b, uint64_t deadNs)
{
  if (b->done) return;
  uint64_t v = __atomic_load_n(b->mine, __ATOMIC_ACQUIRE), now = nowNs();
  if (v == IB_BEAT_BYE) {
    /* the peer destroyed its communicator: nothing more comes on this connection, so waits on
     * it end (RemoteError, this connection's only); the communicator's last error says why, not
     * an asynchronous one, and only while it has none (a goodbye is no failure) */
    char why[160];
    snprintf(why, sizeof(why), "connection %d (rank %d, tag %d): rank %d destroyed its communicator", b->connId,
             b->peerRank, b->tag, b->peerRank);
    errSetUnlessFailed(&b->comm->err, mscclppRemoteError, why);
    engMarkConnFailed(b->comm, b->connId);
    b->done = 1;
    return;
  }
  if (v != b->seen) {
    b->seen = v;
    b->seenNs = now;
  } else if (now - b->seenNs >= deadNs) {
    char why[200];
    snprintf(why, sizeof(why), "no IB heartbeat from it for %llu ms (link down, or the peer stopped)",
             (unsigned long long)((now - b->seenNs) / 1000000ull));
    lost(b, why);
    return;
  }
  char err[IB_ERR_LEN];
  int failed = ibWriteSignal(b->q, ++b->sent, b->raddr, b->rkey, 0) != 0 || ibPoll(b->q->cq, err, sizeof(err)) < 0 ||
               ibQpFailed(b->q);
  /* a peer that said goodbye meanwhile has destroyed its QP: not a loss */
  if (failed && __atomic_load_n(b->mine, __ATOMIC_ACQUIRE) != IB_BEAT_BYE) {
    const char* why = ibQpError(b->q);
    lost(b, why != NULL ? why : "its heartbeat could not be delivered");
  }
}

void ibBeatBye(ibBeat* b, int timeoutMs)
{
  /* a peer that said goodbye or was lost reads nothing any more */
  if (b->done || ibQpFailed(b->q)) return;
  if (ibWriteSignal(b->q, IB_BEAT_BYE, b->raddr, b->rkey, 1) == 0) (void)ibFlush(b->q, timeoutMs);
}
