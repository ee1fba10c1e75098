/*
 * eth.h: the Ethernet transport of the C engine: host-mode puts and signals
 * to ranks on any node over one TCP connection per mscclpp connection. In C
 * because it is the data path: the initiator (proxy or host thread) writes a
 * header and the payload straight from the registered source buffer, and a
 * receive thread per connection reads the payload straight into the
 * registered destination, so a put costs what a TCP stream costs. The wire
 * format is ethwire.h's; the files of the transport, from the top: eth.c
 * (the ops table, setup, fences, close), ethread.c (who reads a socket: the
 * receive thread or a wait), ethrx.c (a received frame), stage.c (CUDA mode's
 * staging), socket.c (sending and receiving), sharing ethconn.h.
 */
#ifndef MSCCLPP_ETH_H_
#define MSCCLPP_ETH_H_

#include "ethconn.h"

/* The transport state of one proxy context: its connections' sockets by connId. In CUDA mode
 * (cuda non-NULL: the context's FIFO head, epochs and buffers are in device memory) the
 * proxy thread makes the CUDA context current and publishes the FIFO tail to the device, and
 * device memory travels through each connection's pinned staging buffers. */
struct ethCtx* ethCtxNew(struct cudaProxyState* cuda);
/* Hands the connected socket fd of connection c (of the context c->ctx) to the transport and
 * starts its receive thread; in CUDA mode sendStage and recvStage are pinned buffers of
 * stageBytes each (the caller frees them after the context is closed). A peer from which nothing
 * came for deadMs, or to which a send made no progress for deadMs, is declared unreachable
 * (mscclppRemoteError naming it); the receive thread sends a PING when the link is otherwise idle. */
int ethConnStart(engConn* c, int fd, void* sendStage, void* recvStage, uint64_t stageBytes, int64_t deadMs);

/* Sends fence number seq on every connection of e, then waits until every peer's fence seq
 * arrived (so all their earlier data has landed here), a peer is gone, or timeoutMs passes.
 * Returns a mscclppResult_t; err gets the reason. */
int ethFence(struct ethCtx* e, uint64_t seq, int64_t timeoutMs, char* err, int errLen);

/* Ends every connection of e for the destroy of its communicator, without waiting for any peer:
 * marks them closing (sends give up), says goodbye where no frame is in progress, and shuts the
 * sockets' sending side down, which releases a sender blocked on a busy or lost peer at once. The
 * receive threads go on until the context's close op. */
void ethAbort(struct ethCtx* e);
/* ethAbort of one connection (s may be NULL). */
void ethAbortConn(ethConn* s);

/* Adds host memory [ptr, ptr+size) as the next registration of connection connId of e (before
 * or after the connection started); returns its index, or -1 (too many, or out of memory). */
int ethAddReg(struct ethCtx* e, int connId, void* ptr, uint64_t size);
/* Sends size bytes of host memory src to offset off of the peer's registration idx on c
 * (mscclppRegisteredBufferWrite): returns once the kernel took them; later signals on c follow
 * them on the stream. Returns a mscclppResult_t. */
int ethWriteReg(engConn* c, uint64_t idx, uint64_t off, const void* src, uint64_t size);

extern const engOps ethOps;

#endif
