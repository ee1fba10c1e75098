/*
 * mscclppfifo.h: the trigger FIFO between initiators (GPU threads, or host
 * threads in host mode) and a proxy, as in MSCCL++ 0.1. The layout of every
 * type here is ABI: device code reads and writes these fields directly.
 *
 * Self-contained: include it from C11, C++11..C++20 or CUDA without any
 * other include first.
 */
#ifndef MSCCLPPFIFO_H_
#define MSCCLPPFIFO_H_

#include <stddef.h>
#include <stdint.h>

#define MSCCLPP_PROXY_FIFO_SIZE 128
#define MSCCLPP_PROXY_FIFO_FLUSH_COUNTER 4

#define MSCCLPP_BITS_SIZE 32
#define MSCCLPP_BITS_OFFSET 32
#define MSCCLPP_BITS_TYPE 3
#define MSCCLPP_BITS_CONNID 10

/* Inline qualifiers: device methods exist under nvcc, host methods everywhere. */
#if defined(__CUDACC__)
#define MSCCLPP_HOSTDEVICE_INLINE __forceinline__ __host__ __device__
#else
#define MSCCLPP_HOSTDEVICE_INLINE inline
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MSCCLPP_EXTENSION __extension__
#else
#define MSCCLPP_EXTENSION
#endif

#ifdef __cplusplus
/* The kind of work a trigger asks for; OR-able. */
typedef enum : uint64_t
{
  mscclppData = 0x1,
  mscclppFlag = 0x2,
  mscclppSync = 0x4
} mscclppTriggerType_t;
#else
typedef uint64_t mscclppTriggerType_t;
enum
{
  mscclppData = 0x1,
  mscclppFlag = 0x2,
  mscclppSync = 0x4
};
#endif

/* One FIFO slot: 16 bytes, 16-aligned. value[0] == 0 marks an empty slot. */
union __attribute__((aligned(16))) mscclppTrigger
{
  uint64_t value[2];
  MSCCLPP_EXTENSION struct
  {
    /* first 64 bits: value[0] */
    uint64_t dataSize : MSCCLPP_BITS_SIZE;
    uint64_t srcDataOffset : MSCCLPP_BITS_OFFSET;
    /* second 64 bits: value[1] */
    uint64_t dstDataOffset : MSCCLPP_BITS_OFFSET;
    uint64_t connId : MSCCLPP_BITS_CONNID;
    uint64_t type : MSCCLPP_BITS_TYPE;
    uint64_t : (64 - MSCCLPP_BITS_OFFSET - MSCCLPP_BITS_CONNID - MSCCLPP_BITS_TYPE);
  } fields;
};
typedef union mscclppTrigger mscclppTrigger;
typedef mscclppTrigger* mscclppTrigger_t;

/* The two words of a trigger, packed exactly as the bit-fields above, and the
 * fields read back from them (the proxy's decode): the FIFO layout is here only. */
#define MSCCLPP_TRIGGER_MASK(bits) ((1ull << (bits)) - 1)
#define MSCCLPP_TRIGGER_WORD0(srcOff, size) \
  ((((uint64_t)(srcOff)) << MSCCLPP_BITS_SIZE) | (((uint64_t)(size)) & MSCCLPP_TRIGGER_MASK(MSCCLPP_BITS_SIZE)))
#define MSCCLPP_TRIGGER_WORD1(type, connId, dstOff)                                                  \
  ((((uint64_t)(type)) << (MSCCLPP_BITS_OFFSET + MSCCLPP_BITS_CONNID)) |                           \
   ((((uint64_t)(connId)) & MSCCLPP_TRIGGER_MASK(MSCCLPP_BITS_CONNID)) << MSCCLPP_BITS_OFFSET) | \
   (((uint64_t)(dstOff)) & MSCCLPP_TRIGGER_MASK(MSCCLPP_BITS_OFFSET)))
