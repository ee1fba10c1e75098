/*
 * mscclppdevconn.h: one connection as device code and host threads see it:
 * struct mscclppDevConn (80 bytes, laid out as upstream 0.1's), its methods,
 * and the host-mode operations those methods call off the GPU, with their C
 * spellings (the mscclppDevConn* inline functions at the end).
 *
 * Part of mscclpp.h, which includes it after the types it uses: include
 * <mscclpp.h>, never this file on its own.
 */
#ifndef MSCCLPP_H_
#error "mscclppdevconn.h is part of mscclpp.h: #include <mscclpp.h> instead"
#elif !defined(MSCCLPP_DEVCONN_H_)
#define MSCCLPP_DEVCONN_H_

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
/* Extension, host mode: wait for the signals counted so far, that is until
 * localSignalEpochId->proxy >= *waitEpochId (mscclppConnWaitNext and wait()
 * count one each). When every counted signal has arrived, none counted
 * included, it returns mscclppSuccess at once. Spins, then yields, then sleeps
 * with back-off. Returns mscclppRemoteError when the communicator reports an
 * error (a dead peer) and mscclppInProgress when timeoutMs (>= 0) passes
 * first, with the last error (mscclppGetLastError) naming the connection,
 * peer, tag, transport, the epoch waited for, the one the peer has signalled
 * and the time waited; the count stays. timeoutMs < 0 waits without a
 * deadline. */
mscclppResult_t mscclppConnWait(struct mscclppDevConn* conn, int64_t timeoutMs);
/* Extension, host mode: ++*waitEpochId, then mscclppConnWait (what wait() does
 * on host). A wait that returns mscclppInProgress consumes nothing: the count
 * is undone, so the same call again waits for the same signal (the idiom of
 * MPI_Test); any other result keeps it. */
mscclppResult_t mscclppConnWaitNext(struct mscclppDevConn* conn, int64_t timeoutMs);
/* Extension, host mode: ++localSignalEpochId->device (what epochIncrement() does on host).
 * On a CUDA-mode connection (counters in device memory) both only set the last error. */
void mscclppConnEpochIncrement(struct mscclppDevConn* conn);
/* Extension, host mode: mscclppConnEpochIncrement and mscclppConnOp in one call (what
 * signal(), putWithSignal() and putWithSignalAndFlush() do on host); the increment is made
 * after the operation, whatever it returns, and errors read as mscclppConnOp's. */
mscclppResult_t mscclppConnSignalOp(struct mscclppDevConn* conn, uint64_t type, uint64_t dstDataOffset,
                                    uint64_t srcDataOffset, uint64_t dataSize);
#ifdef __cplusplus
}
#endif

/* One connection as device code (or a host thread) sees it: 80 bytes. */
struct mscclppDevConn
{
#ifdef __cplusplus
  /* Push a Data trigger: copy dataSize bytes from my buffer at
   * srcDataOffset to the peer's buffer at dstDataOffset. On the device a put
   * of 0 bytes pushes nothing (there is nothing to move, and a later signal
   * covers the puts before it all the same). */
  MSCCLPP_HOSTDEVICE_INLINE void put(uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize)
  {
#if defined(__CUDA_ARCH__)
    if (dataSize == 0) return;
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
#if defined(__CUDA_ARCH__)
    epochIncrement();
    fifo.push(mscclppFlag, 0, 0, 1);
#else
    mscclppConnSignalOp(this, mscclppFlag, 0, 0, 1);
#endif
  }

  MSCCLPP_HOSTDEVICE_INLINE void putWithSignal(uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize)
  {
#if defined(__CUDA_ARCH__)
    epochIncrement();
    fifo.push(mscclppData | mscclppFlag, dstDataOffset, srcDataOffset, dataSize);
#else
    mscclppConnSignalOp(this, mscclppData | mscclppFlag, dstDataOffset, srcDataOffset, dataSize);
#endif
  }

  MSCCLPP_HOSTDEVICE_INLINE void putWithSignal(uint64_t dataOffset, uint64_t dataSize)
  {
    putWithSignal(dataOffset, dataOffset, dataSize);
  }

