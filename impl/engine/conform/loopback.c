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

#include "engine.h"

typedef struct lbConn {
  engComm* comm;
  engCtx* ctx;
  engConn conn;
  struct mscclppDevConn dev;
  engReg local[2], remote[2];
  uint64_t peerEpoch[2]; /* the peer's localSignalEpochId: device, proxy */
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

void* lbNew(void* src, void* dst, uint64_t size)
{
  lbConn* l = (lbConn*)calloc(1, sizeof(lbConn));
  if (l == NULL) return NULL;
  engBackoffCfg b = {.spin = 64, .yields = 64, .sleepMaxUs = 100};
  l->comm = engCommNew(0, b, b);
  l->ctx = engCtxNewOps(l->comm, &lbOps, NULL);
  l->local[1] = (engReg){ENG_REG_MAGIC, (char*)src, (uint64_t)(uintptr_t)src, size, 0, 0};
  l->remote[1] = (engReg){ENG_REG_MAGIC, (char*)dst, (uint64_t)(uintptr_t)dst, size, 0, 0};
  engConn* c = &l->conn;
  c->peerRank = 1;
  c->comm = l->comm;
  c->ctx = l->ctx;
  c->ops = l->ctx->ops;
  c->dev = &l->dev;
  c->nLocal = 2;
  c->local = l->local;
  c->nRemote = 2;
  c->remote = l->remote;
  c->remoteProxyEpoch = &l->peerEpoch[1];
  l->ctx->conns[0] = c;
  return l;
}

void* lbConnOf(void* l) { return &((lbConn*)l)->conn; }

void* lbPeerEpoch(void* l) { return &((lbConn*)l)->peerEpoch[1]; }

void lbFree(void* p)
{
  lbConn* l = (lbConn*)p;
  engCtxFree(l->ctx);
  engCommFree(l->comm);
  free(l);
}
