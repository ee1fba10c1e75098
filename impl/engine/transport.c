/*
 * transport.c: the named defaults of transport.h for the ops-table entries a
 * transport leaves out, engOpsFill, which puts them in, and engConnSetOps,
 * which gives a connection a table of its own.
 */
#include "transport.h"

#include "../../include/mscclpp.h"
#include "objects.h"

int engOpsNoOp(struct engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle,
               uint64_t srcOff, uint64_t size)
{
  (void)type, (void)dstHandle, (void)dstOff, (void)srcHandle, (void)srcOff, (void)size;
  return engConnFail(c, mscclppInternalError, "the %s transport has no operations", c->ops->name);
}

int engOpsNoSignal(struct engConn* c, uint64_t value)
{
  (void)value;
  return engConnFail(c, mscclppInternalError, "the %s transport cannot signal", c->ops->name);
}

int engOpsSplitPutSignal(struct engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                         uint64_t size, uint64_t value)
{
  int rc = c->ops->op(c, mscclppData, dstHandle, dstOff, srcHandle, srcOff, size);
  return rc != mscclppSuccess ? rc : c->ops->sendSignal(c, value);
}

int engOpsNoWaitPoll(struct engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w)
{
  (void)c, (void)epoch, (void)want, (void)w;
  return ENG_POLL_IDLE;
}

int engOpsNoWaitPending(struct engConn* c)
{
  (void)c;
  return 0;
}

int engOpsNoThreadInit(struct engCtx* ctx)
{
  (void)ctx;
  return mscclppSuccess;
}

int engOpsNoPublishTail(struct engCtx* ctx, uint64_t tail)
{
  (void)ctx, (void)tail;
  return mscclppSuccess;
}

void engOpsNoClose(struct engCtx* ctx) { (void)ctx; }

void engOpsFill(engOps* dst, const engOps* src)
{
  *dst = *src;
  if (dst->name == NULL) dst->name = "unnamed";
  if (dst->op == NULL) dst->op = engOpsNoOp;
  if (dst->sendSignal == NULL) dst->sendSignal = engOpsNoSignal;
  if (dst->putSignal == NULL) dst->putSignal = engOpsSplitPutSignal;
  if (dst->waitPoll == NULL) dst->waitPoll = engOpsNoWaitPoll;
  if (dst->waitPending == NULL) dst->waitPending = engOpsNoWaitPending;
  if (dst->threadInit == NULL) dst->threadInit = engOpsNoThreadInit;
  if (dst->publishTail == NULL) dst->publishTail = engOpsNoPublishTail;
  if (dst->close == NULL) dst->close = engOpsNoClose;
}

void engConnSetOps(engConn* c, const engOps* ops)
{
  if (!ops->opsComplete && c->ctx != NULL) __atomic_store_n(&c->ctx->syncsFree, 0, __ATOMIC_SEQ_CST);
  engOpsFill(&c->ownOps, ops);
  __atomic_store_n(&c->ops, &c->ownOps, __ATOMIC_RELEASE);
}
