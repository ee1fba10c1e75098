/*
 * mscclpp.h: the MSCCL++ 0.1 C API, as implemented by the Go-built
 * libmscclpp.so.0. Binary compatible with the original header: every enum
 * value, struct offset and function signature is the same. Extensions are
 * marked "Extension" and all start with mscclpp.
 *
 * Self-contained; works from C11, C++11..C++20 and CUDA (nvcc). The
 * connection methods of mscclppDevConn run on the GPU under nvcc and on host
 * threads everywhere (host mode); C programs get the same operations as the
 * mscclppDevConn* inline functions at the end of this file.
 */
#ifndef MSCCLPP_H_
#define MSCCLPP_H_

#include "mscclppfifo.h"

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

struct mscclppDevConn;

#ifdef __cplusplus
extern "C" {
#endif
/* Extension, host mode: do the work of a trigger (type = OR of mscclppData,
 * mscclppFlag, mscclppSync) on the calling thread. Offsets are bytes into the
 * registered buffers of handle 1 (dst: the peer's, src: mine). A Flag sends
 * the current localSignalEpochId->device. */
mscclppResult_t mscclppConnOp(struct mscclppDevConn* conn, uint64_t type, uint64_t dstDataOffset,
                              uint64_t srcDataOffset, uint64_t dataSize);
/* Extension, host mode: a put between any two registered handles. */
mscclppResult_t mscclppConnPutHandle(struct mscclppDevConn* conn, mscclppBufferHandle_t dst, uint64_t dstDataOffset,
                                     mscclppBufferHandle_t src, uint64_t srcDataOffset, uint64_t dataSize);
/* Extension, host mode: wait until localSignalEpochId->proxy >= *waitEpochId
 * (the caller increments *waitEpochId first, as wait() does). Spins, then
 * yields, then sleeps with back-off. Returns mscclppRemoteError when the
 * communicator reports an error (a dead peer) and mscclppInProgress when
 * timeoutMs (>= 0) passes first; timeoutMs < 0 waits without a deadline. */
mscclppResult_t mscclppConnWait(struct mscclppDevConn* conn, int64_t timeoutMs);
/* Extension, host mode: ++*waitEpochId, then mscclppConnWait (what wait() does on host). */
mscclppResult_t mscclppConnWaitNext(struct mscclppDevConn* conn, int64_t timeoutMs);
/* Extension, host mode: ++localSignalEpochId->device (what epochIncrement() does on host).
 * On a CUDA-mode connection (counters in device memory) both only set the last error. */
void mscclppConnEpochIncrement(struct mscclppDevConn* conn);
#ifdef __cplusplus
}
#endif

/* One connection as device code (or a host thread) sees it: 80 bytes. */
struct mscclppDevConn
{
#ifdef __cplusplus
  /* Push a Data trigger: copy dataSize bytes from my buffer at
   * srcDataOffset to the peer's buffer at dstDataOffset. */
  MSCCLPP_HOSTDEVICE_INLINE void put(uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize)
  {
#if defined(__CUDA_ARCH__)
    fifo.push(mscclppData, dstDataOffset, srcDataOffset, dataSize);
#else
    mscclppConnOp(this, mscclppData, dstDataOffset, srcDataOffset, dataSize);
#endif
  }

  MSCCLPP_HOSTDEVICE_INLINE void put(uint64_t dataOffset, uint64_t dataSize)
  {
    put(dataOffset, dataOffset, dataSize);
  }

  /* Tell the peer that every earlier put on this connection is complete. */
  MSCCLPP_HOSTDEVICE_INLINE void signal()
  {
    epochIncrement();
#if defined(__CUDA_ARCH__)
    fifo.push(mscclppFlag, 0, 0, 1);
#else
    mscclppConnOp(this, mscclppFlag, 0, 0, 1);
#endif
  }

