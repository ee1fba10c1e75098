/*
 * mscclpp.h: the MSCCL++ 0.1 C API, as implemented by the Go-built
 * libmscclpp.so.0. Binary compatible with the original header: every enum
 * value, struct offset and function signature is the same. Extensions are
 * marked "Extension" and all start with mscclpp.
 *
 * Self-contained; works from C11, C++11..C++20 and CUDA (nvcc). It includes
 * mscclppfifo.h (the trigger FIFO) and mscclppdevconn.h (the connection: its
 * methods run on the GPU under nvcc and on host threads everywhere, and C
 * programs get them as the mscclppDevConn* inline functions).
 */
#ifndef MSCCLPP_H_
#define MSCCLPP_H_

#include "mscclppfifo.h"

#include <stdio.h> /* FILE, for mscclppCommReport */

#define MSCCLPP_MAJOR 0
#define MSCCLPP_MINOR 1
#define MSCCLPP_PATCH 0
#define MSCCLPP_VERSION (MSCCLPP_MAJOR * 10000 + MSCCLPP_MINOR * 100 + MSCCLPP_PATCH)

#define MSCCLPP_UNIQUE_ID_BYTES 128

#ifdef __cplusplus
#include <vector>
#define MSCCLPP_DEFAULT_ARG(x) = x
#else
#define MSCCLPP_DEFAULT_ARG(x)
#endif

/* Opaque communicator. */
struct mscclppComm;
typedef struct mscclppComm* mscclppComm_t;

/* Opaque id: root address and a per-communicator secret; pass it by value. */
typedef struct
{
  char internal[MSCCLPP_UNIQUE_ID_BYTES];
} mscclppUniqueId;

typedef enum
{
  mscclppSuccess = 0,
  mscclppUnhandledCudaError = 1,
  mscclppSystemError = 2,
  mscclppInternalError = 3,
  mscclppInvalidArgument = 4,
  mscclppInvalidUsage = 5,
  mscclppRemoteError = 6,
  mscclppInProgress = 7,
  mscclppNumResults = 8
} mscclppResult_t;

typedef enum
{
  mscclppTransportP2P = 0,
  mscclppTransportSHM = 1,
  mscclppTransportIB = 2,
  mscclppTransportEthernet = 3, /* extension: host memory to a rank on any node over TCP */
} mscclppTransport_t;

typedef uint32_t mscclppBufferHandle_t;

/* A connection's signal counters (16 bytes): device counts my signals, proxy
 * is written by the peer's side when the peer signals me. */
struct __attribute__((aligned(16))) mscclppDevConnSignalEpochId
{
  uint64_t device;
  uint64_t proxy;
};
typedef struct mscclppDevConnSignalEpochId mscclppDevConnSignalEpochId;

/* The connection: struct mscclppDevConn, its methods and host-mode operations. */
#include "mscclppdevconn.h"


#ifdef __cplusplus
/* One entry per connection, filled by mscclppRegisterBuffer. */
struct mscclppRegisteredMemoryP2P
{
  void* remoteBuff;  /* the peer's mapped buffer (P2P, or SHM when mapped), else NULL */
  const void* IbMr;  /* the local memory region (IB), else NULL */
};

struct mscclppRegisteredMemory
{
  std::vector<mscclppRegisteredMemoryP2P> p2p;
};

/* The host side of a connection, as upstream declared it. */
struct mscclppHostConn
{
  virtual ~mscclppHostConn() = default;
  virtual void put(uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize) = 0;
  virtual void put(mscclppBufferHandle_t dst, uint64_t dstDataOffset, mscclppBufferHandle_t src,
                   uint64_t srcDataOffset, uint64_t dataSize) = 0;
  virtual void signal() = 0;
  virtual void wait() = 0;
  virtual void flush() = 0;
};
typedef struct mscclppHostConn mscclppHostConn_t;
#endif