#define MSCCLPP_TRIGGER_SIZE(w0) ((uint64_t)(w0) & MSCCLPP_TRIGGER_MASK(MSCCLPP_BITS_SIZE))
#define MSCCLPP_TRIGGER_SRC_OFFSET(w0) ((uint64_t)(w0) >> MSCCLPP_BITS_SIZE)
#define MSCCLPP_TRIGGER_DST_OFFSET(w1) ((uint64_t)(w1) & MSCCLPP_TRIGGER_MASK(MSCCLPP_BITS_OFFSET))
#define MSCCLPP_TRIGGER_CONNID(w1) (((uint64_t)(w1) >> MSCCLPP_BITS_OFFSET) & MSCCLPP_TRIGGER_MASK(MSCCLPP_BITS_CONNID))
#define MSCCLPP_TRIGGER_TYPE(w1) \
  (((uint64_t)(w1) >> (MSCCLPP_BITS_OFFSET + MSCCLPP_BITS_CONNID)) & MSCCLPP_TRIGGER_MASK(MSCCLPP_BITS_TYPE))

struct mscclppConcurrentFifo;

/* The device side's two memory primitives, used by the device methods here
 * and in mscclpp.h: a relaxed (volatile) 64-bit load for the polls, and the
 * trigger's one 16-byte volatile store. Ordering comes from
 * __threadfence_system() around them (release before the trigger store,
 * acquire after a poll), which is fence.sc.sys on sm_70+ and membar.sys
 * before. A host-side emulation of the device (tests/devthreads, which runs
 * these methods on CPU threads) defines MSCCLPP_DEVICE_EMULATION and supplies
 * its own with the same semantics. */
#if defined(__CUDA_ARCH__) && !defined(MSCCLPP_DEVICE_EMULATION)
__forceinline__ __device__ uint64_t mscclppDeviceLoad(const uint64_t* p)
{
  return *(const volatile uint64_t*)p;
}
__forceinline__ __device__ void mscclppDeviceStoreTrigger(union mscclppTrigger* slot, uint64_t w0, uint64_t w1)
{
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(slot->value), "l"(w0), "l"(w1) : "memory");
}
#endif

/* Extension: the bit a CUDA-mode proxy sets in the FIFO tail it publishes to the device
 * (*triggerFifoTail) once its work cannot be done: a transport operation failed (an IB error
 * completion, a send that could not be made), a connection it serves failed (a lost heartbeat
 * or link, a peer that died), or the communicator was lost. A bad trigger (out of bounds) is
 * reported asynchronously and dropped, and the proxy goes on serving. It is set before the
 * slot of a failed trigger is emptied and stays set. The device methods poll it beside their
 * condition: push() then pushes nothing, sync()/flush() and wait() return, and failed() says so.
 * A real tail never reaches it (2^63 triggers). */
#define MSCCLPP_FIFO_TAIL_FAILED (1ull << 63)

#ifdef __cplusplus
extern "C" {
#endif
/* What mscclppFifoPush returns when it pushed nothing (the last error says why). */
#define MSCCLPP_FIFO_PUSH_FAILED (~(uint64_t)0)

/* Host-side FIFO push (library function): same protocol as the device push;
 * waits, backing off, while the FIFO is full. Returns the slot's sequence
 * number, or MSCCLPP_FIFO_PUSH_FAILED (and sets the process-wide last error)
 * for a NULL or foreign FIFO, a CUDA-mode connection (its FIFO counters are in
 * device memory), a connection not set up yet (mscclppConnectionSetup), a bad
 * type, or a full FIFO with no proxy running. */
uint64_t mscclppFifoPush(struct mscclppConcurrentFifo* fifo, uint64_t type, uint64_t dstDataOffset,
                         uint64_t srcDataOffset, uint64_t dataSize);
/* Host-side: wait until the trigger pushed as sequence number `seq` was served.
 * Returns 0 (mscclppSuccess), or a mscclppResult_t code with the process-wide
 * last error set: InvalidUsage for a NULL, foreign or CUDA-mode FIFO, no proxy
 * running, or a communicator destroyed meanwhile; InvalidArgument for a seq
 * that no push returned; the communicator's first asynchronous error (its
 * text in the last error) when it has one: the trigger may not have been done. */
int mscclppFifoWaitServed(struct mscclppConcurrentFifo* fifo, uint64_t seq);
#ifdef __cplusplus
}
#endif