  MSCCLPP_HOSTDEVICE_INLINE void putWithSignal(uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize)
  {
    epochIncrement();
#if defined(__CUDA_ARCH__)
    fifo.push(mscclppData | mscclppFlag, dstDataOffset, srcDataOffset, dataSize);
#else
    mscclppConnOp(this, mscclppData | mscclppFlag, dstDataOffset, srcDataOffset, dataSize);
#endif
  }

  MSCCLPP_HOSTDEVICE_INLINE void putWithSignal(uint64_t dataOffset, uint64_t dataSize)
  {
    putWithSignal(dataOffset, dataOffset, dataSize);
  }

  MSCCLPP_HOSTDEVICE_INLINE void putWithSignalAndFlush(uint64_t dstDataOffset, uint64_t srcDataOffset,
                                                       uint64_t dataSize)
  {
    epochIncrement();
#if defined(__CUDA_ARCH__)
    uint64_t curFifoHead = fifo.push(mscclppData | mscclppFlag | mscclppSync, dstDataOffset, srcDataOffset, dataSize);
    fifo.sync(curFifoHead);
#else
    mscclppConnOp(this, mscclppData | mscclppFlag | mscclppSync, dstDataOffset, srcDataOffset, dataSize);
#endif
  }

  MSCCLPP_HOSTDEVICE_INLINE void putWithSignalAndFlush(uint64_t dataOffset, uint64_t dataSize)
  {
    putWithSignalAndFlush(dataOffset, dataOffset, dataSize);
  }

  /* Wait until every earlier put on this connection has left my buffers. */
  MSCCLPP_HOSTDEVICE_INLINE void flush()
  {
#if defined(__CUDA_ARCH__)
    uint64_t curFifoHead = fifo.push(mscclppSync, 0, 0, 1);
    fifo.sync(curFifoHead);
#else
    mscclppConnOp(this, mscclppSync, 0, 0, 1);
#endif
  }

  /* Wait for the peer's next signal. */
  MSCCLPP_HOSTDEVICE_INLINE void wait()
  {
#if defined(__CUDA_ARCH__)
    (*waitEpochId) += 1;
    while (*(volatile uint64_t*)&(localSignalEpochId->proxy) < (*waitEpochId))
      ;
#else
    mscclppConnWaitNext(this, -1);
#endif
  }

  MSCCLPP_HOSTDEVICE_INLINE void epochIncrement()
  {
#if defined(__CUDA_ARCH__)
    volatile uint64_t* device = &localSignalEpochId->device;
    *device = *device + 1;
#else
    mscclppConnEpochIncrement(this);
#endif
  }
#endif /* __cplusplus */

  struct mscclppConcurrentFifo fifo;
  int remoteRank;
  int tag;
  void* localBuff;
  mscclppDevConnSignalEpochId* localSignalEpochId;
  mscclppDevConnSignalEpochId* remoteSignalEpochId;
  uint64_t* waitEpochId;
  void* remoteBuff;
};
typedef struct mscclppDevConn mscclppDevConn_t;

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

/* Writes msg to the debug stream (stdout, or MSCCLPP_DEBUG_FILE). */
void mscclppDefaultLogHandler(const char* msg);
/* Every log line goes to handler instead (NULL restores the default). */
mscclppResult_t mscclppSetLogHandler(mscclppLogHandler_t handler);

/* Process-wide timeout in seconds for every bootstrap wait (default 30). */
mscclppResult_t mscclppSetBootstrapConnTimeout(int timeout);

mscclppResult_t mscclppGetUniqueId(mscclppUniqueId* uniqueId);
mscclppResult_t mscclppCommInitRank(mscclppComm_t* comm, int nranks, const char* ipPortPair, int rank);
mscclppResult_t mscclppCommInitRankFromId(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank);
mscclppResult_t mscclppBootstrapAllGather(mscclppComm_t comm, void* data, int size);
mscclppResult_t mscclppBootstrapBarrier(mscclppComm_t comm);
mscclppResult_t mscclppCommDestroy(mscclppComm_t comm);
const char* mscclppGetErrorString(mscclppResult_t result);