typedef void (*mscclppLogHandler_t)(const char* msg);

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The 22 functions of the MSCCL++ 0.1 API ----
 *
 * Results: mscclppSuccess, or an error code whose one-line explanation
 * mscclppGetLastError returns (for the communicator, and process-wide) and
 * which is logged at WARN. Bad input (NULL pointers, ranks or indices out of
 * range) is mscclppInvalidArgument; a call in the wrong order, on a NULL,
 * destroyed or foreign communicator, or in a child forked after the library
 * was loaded is mscclppInvalidUsage; a peer that died or never arrived
 * within the bootstrap timeout is mscclppRemoteError. No call crashes on
 * bad input.
 *
 * Threads: every function may be called from any thread. Calls that change
 * a communicator (connect, register, setup, proxy launch/stop, destroy) are
 * serialised by the library. Collectives (marked "Collective") must be
 * called by every rank of the communicator, in the same order on every
 * rank, so a communicator's collectives belong to one thread at a time.
 * Different communicators are independent: threads may create and use one
 * each concurrently. */

/* mscclppDefaultLogHandler: the default destination of log lines.
 *   msg   one complete line, newline included (NULL: nothing is written)
 * Writes msg unchanged, in one piece, to the debug stream: the file named by
 * MSCCLPP_DEBUG_FILE when one is open, else stdout. Returns nothing.
 * Thread-safe: concurrent lines never interleave. */
void mscclppDefaultLogHandler(const char* msg);

/* mscclppSetLogHandler: send every log line to handler instead.
 *   handler  called with each line (as mscclppDefaultLogHandler gets it);
 *            NULL restores mscclppDefaultLogHandler
 * Process-wide, for every communicator. MSCCLPP_DEBUG and
 * MSCCLPP_DEBUG_SUBSYS still decide which lines exist. Always
 * mscclppSuccess. Thread-safe; handler may be called from any thread,
 * including the library's proxy threads, and concurrently: it must be
 * thread-safe itself. */
mscclppResult_t mscclppSetLogHandler(mscclppLogHandler_t handler);

/* mscclppSetBootstrapConnTimeout: bound every bootstrap wait.
 *   timeout  seconds, > 0 (default 30)
 * Process-wide. A communicator takes the value when it is created and keeps
 * it for its whole life (joining, bootstrap messages, collectives over TCP
 * and through the node's shared memory, its transports' liveness bounds):
 * set it before mscclppCommInitRank*; a later change bounds only
 * communicators created after it. A wait that runs out fails with
 * mscclppRemoteError naming the missing rank. timeout <= 0:
 * mscclppInvalidArgument. Thread-safe. */
mscclppResult_t mscclppSetBootstrapConnTimeout(int timeout);

/* mscclppGetUniqueId: create the id of a new communicator.
 *   uniqueId  out: the root's address and a random per-communicator secret
 *             (128 opaque bytes, to be handed to every rank out of band)
 * Starts the root listener in the calling process, which must stay alive
 * until every rank has called mscclppCommInitRankFromId with the id (it is
 * usually rank 0's). The root listens at MSCCLPP_COMM_ID (ip:port) when
 * set, else on an interface chosen by MSCCLPP_SOCKET_IFNAME /
 * MSCCLPP_SOCKET_FAMILY. Connections that do not present the secret are
 * dropped. Errors: NULL uniqueId, malformed MSCCLPP_COMM_ID:
 * mscclppInvalidArgument; no usable interface, cannot listen:
 * mscclppSystemError or mscclppInvalidUsage. Thread-safe. */
mscclppResult_t mscclppGetUniqueId(mscclppUniqueId* uniqueId);

/* mscclppCommInitRank: join a communicator whose rank 0 listens at an address.
 *   comm        out: the new communicator (NULL on failure)
 *   nranks      ranks in all, 1..1024
 *   ipPortPair  the root's "ip:port", "[ipv6]:port" or "host:port"; rank 0
 *               listens there, the others connect to it
 *   rank        this process's rank, 0..nranks-1
 * Collective: blocks until all nranks ranks have arrived (each waits at
 * most the bootstrap timeout, then fails with mscclppRemoteError naming the
 * missing rank). Ranks with the same host identity (MSCCLPP_HOSTID, default
 * host name + boot id) share a node shared-memory segment. Starts in host
 * mode; its first P2P connection (mscclppConnect) moves it to CUDA mode on
 * the GPU whose context allocated that buffer (MSCCLPP_DEVICE=host refuses
 * P2P; MSCCLPP_DEVICE=cuda makes init fail with mscclppUnhandledCudaError
 * where the driver does not load or cuInit fails). Errors: NULL comm or
 * ipPortPair, nranks or rank out of range, malformed address:
 * mscclppInvalidArgument. Thread-safe: threads may each create their own
 * communicator concurrently. */