  MSCCLPP_HOSTDEVICE_INLINE void putWithSignalAndFlush(uint64_t dstDataOffset, uint64_t srcDataOffset,
                                                       uint64_t dataSize)
  {
#if defined(__CUDA_ARCH__)
    epochIncrement();
    uint64_t curFifoHead = fifo.push(mscclppData | mscclppFlag | mscclppSync, dstDataOffset, srcDataOffset, dataSize);
    fifo.sync(curFifoHead);
#else
    mscclppConnSignalOp(this, mscclppData | mscclppFlag | mscclppSync, dstDataOffset, srcDataOffset, dataSize);
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

  /* Wait for the peer's next signal; then an acquire, so that the data the
   * signal announced is visible to the reads after wait() returns. On the
   * device it also returns when the communicator failed (a peer lost, a
   * transport error: see MSCCLPP_FIFO_TAIL_FAILED), with failed() true and
   * no data promised. */
  MSCCLPP_HOSTDEVICE_INLINE void wait()
  {
#if defined(__CUDA_ARCH__)
    (*waitEpochId) += 1;
    while (mscclppDeviceLoad(&localSignalEpochId->proxy) < (*waitEpochId))
      if (mscclppDeviceLoad(fifo.triggerFifoTail) & MSCCLPP_FIFO_TAIL_FAILED) break;
    __threadfence_system(); /* acquire */
#else
    mscclppConnWaitNext(this, -1);
#endif
  }

#if defined(__CUDACC__)
  /* Extension, device code: whether this connection's communicator has failed, so that the
   * put, signal, flush or wait that just returned did not do its work (fifo.failed()). */
  __forceinline__ __device__ bool failed() const { return fifo.failed(); }
#endif

  /* Count one signal of mine: signal(), putWithSignal() and
   * putWithSignalAndFlush() call it once before pushing their Flag.
   * Differs from upstream 0.1 on purpose: the peer's epoch is advanced by the
   * number of Flags the proxy has served on this connection, not set to this
   * counter, so one Flag wakes exactly one wait(). A kernel that calls
   * epochIncrement() several times per Flag (upstream let one Flag carry
   * them all) leaves its peer's extra wait() calls waiting for ever: push one
   * Flag per signal instead. */
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

/* ---- The connection methods for C (host threads): same semantics as the
 * mscclppDevConn methods; each returns the result of the operation. Host
 * functions, declared in every compilation pass (nvcc's device pass parses
 * the host code too, and a program compiled with nvcc -x cu calls them from
 * its host code). ---- */
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
  return mscclppConnSignalOp(conn, mscclppFlag, 0, 0, 1);
}
static inline mscclppResult_t mscclppDevConnPutWithSignal(mscclppDevConn_t* conn, uint64_t dstDataOffset,
                                                          uint64_t srcDataOffset, uint64_t dataSize)
{
  return mscclppConnSignalOp(conn, mscclppData | mscclppFlag, dstDataOffset, srcDataOffset, dataSize);
}
static inline mscclppResult_t mscclppDevConnPutWithSignalAndFlush(mscclppDevConn_t* conn, uint64_t dstDataOffset,
                                                                  uint64_t srcDataOffset, uint64_t dataSize)
{
  return mscclppConnSignalOp(conn, mscclppData | mscclppFlag | mscclppSync, dstDataOffset, srcDataOffset, dataSize);
}
static inline mscclppResult_t mscclppDevConnFlush(mscclppDevConn_t* conn)
{
  return mscclppConnOp(conn, mscclppSync, 0, 0, 1);
}
static inline mscclppResult_t mscclppDevConnWait(mscclppDevConn_t* conn)
{
  return mscclppConnWaitNext(conn, -1);
}
/* Like mscclppDevConnWait, but gives up after timeoutMs: mscclppInProgress,
 * with mscclppGetLastError saying what it waited for. It consumes nothing
 * then: call it again to keep waiting for the same signal; a loop of short
 * timed waits sees each signal exactly once. */
static inline mscclppResult_t mscclppDevConnWaitTimeout(mscclppDevConn_t* conn, int64_t timeoutMs)
{
  return mscclppConnWaitNext(conn, timeoutMs);
}

#endif /* MSCCLPP_DEVCONN_H_ */
