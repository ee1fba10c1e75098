/*
 * engine.h: the host data path of libmscclpp, in C because it is the hot
 * path: host-initiated ops (put, signal, flush, wait), the host side of the
 * trigger FIFO, and the proxy thread that serves FIFO triggers. None of it
 * calls into Go; Go builds these structs at connection setup and reads the
 * error slot. The header Go and the transports' C include: the object graph
 * (objects.h), the contract with a transport (transport.h), contexts
 * (ctx.h), copies (copy.h), and what engine.c, proxy.c and seqwait.c offer.
 * The C half of the public data-path API (mscclppConnOp, mscclppConnWait,
 * ...) is engine.c, and fifo.c for mscclppFifoPush and mscclppFifoWaitServed,
 * declared in include/mscclpp.h.
 */
#ifndef MSCCLPP_ENGINE_H_
#define MSCCLPP_ENGINE_H_

#include "copy.h"
#include "ctx.h"
#include "objects.h"
#include "conndo.h"
#include "transport.h"

/* Starts the proxy thread of ctx (proxy.c). */
int engProxyStart(engCtx* ctx);
/* Drains the FIFO, then stops and joins the proxy thread. */
void engProxyStop(engCtx* ctx);

/* engConnDo out of line: for code built outside this package (tests, harnesses), which then
 * always runs the engine's current path. */
int engConnDoCall(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                  uint64_t size);

/* Why a put was refused (engCheckPut), for engPutRefused's message. */
enum { ENG_PUT_SIGNAL_SLOT = 1, ENG_PUT_NO_HANDLE = 2, ENG_PUT_SRC_RANGE = 3, ENG_PUT_DST_RANGE = 4 };
/* Records on c why a put was refused (out of line: engCheckPut's rare path); returns
 * mscclppInvalidArgument. */
int engPutRefused(engConn* c, int why, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                  uint64_t size);

/* Checks a put's handles and ranges against the registrations, each rule written once here; on
 * success sets *src and *dst, else records why (engPutRefused) and returns its code. Inline: it
 * is on every transport's host data path. */
static inline int engCheckPut(engConn* c, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
                              uint64_t size, const engReg** src, const engReg** dst)
{
  int why = 0;
  if (srcHandle == 0 || dstHandle == 0) /* handle 0 is the connection's signal slot: only signals write it */
    why = ENG_PUT_SIGNAL_SLOT;
  else if (c->nLocal <= 0 || c->nRemote <= 0 || srcHandle >= (uint64_t)c->nLocal || dstHandle >= (uint64_t)c->nRemote)
    why = ENG_PUT_NO_HANDLE;
  else if (srcOff > c->local[srcHandle].size || size > c->local[srcHandle].size - srcOff)
    why = ENG_PUT_SRC_RANGE;
  else if (dstOff > c->remote[dstHandle].size || size > c->remote[dstHandle].size - dstOff)
    why = ENG_PUT_DST_RANGE;
  if (__builtin_expect(why != 0, 0)) {
    *src = *dst = NULL;
    return engPutRefused(c, why, dstHandle, dstOff, srcHandle, srcOff, size);
  }
  *src = &c->local[srcHandle];
  *dst = &c->remote[dstHandle];
  return mscclppSuccess;
}

/* Waits (backoff.h, comm's waitCfg; brief: a short spin and yield phase) until *seq reaches want,
 * published by process pid (asleep on a futex counted in *sleepers once the back-off would sleep):
 * ENG_SEQ_REACHED, or why not: timeoutMs passed, pid is gone, or comm recorded a remote error
 * (seqwait.c). */
enum { ENG_SEQ_REACHED = 0, ENG_SEQ_TIMEOUT = 1, ENG_SEQ_GONE = 2, ENG_SEQ_REMOTE = 3 };
int engWaitSeq(engComm* comm, volatile uint64_t* seq, uint64_t want, int pid, int64_t timeoutMs, uint32_t* sleepers,
               int brief);
/* Stores v into *seq and wakes the threads asleep on it (engWaitSeq) when *sleepers counts any. */
void engPublishSeq(volatile uint64_t* seq, uint64_t v, uint32_t* sleepers);

#endif