mscclppResult_t mscclppCommInitRank(mscclppComm_t* comm, int nranks, const char* ipPortPair, int rank);

/* mscclppCommInitRankFromId: join a communicator made with mscclppGetUniqueId.
 *   comm    out: the new communicator (NULL on failure)
 *   nranks  ranks in all, 1..1024
 *   id      the id from mscclppGetUniqueId, passed by value (the same on every rank)
 *   rank    this process's rank, 0..nranks-1
 * Collective; otherwise as mscclppCommInitRank. Errors: NULL comm, nranks
 * or rank out of range: mscclppInvalidArgument; ranks that do not all
 * arrive within the bootstrap timeout: mscclppRemoteError. Thread-safe. */
mscclppResult_t mscclppCommInitRankFromId(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank);

/* mscclppBootstrapAllGather: gather size bytes from every rank.
 *   comm  the communicator
 *   data  nranks slots of size bytes; slot r (bytes r*size .. r*size+size-1)
 *         is rank r's: this rank's slot is the input, every other slot is
 *         overwritten with that rank's
 *   size  bytes per rank, > 0, the same on every rank
 * Collective. On one node and up to 64 KiB per rank it goes through the
 * node's shared memory, else over the bootstrap's TCP connections. Errors:
 * NULL data, size <= 0: mscclppInvalidArgument; ranks disagreeing on size:
 * mscclppInvalidUsage (where detected: the shared-memory path); a rank that died or did not arrive within the
 * bootstrap timeout: mscclppRemoteError. */
mscclppResult_t mscclppBootstrapAllGather(mscclppComm_t comm, void* data, int size);

/* mscclppBootstrapBarrier: return once every rank has entered it.
 *   comm  the communicator
 * Collective. Errors: a rank that died or did not arrive within the
 * bootstrap timeout: mscclppRemoteError. */
mscclppResult_t mscclppBootstrapBarrier(mscclppComm_t comm);

/* mscclppCommDestroy: free a communicator.
 *   comm  the communicator; NULL: nothing to do (mscclppSuccess)
 * Stops its proxies (without a barrier: call mscclppProxyStop first for
 * that), releases the connections, the mappings of peers' buffers, the node
 * segment and the bootstrap connections. Buffers the application passed in
 * stay the application's. Local, as upstream's: it never waits for a peer
 * (busy, stopped, unreachable or gone) and does not drain: a send in
 * progress gives up, and peers that still use their connections to this
 * rank fail with mscclppRemoteError on them. An orderly drain is the
 * application's, before the destroy: the receiver's wait for the signal
 * after the last put, or mscclppProxyStop on every rank. In CUDA mode
 * with P2P connections, device memory its P2P peers map through CUDA IPC
 * is freed only once each of them has closed those mappings (their own
 * mscclppCommDestroy does), after this call returned (never, if a peer
 * does not within the bootstrap timeout: then at the process's exit). Calls already
 * inside the communicator finish first (a wait notices the destroy within
 * a millisecond and returns mscclppInvalidUsage). Afterwards the handle is
 * invalid: any call with it, a second destroy included, is
 * mscclppInvalidUsage, and the device connection arrays it handed out stay
 * mapped but zeroed (a stale connection is refused, never followed). */
mscclppResult_t mscclppCommDestroy(mscclppComm_t comm);

/* mscclppGetErrorString: the fixed text of a result code.
 *   result  any value
 * Returns a static string, never NULL: "no error", "unhandled cuda error",
 * "unhandled system error", "internal error", "invalid argument",
 * "invalid usage", "remote process exited or there was a network error",
 * "MSCCL++ operation in progress"; any other value: "unknown result code".
 * Thread-safe; works even in a forked child. */
const char* mscclppGetErrorString(mscclppResult_t result);

