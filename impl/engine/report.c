/*
 * report.c: the engine's part of the hang report. engHangCheck runs in a
 * signal wait's slow checks (every few milliseconds once the wait backs
 * off, and when a wait with a timeout gives up): with reports on, it notes
 * since when waits on the connection made no progress and, past the
 * communicator's hangReportNs, calls the Go report (impl/report.go) once
 * per communicator. engConnSnapshot reads a connection's counters for it.
 * In C because the check sits in the wait loop and the counters are the
 * engine's C structs.
 */
#include <stddef.h>

#include "_cgo_export.h"
#include "backoff.h"
#include "objects.h"
#include "report.h"

void engHangCheck(engConn* c, uint64_t want, uint64_t startNs)
{
  engComm* comm = c->comm;
  uint64_t now = engNowNs();
  if (startNs == 0 || startNs > now) startNs = now;
  if (__atomic_load_n(&c->stallWant, __ATOMIC_RELAXED) != want) {
    /* a new epoch: progress since the last stall (a wait for the same epoch keeps its start) */
    __atomic_store_n(&c->stallSince, startNs, __ATOMIC_RELAXED);
    __atomic_store_n(&c->stallWant, want, __ATOMIC_RELAXED);
  }
  uint64_t since = __atomic_load_n(&c->stallSince, __ATOMIC_RELAXED);
  if (comm->hangReportNs == 0 || now - since < comm->hangReportNs) return;
  if (__atomic_exchange_n(&comm->hangReported, 1, __ATOMIC_ACQ_REL)) return;
  engGoHangReport(comm, c, want, now - since);
}

void engConnSnapshot(engConn* c, engConnStat* s)
{
  engCtx* ctx = c->ctx;
  *s = (engConnStat){.connId = c->connId, .peerRank = c->peerRank, .tag = c->tag, .peerPid = c->peerPid};
  s->transport = c->ops != NULL ? c->ops->name : "?";
  s->device = ctx != NULL && ctx->devHead != NULL;
  struct mscclppDevConn* d = c->dev;
  if (!s->device && d != NULL) {
    if (d->waitEpochId != NULL) s->waitingFor = __atomic_load_n(d->waitEpochId, __ATOMIC_RELAXED);
    if (d->localSignalEpochId != NULL) s->signalled = __atomic_load_n(&d->localSignalEpochId->proxy, __ATOMIC_ACQUIRE);
  }
  s->signalsSent = __atomic_load_n(&c->signalsDone, __ATOMIC_RELAXED);
  s->bytesPut = __atomic_load_n(&c->bytesPut, __ATOMIC_RELAXED);
  s->stallWant = __atomic_load_n(&c->stallWant, __ATOMIC_RELAXED);
  /* a timed-out mscclppConnWaitNext undid its count: a caller polling it still waits for that epoch */
  if (!s->device && s->stallWant > s->waitingFor && s->stallWant > s->signalled) s->waitingFor = s->stallWant;
  uint64_t since = __atomic_load_n(&c->stallSince, __ATOMIC_RELAXED), now = engNowNs();
  if (s->stallWant != 0 && s->stallWant > s->signalled && since != 0 && now > since) s->stalledNs = now - since;
  if (ctx != NULL) {
    if (!s->device) s->head = __atomic_load_n(&ctx->head, __ATOMIC_RELAXED);
    s->tail = __atomic_load_n(&ctx->tail, __ATOMIC_RELAXED);
    s->served = __atomic_load_n(&ctx->served, __ATOMIC_RELAXED);
    s->proxyRunning = __atomic_load_n(&ctx->running, __ATOMIC_RELAXED);
  }
  s->peerGone = c->peerPid > 0 && engPeerGone(c->peerPid, c->peerPidfd);
  s->peerClosed = __atomic_load_n(&c->peerClosed, __ATOMIC_RELAXED);
}
