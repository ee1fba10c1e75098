/*
 * ethconn.h: what the files of the Ethernet transport share (eth.h lists
 * them): the per-connection and per-context state, and what each file below
 * eth.c offers the ones above it. Private to impl/eth.
 */
#ifndef MSCCLPP_ETHCONN_H_
#define MSCCLPP_ETHCONN_H_

#include <pthread.h>
#include <sys/uio.h>

#include "../engine/engine.h"
#include "ethwire.h"

struct cudaProxyState; /* cuda/calls.h: a CUDA-mode proxy's context and streams */

/* Buffers of mscclppRegisterBuffer a peer writes with ETH_REG, per connection: chunks that
 * never move (the receive thread reads them while more are added), at most ETH_MAX_REGS. */
#define ETH_REG_CHUNK 64
#define ETH_MAX_REGS (64 * ETH_REG_CHUNK)

typedef struct ethConn {
  int fd;
  pthread_mutex_t sendLock; /* one message at a time on the socket */
  pthread_t rx;
  int rxStarted;
  volatile int closing; /* set by close: EOF and errors from here on are expected */
  volatile int peerBye; /* the peer said it closes on purpose */
  uint64_t fenceSeen;   /* the last fence number received */
  char* sendStage;      /* CUDA mode: pinned buffers device memory travels through, each */
  char* recvStage;      /* used as two halves (double buffering, stage.c) */
  uint64_t stageBytes;
  void* sendStream;     /* CUDA mode: the connection's own streams for its staging copies */
  void* recvStream;
  engConn* c;
  uint64_t deadNs;     /* no progress (send) or nothing received for this long: the peer is unreachable */
  uint64_t pingNs;     /* the tick: a PING goes out when nothing else did for this long */
  uint64_t lastSendNs; /* atomics: when a send last made progress, when a byte last came in */
  uint64_t lastRecvNs;
  volatile int dead; /* declared unreachable: the socket is shut down, every send fails at once */
  uint32_t reader;    /* who reads frames (ethread.c): ETH_READER_NONE, _RX or _WAIT */
  int direct;         /* host mode: a wait may read frames itself (ethWaitPoll) */
  volatile int ended; /* the stream ended (recorded): no one reads frames any more */
  uint32_t waitReads;   /* how often a wait took the token (the receive thread leaves it to waits) */
  uint32_t rxSeenReads; /* the receive thread's own: waitReads when it parked */
  int rxHanded;         /* the receive thread's own: it handed the token to a wait */
  int rxInFrame;          /* the receive thread reads a frame (ethread.c's waitFrame) */
  uint32_t rxFrames;      /* frames it finished (a futex word: waits asleep over a frame wake on it) */
  uint32_t frameSleepers; /* waits asleep on rxFrames */
  uint64_t spinNs;      /* the reader's own: how long a frame's receive (ethRecvIov) may spin on a
                         * non-blocking recv before it blocks (a reading wait's spin budget; 0: never) */
} ethConn;

enum { ETH_READER_NONE = 0, ETH_READER_RX = 1, ETH_READER_WAIT = 2 };

/* A wait that reads the socket looks at its own conditions this often (as a futex wait); the
 * socket's SO_RCVTIMEO in that mode (ethread.c). */
#define ETH_WAIT_POLL_NS 1000000ull

typedef struct ethRegs {
  engReg* chunk[ETH_MAX_REGS / ETH_REG_CHUNK];
  int n; /* published with release after the entry is filled */
} ethRegs;

struct ethCtx {
  ethConn* conns[ENG_MAX_CONNS];
  ethRegs* regs[ENG_MAX_CONNS]; /* mscclppRegisterBuffer registrations by connId, or NULL */
  struct cudaProxyState* cuda; /* CUDA mode, else NULL */
};

static inline struct ethCtx* ctxState(engConn* c) { return (struct ethCtx*)c->ctx->transport; }

static inline ethConn* connState(engConn* c)
{
  struct ethCtx* e = ctxState(c);
  return e == NULL ? NULL : e->conns[c->connId];
}

/* socket.c. Sends every byte of iov (advancing it); 0, or the errno that stopped it: ETIMEDOUT
 * when nothing went out for deadMs, EHOSTUNREACH once the connection is declared dead,
 * ESHUTDOWN when the context is closing. */
int ethSendAll(ethConn* s, struct iovec* iov, int n);
/* Writes a message header: ETH_MAGIC, type and the three words. */
void ethPutHeader(unsigned char* h, uint32_t type, uint64_t a, uint64_t b, uint64_t c);
/* Declares the connection dead: later sends fail at once, a blocked sender is released. */
void ethMarkDead(ethConn* s);
/* Records a failed send on c (a peer unreachable, or gone) and returns its code. */
int ethSendFailed(engConn* c, ethConn* s, int err);
/* Reads exactly n bytes; 0, -1 on a clean end of stream before the first byte, else an errno
 * (ETIMEDOUT: nothing came in for deadMs). */
int ethRecvAll(ethConn* s, void* buf, size_t n);
/* The same for every byte of iov (advancing it): one recvmsg for a payload and what follows it. */
int ethRecvIov(ethConn* s, struct iovec* iov, int n);
/* The receive tick (a PING when due); ETIMEDOUT when nothing came for deadMs. */
int ethRxTick(ethConn* s);
/* After a frame came in (lastRecvNs its arrival): a PING when due. A peer that only receives
 * must still say it is alive, and a steady stream of frames keeps its receives from ever
 * timing out into the tick. */
void ethRxFramePing(ethConn* s);

/* ethrx.c: one frame whose header is hdr, its payload still in the socket: 0 to go on, 1 when the
 * stream ended (recorded); *woke is set when its count woke a sleeping wait. The record of why
 * reading stopped. */
int ethRxFrame(ethConn* s, const unsigned char* hdr, int* woke);
void ethRxFailed(ethConn* s, int rc, uint64_t inPut);

/* ethread.c: the receive thread of connection s; the end of reading (a parked receive thread
 * exits); the waitPoll of ethOps: a host-mode wait reads frames itself while no other thread
 * does (ENG_POLL_BLOCKED), until *epoch reaches want, the wait's deadline, or a condition the
 * wait looks at. */
void* ethRxMain(void* arg);
void ethReaderEnd(ethConn* s);
int ethWaitPoll(engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w);

/* stage.c, CUDA mode: a put from device memory (the header, then size bytes at device address
 * src) under the send lock; a put of n bytes into device memory at dst; a signal's count into my
 * device epoch after the data it counts; the connection's streams made and freed. */
int ethSendStaged(engConn* c, ethConn* s, unsigned char* hdr, uint64_t src, uint64_t size);
int ethRecvStaged(engConn* c, ethConn* s, uint64_t dst, uint64_t n);
int ethFlagStaged(engConn* c, ethConn* s, uint64_t epoch, uint64_t count);
int ethConnStreamsNew(struct ethCtx* e, ethConn* s);
void ethConnStreamsFree(struct ethCtx* e, ethConn* s);

#endif