/* mscclppConnect: declare a connection to remoteRank, with a buffer.
 *   comm           the communicator
 *   remoteRank     the peer, 0..nranks-1, not this rank
 *   tag            pairs the connection with the peer's: the peer declares
 *                  the mirror connection (remoteRank = this rank, same tag);
 *                  one connection per (remoteRank, tag)
 *   localBuff      the buffer puts read from here and the peer's puts write
 *                  into (registered as handle 1; handle 0 is the signal slot)
 *   buffSize       its size in bytes, > 0
 *   transportType  mscclppTransportSHM (host memory, ranks of one node),
 *                  mscclppTransportP2P (ranks of one node: in CUDA mode device
 *                  memory through CUDA IPC; in host mode -- no CUDA driver in
 *                  use, or MSCCLPP_DEVICE=host -- host memory, carried exactly
 *                  like SHM), mscclppTransportIB (RDMA writes through
 *                  libibverbs, loaded at run time; any node; in CUDA mode
 *                  device memory is registered for GPUDirect RDMA: a
 *                  dma-buf (cuMemGetHandleForAddressRange +
 *                  ibv_reg_dmabuf_mr) where offered, else ibv_reg_mr on the
 *                  device pointer (nvidia-peermem); neither: setup fails
 *                  with mscclppSystemError naming both, nothing is staged),
 *                  mscclppTransportEthernet (extension: TCP; any node)
 *   ibDev          the IB device for mscclppTransportIB (a verbs name such
 *                  as "mlx5_0", a network interface or a PCI address), else
 *                  NULL
 * The connection's index is the number of Connect calls before it (the
 * order of mscclppGetAllDeviceConnections). It may be declared at any time,
 * also after a mscclppConnectionSetup: nothing is exchanged until the next
 * mscclppConnectionSetup. Errors: remoteRank out of range or this rank,
 * NULL localBuff or buffSize 0 (use mscclppConnectWithoutBuffer), a second
 * connection with the same (remoteRank, tag), IB with NULL ibDev or a
 * device this host does not have: mscclppInvalidArgument; IB where
 * libibverbs does not load: mscclppSystemError; more than 1024
 * connections, SHM or P2P to a rank on another node, P2P over host memory
 * in CUDA mode, an unknown transport: mscclppInvalidUsage. */
mscclppResult_t mscclppConnect(mscclppComm_t comm, int remoteRank, int tag, void* localBuff, uint64_t buffSize,
                               mscclppTransport_t transportType, const char* ibDev MSCCLPP_DEFAULT_ARG(0));

/* mscclppConnectWithoutBuffer: declare a connection with no buffer.
 *   comm, remoteRank, tag, transportType, ibDev   as for mscclppConnect
 * Registers only handle 0 (the signal slot): the connection carries
 * signals, and puts once mscclppRegisterBufferForConnection has added
 * buffers (handles 1, 2, ...). Same rules and errors as mscclppConnect. */
mscclppResult_t mscclppConnectWithoutBuffer(mscclppComm_t comm, int remoteRank, int tag,
                                            mscclppTransport_t transportType, const char* ibDev MSCCLPP_DEFAULT_ARG(0));

/* mscclppRegisterBufferForConnection: register one more buffer on a connection.
 *   comm       the communicator
 *   connIdx    the connection's index (the order of Connect calls)
 *   localBuff  the buffer; buffSize: its size in bytes, > 0
 *   handle     out: its handle, the connection's next (1, 2, ...)
 * Before the mscclppConnectionSetup that sets the connection up, which
 * exchanges it with the peer; puts between handles use mscclppConnPutHandle.
 * Errors: connIdx out of range, NULL localBuff or handle, buffSize 0:
 * mscclppInvalidArgument; a connection already set up: mscclppInvalidUsage
 * (upstream re-sent every handle at each setup; use mscclppRegisterBuffer,
 * or a new connection). */
mscclppResult_t mscclppRegisterBufferForConnection(mscclppComm_t comm, int connIdx, void* localBuff,
                                                   uint64_t buffSize, mscclppBufferHandle_t* handle);