mscclppResult_t mscclppConnect(mscclppComm_t comm, int remoteRank, int tag, void* localBuff, uint64_t buffSize,
                               mscclppTransport_t transportType, const char* ibDev MSCCLPP_DEFAULT_ARG(0));
mscclppResult_t mscclppConnectWithoutBuffer(mscclppComm_t comm, int remoteRank, int tag,
                                            mscclppTransport_t transportType, const char* ibDev MSCCLPP_DEFAULT_ARG(0));
mscclppResult_t mscclppRegisterBufferForConnection(mscclppComm_t comm, int connIdx, void* localBuff,
                                                   uint64_t buffSize, mscclppBufferHandle_t* handle);
mscclppResult_t mscclppConnectionSetup(mscclppComm_t comm);
mscclppResult_t mscclppGetAllDeviceConnections(mscclppComm_t comm, mscclppDevConn_t** devConns, int* nConns);
mscclppResult_t mscclppGetDeviceConnection(mscclppComm_t comm, int remoteRank, int tag, mscclppDevConn_t** devConn);

mscclppResult_t mscclppProxyLaunch(mscclppComm_t comm);
mscclppResult_t mscclppProxyStop(mscclppComm_t comm);

mscclppResult_t mscclppCommRank(mscclppComm_t comm, int* rank);
mscclppResult_t mscclppCommSize(mscclppComm_t comm, int* size);

#ifdef __cplusplus
mscclppResult_t mscclppRegisterBuffer(mscclppComm_t comm, void* local_memory, size_t size,
                                      mscclppRegisteredMemory* regMem);
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

#ifdef __cplusplus
}
#endif

/* ---- The connection methods for C (host threads): same semantics as the
 * mscclppDevConn methods; each returns the result of the operation. ---- */
#if !defined(__CUDA_ARCH__)
static inline void mscclppDevConnEpochIncrement(mscclppDevConn_t* conn)
{
  mscclppConnEpochIncrement(conn);
}
static inline mscclppResult_t mscclppDevConnPut(mscclppDevConn_t* conn, uint64_t dstDataOffset,
                                                uint64_t srcDataOffset, uint64_t dataSize)
{
  return mscclppConnOp(conn, mscclppData, dstDataOffset, srcDataOffset, dataSize);
}
static inline mscclppResult_t mscclppDevConnSignal(mscclppDevConn_t* conn)
{
  mscclppDevConnEpochIncrement(conn);
  return mscclppConnOp(conn, mscclppFlag, 0, 0, 1);
}
static inline mscclppResult_t mscclppDevConnPutWithSignal(mscclppDevConn_t* conn, uint64_t dstDataOffset,
                                                          uint64_t srcDataOffset, uint64_t dataSize)
{
  mscclppDevConnEpochIncrement(conn);
  return mscclppConnOp(conn, mscclppData | mscclppFlag, dstDataOffset, srcDataOffset, dataSize);
}
static inline mscclppResult_t mscclppDevConnPutWithSignalAndFlush(mscclppDevConn_t* conn, uint64_t dstDataOffset,
                                                                  uint64_t srcDataOffset, uint64_t dataSize)
{
  mscclppDevConnEpochIncrement(conn);
  return mscclppConnOp(conn, mscclppData | mscclppFlag | mscclppSync, dstDataOffset, srcDataOffset, dataSize);
}
static inline mscclppResult_t mscclppDevConnFlush(mscclppDevConn_t* conn)
{
  return mscclppConnOp(conn, mscclppSync, 0, 0, 1);
}
static inline mscclppResult_t mscclppDevConnWait(mscclppDevConn_t* conn)
{
  return mscclppConnWaitNext(conn, -1);
}
/* Like mscclppDevConnWait, but gives up after timeoutMs: mscclppInProgress
 * (the wait stays counted: call mscclppConnWait again to keep waiting). */
static inline mscclppResult_t mscclppDevConnWaitTimeout(mscclppDevConn_t* conn, int64_t timeoutMs)
{
  return mscclppConnWaitNext(conn, timeoutMs);
}
#endif

#endif /* MSCCLPP_H_ */
