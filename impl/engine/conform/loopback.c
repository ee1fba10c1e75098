/*
 * loopback.c: a transport written from impl/engine/transport.h alone, as
 * docs/ARCHITECTURE.md's "add a transport" recipe says: both sides of the
 * connection live in this process, a put is a memcpy into the peer's buffer
 * and a signal a release store of the engine's value into the peer's epoch.
 * Its table sets only what it implements; the engine fills the rest. The
 * conformance suite runs over it (loopback_test.go) as over every transport.
 */
#include "loopback.h"

#include <stdlib.h>
#include <string.h>

#include "../backoff.h"
#include "../engine.h"
#include "../testconn.h"

typedef struct lbSide {
  engConn conn;
  struct mscclppDevConn dev;
  engReg local[2], remote[2];
  uint64_t peerEpoch[2];                 /* the peer's localSignalEpochId: device, proxy */
  mscclppDevConnSignalEpochId epoch;     /* mine: where the peer's signals would land */
  uint64_t waitEpoch;
  uint32_t sleepers;                     /* threads asleep on mine */
} lbSide;

typedef struct lbConn {
  engComm* comm;
  engCtx* ctx;
  lbSide side[LB_CONNS];
} lbConn;

/* The data part: the put (the engine checked nothing: engCheckPut does); Sync has nothing to do. */
static int lbOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                uint64_t size)
{
  if (!(type & mscclppData)) return mscclppSuccess;
  const engReg *s, *d;
  int rc = engCheckPut(c, dstHandle, dstOff, srcHandle, srcOff, size, &s, &d);
  if (rc == mscclppSuccess) memcpy(d->mapped + dstOff, s->mapped + srcOff, size);
  return rc;
}

/* The signal: the engine's value, after the data (x86 keeps stores in order; release says so). */
static int lbSignal(engConn* c, uint64_t value)
{
  __atomic_store_n(c->remoteProxyEpoch, value, __ATOMIC_RELEASE);
  return mscclppSuccess;
}

static const engOps lbOps = {
    .name = "loopback",
    .op = lbOp,
    .sendSignal = lbSignal,
    .opsComplete = 1,
};

void* lbNew(void* src[LB_CONNS], void* dst[LB_CONNS], uint64_t size)
{
  lbConn* l = (lbConn*)calloc(1, sizeof(lbConn));
  if (l == NULL) return NULL;
  engBackoffCfg b = {.spin = 64, .yields = 64, .sleepMaxUs = 100};
  l->comm = engCommNew(0, b, b);
  l->ctx = engCtxNewOps(l->comm, &lbOps, NULL);
  for (int k = 0; k < LB_CONNS; k++) {
    lbSide* s = &l->side[k];
    s->local[1] = (engReg){ENG_REG_MAGIC, (char*)src[k], (uint64_t)(uintptr_t)src[k], size, 0, 0};
    s->remote[1] = (engReg){ENG_REG_MAGIC, (char*)dst[k], (uint64_t)(uintptr_t)dst[k], size, 0, 0};
    testConnAdd(l->ctx, &s->conn, k, 1, s->local, s->remote, &s->dev, &s->epoch, &s->waitEpoch);
    s->conn.remoteProxyEpoch = &s->peerEpoch[1];
    s->conn.localSleepers = &s->sleepers;
  }
  return l;
}

void* lbConnOf(void* l, int k) { return &((lbConn*)l)->side[k].conn; }

void* lbPeerEpoch(void* l, int k) { return &((lbConn*)l)->side[k].peerEpoch[1]; }

/* The peer of connection k closed: the transport says so (transport.h, "Peer close") and wakes
 * the threads asleep on the epoch its signals would have reached. */
void lbClosePeer(void* p, int k)
{
  lbSide* s = &((lbConn*)p)->side[k];
  __atomic_store_n(&s->conn.peerClosed, 1, __ATOMIC_RELEASE);
  if (__atomic_load_n(&s->sleepers, __ATOMIC_SEQ_CST) != 0) engFutexWake(&s->epoch.proxy);
}

void lbFree(void* p)
{
  lbConn* l = (lbConn*)p;
  engCtxFree(l->ctx);
  engCommFree(l->comm);
  free(l);
}