/* mscclppConnectionSetup: connect the connections declared since the last setup.
 *   comm  the communicator
 * Collective: sends each new connection's registrations to its peer,
 * receives the peer's (its new connection with this rank and the same tag),
 * maps what can be mapped (remoteBuff and remoteSignalEpochId are set when
 * the peer's memory is directly reachable, else NULL), fills their device
 * connections, and ends with a barrier. Connections set up earlier keep
 * working, untouched, at the same address; with nothing new it is a
 * barrier. It may be called any number of times, also while the proxies
 * run: they serve the new connections at once. The registrations travel
 * in two bootstrap allgathers (every rank's table of them), so the cost
 * does not include a bootstrap connection per pair. Every rank reaches the
 * closing barrier whatever failed on it; the barrier carries the failures,
 * so every rank returns an error naming the first (a rank where nothing
 * failed: "connection setup failed on rank R: ..."). A connection that
 * failed on either side stays failed (waits on it: mscclppRemoteError), the
 * others work; one whose peer had not declared the mirror yet is set up by
 * a later setup once the peer has. Errors: the two ends declaring
 * different transports: mscclppInvalidUsage; a peer that did not declare
 * the mirror connection before this setup: mscclppRemoteError naming it and
 * the tag, at once; a peer that died: mscclppRemoteError (after the
 * bootstrap timeout). */
mscclppResult_t mscclppConnectionSetup(mscclppComm_t comm);

/* mscclppGetAllDeviceConnections: every connection, in Connect order.
 *   comm      the communicator
 *   devConns  out: the library's array of *nConns mscclppDevConn_t (80 bytes
 *             each; copy it to the device for kernels)
 *   nConns    out: how many connections were declared
 * The array has room for 1024 connections from the start: connections
 * declared later are appended in place, so it stays valid, at the same
 * address (and so does every element handed out), until mscclppCommDestroy;
 * an element is filled by the setup that sets its connection up; do not
 * free it. Errors: NULL
 * devConns or nConns: mscclppInvalidArgument. Thread-safe. */
mscclppResult_t mscclppGetAllDeviceConnections(mscclppComm_t comm, mscclppDevConn_t** devConns, int* nConns);

/* mscclppGetDeviceConnection: the connection to remoteRank with tag.
 *   comm        the communicator
 *   remoteRank  the peer; tag: the connection's tag
 *   devConn     out: its element of the mscclppGetAllDeviceConnections array
 * Errors: no such connection, NULL devConn: mscclppInvalidArgument.
 * Thread-safe. */
mscclppResult_t mscclppGetDeviceConnection(mscclppComm_t comm, int remoteRank, int tag, mscclppDevConn_t** devConn);

/* mscclppProxyLaunch: start the proxy threads.
 *   comm  the communicator
 * One proxy thread per transport context (e.g. one for SHM, one for P2P
 * per GPU); each serves the triggers pushed into its FIFO (by device code, or by
 * mscclppFifoPush on host). Host-thread connection methods work without a
 * proxy. As upstream, it may come before mscclppConnectionSetup: a transport
 * first used by a later setup gets its proxy thread in that setup. Errors:
 * proxies already running: mscclppInvalidUsage; a proxy thread that cannot
 * start: mscclppSystemError. */
mscclppResult_t mscclppProxyLaunch(mscclppComm_t comm);

/* mscclppProxyStop: stop the proxy threads.
 *   comm  the communicator
 * Collective: a barrier first, so that no rank stops serving triggers while
 * a peer may still wait for its signals or put into its buffers; then each
 * proxy serves what is left in its FIFO, stops and is joined. The proxies
 * stop even when the barrier fails (its error is returned:
 * mscclppRemoteError). After a remote failure already reported on this rank
 * (mscclppCommGetAsyncError: mscclppRemoteError) it waits for no peer: no
 * barrier, no fence, a send in progress gives up; it returns that error.
 * Errors: no proxy running (never launched, or already stopped):
 * mscclppInvalidUsage. */
mscclppResult_t mscclppProxyStop(mscclppComm_t comm);

/* mscclppCommRank: this process's rank in comm.
 *   comm  the communicator; rank: out
 * Errors: NULL, destroyed or foreign comm, NULL rank: mscclppInvalidUsage.
 * Thread-safe. */
mscclppResult_t mscclppCommRank(mscclppComm_t comm, int* rank);

/* mscclppCommSize: the number of ranks in comm.
 *   comm  the communicator; size: out
 * Errors: NULL, destroyed or foreign comm, NULL size: mscclppInvalidUsage.
 * Thread-safe. */
mscclppResult_t mscclppCommSize(mscclppComm_t comm, int* size);

