/*
 * shim.h: the device side of mscclpp.h compiled for CPU threads (g++), so the
 * header's __CUDA_ARCH__ branches -- the atomic head increment, the trigger
 * store, epochIncrement, the wait and sync polls, the fences -- run as "GPU
 * threads" against the real CUDA-mode proxy and the stand-in driver
 * (cuda/testdata/fakecuda.c). Include it instead of mscclpp.h.
 *
 * The primitives keep the GPU's guarantees and no more: atomicAdd is a
 * relaxed atomic add, the poll load a relaxed load, the trigger store two
 * relaxed 8-byte stores (word 1, then word 0, as the proxy tolerates), and
 * __threadfence_system() a sequentially consistent fence. The hardware here
 * (x86, TSO) would hide a missing fence, so the shim checks the order
 * itself, per thread: a trigger stored while the thread's data writes
 * (devStore) are not yet released by a fence, a data read (devLoad) after a
 * poll with no fence between, and a trigger whose word 0 is 0 (it reads as an
 * empty slot) are each recorded as a violation. Every poll gives up once
 * devDeadline passes (or another thread failed): the thread records where it
 * hung and exits, so a kernel that would spin for ever ends with a report.
 */
#ifndef MSCCLPP_DEVTHREADS_SHIM_H_
#define MSCCLPP_DEVTHREADS_SHIM_H_

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define __CUDACC__ 1
#define __CUDA_ARCH__ 800
#define __host__
#define __device__
#define __forceinline__ inline __attribute__((always_inline))
#define MSCCLPP_DEVICE_EMULATION 1

/* One launch: what went wrong in it (the first violation's text is kept) and until when its
 * threads may poll. */
struct devKernel {
  pthread_mutex_t mu;
  int violations;
  int hung;
  int abort;         /* set once a thread hung: the others stop polling */
  uint64_t deadline; /* CLOCK_MONOTONIC ns after which polls give up */
  long result;       /* what the kernel body reports (devRecv: bytes that differ) */
  char first[256];
};

/* Per thread: its launch, and the order its memory operations still owe a fence. */
struct devOrder {
  devKernel* k;
  int dirty;  /* data written since the last fence */
  int polled; /* a poll since the last fence */
  unsigned spins;
};
extern thread_local devOrder devTls;

void devViolation(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void devHang(const void* where) __attribute__((noreturn));

static inline uint64_t devNowNs(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v)
{
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static inline void __threadfence_system(void)
{
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  devTls.dirty = 0;
  devTls.polled = 0;
}

/* A poll: relaxed, and a chance for the proxy to run on a machine with fewer cores than threads. */
static inline uint64_t mscclppDeviceLoad(const uint64_t* p)
{
  uint64_t v = __atomic_load_n(p, __ATOMIC_RELAXED);
  devTls.polled = 1;
  if (++devTls.spins % 64 == 0) {
    sched_yield();
    if (__atomic_load_n(&devTls.k->abort, __ATOMIC_RELAXED) || devNowNs() > devTls.k->deadline) devHang(p);
  }
  return v;
}

union mscclppTrigger;
void devStoreTrigger(uint64_t* slot, uint64_t w0, uint64_t w1);
static inline void mscclppDeviceStoreTrigger(union mscclppTrigger* slot, uint64_t w0, uint64_t w1)
{
  devStoreTrigger((uint64_t*)(void*)slot, w0, w1);
}

/* A kernel's own data accesses (to its device buffers, through their kernel view). */
static inline void devStore(uint8_t* p, uint8_t v)
{
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
  devTls.dirty = 1;
}
static inline uint8_t devLoad(const uint8_t* p)
{
  if (devTls.polled) devViolation("a data read after a poll with no fence between (wait() without an acquire)");
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

#include "mscclpp.h"

#endif
