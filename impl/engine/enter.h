/*
 * enter.h: how a host data-path call (engine.c, fifo.c) enters the context
 * behind the connection or FIFO it was handed: the fork check, the live-context
 * table (ctx.h), and the refusal with its reason.
 */
#ifndef MSCCLPP_ENGINE_ENTER_H_
#define MSCCLPP_ENGINE_ENTER_H_

#include "engine.h"

/* A child forked after the library loaded must not use the data path: its
 * connections, FIFOs and proxy flags are copies of the parent's (a put would
 * write into the peer, a wait would wait on a proxy that does not exist in
 * the child). Every entry point makes the fork check of every entry point first
 * (errForked, impl/status/errs.h: one load). */

#define ENG_NOT_OURS "not a connection returned by mscclppGetAllDeviceConnections, or its communicator was destroyed"
#define ENG_CUDA_MODE \
  "this connection runs in CUDA mode: its counters and FIFO are in device memory, so its methods are for device code"

/* The refusal of ctxEnter and connEnter: leaves ctx (when entered), records why, returns NULL
 * (out of line, as a refusal is rare). */
static __attribute__((noinline)) void* engEnterRefuse(engCtx* ctx, const char* fn, const char* why)
{
  if (ctx != NULL) engLeave(ctx);
  engFail(NULL, mscclppInvalidUsage, "%s: %s", fn, why);
  return NULL;
}

/* Enters the live context behind a FIFO (engEnter) after the fork check: the one validation of a
 * device connection or FIFO handed to the data path. NULL, with the process-wide last error set,
 * when there is none; hostOnly refuses CUDA-mode contexts. On success the caller must engLeave. */
static inline __attribute__((always_inline)) engCtx* ctxEnter(struct mscclppConcurrentFifo* fifo, const char* fn,
                                                             const char* what, int hostOnly)
{
  if (errForked(fn)) return NULL;
  if (__builtin_expect(fifo == NULL, 0)) return (engCtx*)engEnterRefuse(NULL, fn, what);
  engCtx* ctx = engEnter(fifo->triggerFifo);
  if (__builtin_expect(ctx == NULL, 0)) return (engCtx*)engEnterRefuse(NULL, fn, ENG_NOT_OURS);
  if (hostOnly && __builtin_expect(ctx->devHead != NULL, 0)) return (engCtx*)engEnterRefuse(ctx, fn, ENG_CUDA_MODE);
  return ctx;
}

#endif