#ifdef __cplusplus
/* mscclppRegisterBuffer (C++): register a buffer with the peer of every connection.
 *   comm          the communicator
 *   local_memory  the buffer; size: its size in bytes, > 0
 *   regMem        gets one entry appended per connection, in Connect order:
 *                 remoteBuff is that peer's registered buffer when it is
 *                 mapped here (P2P: its device address; SHM: a peer's
 *                 mscclppHostAlloc buffer), else NULL; IbMr is an opaque
 *                 record of the peer's registration (the local MR for IB)
 * Collective over the connections declared so far (set up or not: the
 * exchange goes over the bootstrap, as upstream's): every peer registers its
 * buffer too, in the same order. Works on every transport (Ethernet: host
 * memory). Errors: NULL local_memory or regMem, size 0:
 * mscclppInvalidArgument; a peer that does not take part: mscclppRemoteError. */
mscclppResult_t mscclppRegisterBuffer(mscclppComm_t comm, void* local_memory, size_t size,
                                      mscclppRegisteredMemory* regMem);

/* mscclppRegisteredBufferWrite (C++): write to every peer's registered buffer.
 *   comm       the communicator
 *   regMem     made by mscclppRegisterBuffer on this communicator
 *   srcBuff    the source; size bytes from srcBuff + srcOffset are copied
 *              to offset dstOffset of each peer's buffer (upstream's P2P
 *              ignored both offsets; they are honoured on every transport)
 *   stream     CUDA-mode P2P: the cudaStream_t the copies are queued on (they
 *              are asynchronous, as upstream's cudaMemcpyAsync). 0 is the
 *              legacy default stream, also in a program built with
 *              --default-stream per-thread: pass cudaStreamPerThread there
 *              to order the copies after the thread's own work. Host mode
 *              (SHM, P2P in host mode, IB, Ethernet): ignored, and the call
 *              is synchronous: SHM/P2P copies and IB RDMA writes have landed
 *              on return; Ethernet bytes are sent and land before anything
 *              sent later on the same connection (a signal, mscclppProxyStop)
 * Entry i goes over connection i; a registration made before more
 * connections were declared covers the ones it was made over. Every one of
 * those connections must be set up. Errors: NULL srcBuff, size 0, regMem
 * not from this communicator (or with more entries than connections), a
 * write past the end of a peer's buffer: mscclppInvalidArgument; a
 * connection not set up yet: mscclppInvalidUsage. */
mscclppResult_t mscclppRegisteredBufferWrite(mscclppComm_t comm, mscclppRegisteredMemory* regMem, void* srcBuff,
                                             size_t size, uint32_t srcOffset, uint32_t dstOffset, int64_t stream);
#endif

/* ---- Extensions ---- */

/* The last failure's one-line message for comm (NULL: process-wide); "" when
 * none. The text stays valid until the next failure on comm or its destroy. */
const char* mscclppGetLastError(mscclppComm_t comm);
/* MSCCLPP_VERSION of the library. */
mscclppResult_t mscclppGetVersion(int* version);
/* The first error found asynchronously (by a proxy or a host op), like
 * ncclCommGetAsyncError; mscclppSuccess when none. */
mscclppResult_t mscclppCommGetAsyncError(mscclppComm_t comm, mscclppResult_t* asyncError);
/* Host memory the library can map into node-local peers: a put into such a
 * buffer is one memcpy, and remoteBuff is set for it. */
mscclppResult_t mscclppHostAlloc(void** ptr, size_t size);
mscclppResult_t mscclppHostFree(void* ptr);
/* Writes a table of comm's connections to f (lines starting "mscclpp report: "): per
 * connection the peer, transport, tag, the epoch this side waits for and the one the
 * peer signalled, signals sent, bytes put, the FIFO's head/tail/served, the proxy and
 * the peer's liveness; then comm's last error. The same table a stalled wait prints
 * at WARN after MSCCLPP_HANG_REPORT_S seconds. Not intercepted by tools (a
 * diagnostic). InvalidArgument for a NULL f, SystemError when writing fails. */
mscclppResult_t mscclppCommReport(mscclppComm_t comm, FILE* f);

#ifdef __cplusplus
}
#endif


#endif /* MSCCLPP_H_ */
