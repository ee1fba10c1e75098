/*
 * eth.h: the Ethernet transport of the C engine: host-mode puts and signals
 * to ranks on any node over one TCP connection per mscclpp connection. In C
 * because it is the data path: the initiator (proxy or host thread) writes a
 * header and the payload straight from the registered source buffer, and a
 * receive thread per connection reads the payload straight into the
 * registered destination, so a put costs what a TCP stream costs.
 *
 * Wire format (little endian), in both directions of the socket:
 *   [0:4]  "MSE1"   [4:8] type (ETH_DATA, ETH_FLAG)
 *   [8:16] DATA: destination handle   FLAG: the count of signals sent
 *   [16:24] DATA: destination offset  [24:32] DATA: size; the payload follows.
 * FENCE marks the end of what a rank sent before its proxies stopped; BYE
 * that a close is on purpose (an end of stream without it means the peer died);
 * PING that the sender is alive (sent when a tick passed with nothing else).
 * DATASIG is a put with its signal in one frame (one sendmsg, one segment
 * where it fits): a DATA header and payload, then the 8-byte signal count
 * FLAG would have carried; the receiver lands the payload, then the count.
 * A signal sends the count of signals completed on the connection, after the
 * data of every counted signal (the stream is ordered), so it never announces
 * data still in flight. flush() needs no round trip: a put returns once the
 * kernel has copied its source, which may then be reused.
 */
#ifndef MSCCLPP_ETH_H_
#define MSCCLPP_ETH_H_

#include "engine.h"

#define ETH_MAGIC 0x3145534du /* "MSE1" */
#define ETH_DATA 1u
#define ETH_FLAG 2u
#define ETH_FENCE 3u /* [8:16] fence number: everything sent before it has been received */
#define ETH_BYE 4u   /* the sender is closing the connection on purpose */
#define ETH_REG 5u   /* [8:16] the receiver's mscclppRegisterBuffer index, [16:24] offset, [24:32] size; payload */
#define ETH_PING 6u  /* nothing else went out for a tick: the sender and the link are alive */
#define ETH_DATASIG 7u /* as DATA, then the payload, then an 8-byte signal count (as FLAG's [8:16]) */
#define ETH_SIG_BYTES 8 /* the count after a DATASIG payload */
#define ETH_HDR_BYTES 32

struct ethCtx;
struct cudaProxyState; /* cuda/calls.h: a CUDA-mode proxy's context and streams */

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

/* Buffers of mscclppRegisterBuffer a peer writes with ETH_REG, per connection: chunks that
 * never move (the receive thread reads them while more are added), at most ETH_MAX_REGS. */
#define ETH_REG_CHUNK 64
#define ETH_MAX_REGS (64 * ETH_REG_CHUNK)
/* Adds host memory [ptr, ptr+size) as the next registration of connection connId of e (before
 * or after the connection started); returns its index, or -1 (too many, or out of memory). */
int ethAddReg(struct ethCtx* e, int connId, void* ptr, uint64_t size);
/* Sends size bytes of host memory src to offset off of the peer's registration idx on c
 * (mscclppRegisteredBufferWrite): returns once the kernel took them; later signals on c follow
 * them on the stream. Returns a mscclppResult_t. */
int ethWriteReg(engConn* c, uint64_t idx, uint64_t off, const void* src, uint64_t size);

extern const engOps ethOps;

#endif
