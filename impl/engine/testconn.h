/*
 * testconn.h: for this package's test harnesses (harness.go, fifoharness.go;
 * cgo preambles cannot share a C function otherwise): a new context of ops on
 * comm, with conn as its connection 0 (transport state given) and dev as that
 * connection's device view, its FIFO pointing at the context; a device view
 * wired for host waits (testDevWire).
 */
#ifndef MSCCLPP_ENGINE_TESTCONN_H_
#define MSCCLPP_ENGINE_TESTCONN_H_

#include "engine.h"

static inline engCtx* testConnWire(engComm* comm, const engOps* ops, engConn* conn, struct mscclppDevConn* dev,
                                   void* transport)
{
  engCtx* ctx = engCtxNewOps(comm, ops, NULL);
  dev->fifo.triggerFifo = &ctx->fifo[0];
  dev->fifo.connId = 0;
  conn->comm = comm;
  conn->ctx = ctx;
  engConnSetOps(conn, ops);
  conn->dev = dev;
  conn->transport = transport;
  ctx->conns[0] = conn;
  return ctx;
}

/* Points dev, the device view of connection connId of ctx, at the context's FIFO and at epoch
 * and waitEpoch, as the core's wiring does, so that host waits (mscclppConnWaitNext) and pushes
 * on it work (the conformance suite's harnesses). */
static inline void testDevWire(struct mscclppDevConn* dev, engCtx* ctx, int connId, mscclppDevConnSignalEpochId* epoch,
                               uint64_t* waitEpoch)
{
  dev->fifo.triggerFifo = &ctx->fifo[0];
  dev->fifo.triggerFifoHead = &ctx->head;
  dev->fifo.triggerFifoTail = &ctx->tail;
  dev->fifo.connId = connId;
  dev->localSignalEpochId = epoch;
  dev->waitEpochId = waitEpoch;
}

/* Makes c connection connId of ctx, to peerRank, with handles 0 and 1 local and remote (the
 * registrations given), its device view dev wired (testDevWire): what the conformance suite's
 * harnesses share; each sets what its transport adds (epochs of the peer, sleeper counts). */
static inline void testConnAdd(engCtx* ctx, engConn* c, int connId, int peerRank, engReg* local, engReg* remote,
                               struct mscclppDevConn* dev, mscclppDevConnSignalEpochId* epoch, uint64_t* waitEpoch)
{
  c->connId = connId;
  c->peerRank = peerRank;
  c->comm = ctx->comm;
  c->ctx = ctx;
  c->ops = ctx->ops;
  c->dev = dev;
  c->nLocal = c->nRemote = 2;
  c->local = local;
  c->remote = remote;
  testDevWire(dev, ctx, connId, epoch, waitEpoch);
  ctx->conns[connId] = c;
}

#endif
