/*
 * testconn.h: for this package's test harnesses (harness.go, fifoharness.go;
 * cgo preambles cannot share a C function otherwise): a new context of ops on
 * comm, with conn as its connection 0 (transport state given) and dev as that
 * connection's device view, its FIFO pointing at the context.
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

#endif