/* A proxy's trigger FIFO as seen by one connection (32 bytes). */
struct mscclppConcurrentFifo
{
#ifdef __cplusplus
  /* Push one trigger: h = atomicAdd(head, 1); wait for room and an empty slot;
   * make every earlier write of this thread visible system-wide (a release:
   * the proxy and the copy engine may read the data a kernel wrote just
   * before); write both words in one 16-byte store. Returns h.
   * A trigger that moves no data (dataSize 0 at srcDataOffset 0) would read
   * as an empty slot (word 0 = 0): it is pushed without the Data bit and
   * with dataSize 1, as signal() and flush() push theirs; a Data-only one
   * becomes a Sync (nothing to move, still a slot to sync on). On the device,
   * once the communicator failed (MSCCLPP_FIFO_TAIL_FAILED in the tail) it
   * stops waiting and pushes nothing: failed() says so. */
  MSCCLPP_HOSTDEVICE_INLINE uint64_t push(uint64_t type, uint64_t dstDataOffset, uint64_t srcDataOffset,
                                          uint64_t dataSize)
  {
#if defined(__CUDA_ARCH__)
    if (MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize) == 0) {
      type &= ~(uint64_t)mscclppData;
      if (type == 0) type = mscclppSync;
      dataSize = 1;
    }
    uint64_t curFifoHead = atomicAdd((unsigned long long int*)this->triggerFifoHead, 1);
    /* room: a failed communicator's tail (MSCCLPP_FIFO_TAIL_FAILED) ends this wait too */
    uint64_t tail;
    while (curFifoHead >= MSCCLPP_PROXY_FIFO_SIZE + (tail = mscclppDeviceLoad(this->triggerFifoTail)))
      ;
    if (tail & MSCCLPP_FIFO_TAIL_FAILED) return curFifoHead; /* failed: nothing pushed */
    mscclppTrigger* slot = &this->triggerFifo[curFifoHead % MSCCLPP_PROXY_FIFO_SIZE];
    while (mscclppDeviceLoad(&slot->value[0]) != 0)
      if (mscclppDeviceLoad(this->triggerFifoTail) & MSCCLPP_FIFO_TAIL_FAILED) return curFifoHead;
    __threadfence_system(); /* release: the data before the trigger */
    mscclppDeviceStoreTrigger(slot, MSCCLPP_TRIGGER_WORD0(srcDataOffset, dataSize),
                              MSCCLPP_TRIGGER_WORD1(type, this->connId, dstDataOffset));
    return curFifoHead;
#else
    return mscclppFifoPush(this, type, dstDataOffset, srcDataOffset, dataSize);
#endif
  }

  /* Wait until the trigger with sequence number curFifoHead was served:
   * its slot emptied by the proxy, or the tail moved past it (a failed
   * communicator's tail is past every trigger: failed() says whether it
   * was served or the communicator failed); then an acquire, so that what
   * the proxy did before is visible after. */
  MSCCLPP_HOSTDEVICE_INLINE void sync(uint64_t curFifoHead)
  {
#if defined(__CUDA_ARCH__)
    while (mscclppDeviceLoad(&this->triggerFifo[curFifoHead % MSCCLPP_PROXY_FIFO_SIZE].value[0]) != 0 &&
           mscclppDeviceLoad(this->triggerFifoTail) <= curFifoHead)
      ;
    __threadfence_system(); /* acquire */
#else
    mscclppFifoWaitServed(this, curFifoHead);
#endif
  }

#if defined(__CUDACC__)
  /* Extension, device code: whether the communicator of this FIFO has failed (its proxy
   * published MSCCLPP_FIFO_TAIL_FAILED). A push, sync, flush or wait that returned while it
   * is true did not do its work: the kernel should stop using the communicator and return;
   * the host's next mscclppCommGetAsyncError (or the next call that waits on a peer) returns
   * the error with its text. (Host threads get the error from the calls themselves.) */
  __forceinline__ __device__ bool failed() const
  {
#if defined(__CUDA_ARCH__)
    return (mscclppDeviceLoad(this->triggerFifoTail) & MSCCLPP_FIFO_TAIL_FAILED) != 0;
#else
    return false; /* nvcc's host pass: never called there */
#endif
  }
#endif
#endif /* __cplusplus */

  mscclppTrigger* triggerFifo; /* 128 slots, read by the proxy */
  uint64_t* triggerFifoTail;   /* read by initiators, written only by the proxy */
  uint64_t* triggerFifoHead;   /* read by the proxy, written only by initiators */
  int connId;
};

#endif /* MSCCLPPFIFO_H_ */
