/*
 * report.h: a connection's counters as the hang report and mscclppCommReport
 * show them (report.c fills one, impl/report.go formats it).
 */
#ifndef MSCCLPP_ENGINE_REPORT_H_
#define MSCCLPP_ENGINE_REPORT_H_

#include <stdint.h>

struct engConn;

typedef struct engConnStat {
  int connId, peerRank, tag, peerPid;
  const char* transport; /* the ops table's name */
  int device;            /* CUDA mode: the epochs and the FIFO's head live in device memory (not read) */
  uint64_t waitingFor;   /* the epoch the last wait on this side waited for (*waitEpochId) */
  uint64_t signalled;    /* the epoch the peer's signals reached, as seen here (localSignalEpochId->proxy) */
  uint64_t signalsSent;  /* signals this side sent on the connection */
  uint64_t bytesPut;     /* bytes this side put (host calls and proxy triggers) */
  uint64_t stallWant;    /* the epoch a wait without progress waited for (0: none seen) */
  uint64_t stalledNs;    /* for how long, up to now */
  uint64_t head, tail, served; /* the context's FIFO */
  int proxyRunning;
  int peerGone;   /* peerPid is set and that process exited */
  int peerClosed; /* the transport saw the peer's side close */
} engConnStat;

/* A signal wait on c for epoch want, begun at startNs (engNowNs), has not ended: when c's
 * communicator reports hangs and no progress was made for hangReportNs, reports once.
 * Called from a wait's slow checks only. */
void engHangCheck(struct engConn* c, uint64_t want, uint64_t startNs);

/* Reads c's counters into *s (relaxed loads: a snapshot of a running connection). */
void engConnSnapshot(struct engConn* c, engConnStat* s);

#endif
