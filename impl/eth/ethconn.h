/*
 * ethconn.h: the Ethernet transport's per-connection state, shared by eth.c
 * (sockets, receive threads) and stage.c (CUDA mode's double-buffered
 * staging through pinned memory on the connection's own streams). Internal
 * to impl/eth.
 */
#ifndef MSCCLPP_ETHCONN_H_
#define MSCCLPP_ETHCONN_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "eth.h"

typedef struct ethConn {
  int fd;
  pthread_mutex_t sendLock; /* one message at a time on the socket */
  pthread_t rx;
  int rxStarted;
  volatile int closing; /* set by close: EOF and errors from here on are expected */
  volatile int peerBye; /* the peer said it closes on purpose */
  uint64_t fenceSeen;   /* the last fence number received */
  char* sendStage;      /* CUDA mode: pinned buffers device memory travels through, each */
  char* recvStage;      /* used as two halves (double buffering) */
  uint64_t stageBytes;
  void* sendStream;     /* CUDA mode: the connection's own streams for its staging copies */
  void* recvStream;
  engConn* c;
  uint64_t deadNs;     /* no progress (send) or nothing received for this long: the peer is unreachable */
  uint64_t pingNs;     /* the tick: a PING goes out when nothing else did for this long */
  uint64_t lastSendNs; /* atomics: when a send last made progress, when a byte last came in */
  uint64_t lastRecvNs;
  volatile int dead; /* declared unreachable: the socket is shut down, every send fails at once */
} ethConn;

typedef struct ethRegs {
  engReg* chunk[ETH_MAX_REGS / ETH_REG_CHUNK];
  int n; /* published with release after the entry is filled */
} ethRegs;

struct ethCtx {
  ethConn* conns[ENG_MAX_CONNS];
  ethRegs* regs[ENG_MAX_CONNS]; /* mscclppRegisterBuffer registrations by connId, or NULL */
  struct cudaP2PState* cuda; /* CUDA mode, else NULL */
};

/* cuda/calls.h (the cuda package, linked into the same library) */
int cudaStateThreadInit(struct engCtx* ctx, struct cudaP2PState* st);
int cudaStatePublishTail(struct engCtx* ctx, struct cudaP2PState* st, uint64_t tail);
int cudaStageStreamNew(struct cudaP2PState* st, void** stream, char* err, int errLen);
void cudaStageStreamFree(struct cudaP2PState* st, void* stream);
int cudaStageAsync(struct cudaP2PState* st, void* stream, uint64_t dst, uint64_t src, size_t n, int toDevice, char* err,
                   int errLen);
int cudaStageWait(struct cudaP2PState* st, void* stream, char* err, int errLen);

static inline struct ethCtx* ethCtxState(engConn* c) { return (struct ethCtx*)c->ctx->transport; }

/* eth.c: every byte of iov sent (0, or the errno that stopped it); exactly n bytes received (0,
 * -1 on a clean end of stream before the first byte, else an errno); a failed send recorded. */
int ethSendAll(ethConn* s, struct iovec* iov, int n);
int ethRecvAll(ethConn* s, void* buf, size_t n);
int ethSendFailed(engConn* c, ethConn* s, int err);

/* stage.c: a put from device memory (the header, then size bytes at device address src), under
 * the send lock; a put of n bytes into device memory at dst; the connection's streams freed. */
int ethSendStaged(engConn* c, ethConn* s, unsigned char* hdr, uint64_t src, uint64_t size);
int ethRecvStaged(engConn* c, ethConn* s, uint64_t dst, uint64_t n);
void ethConnStreamsFree(struct ethCtx* e, ethConn* s);

#endif
