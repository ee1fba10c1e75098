/*
 * transport.c: the named no-op defaults of transport.h, for the ops-table
 * entries a transport does not need.
 */
#include "transport.h"

#include "mscclpp.h"

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
