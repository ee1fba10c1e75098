/*
 * proxy_ref.h: the reference for the proxy rows of proxy_mscclpp.c: a raw
 * single-producer/single-consumer ring of 16-byte entries, as many as the
 * library's trigger FIFO (MSCCLPP_PROXY_FIFO_SIZE), with a consumer thread
 * that polls it. It is the proxy's handoff and nothing else: the producer
 * waits for an empty slot, stores word 1 then word 0 (release); the consumer
 * polls word 0 of the slot at its tail (acquire), reads word 1, empties the
 * slot (word 0 last, release) and moves on. Served = the slot is empty again.
 * No tail is published, nothing is decoded, there is no back-off, no error
 * path and no live-context check: the floor under any FIFO with this layout.
 * The same ring also runs the FIFO protocol of mscclppfifo.h (rawPushProto:
 * a claim by atomic add, room from a tail the consumer publishes), and
 * rawProxy (at the end) is the reference of the putWithSignal rows.
 *
 * The consumer runs only while the bench measures it (rawRun): between its
 * blocks it parks on a futex, so that it never takes the CPU from the
 * library's proxy while that one is measured.
 */
#ifndef MSCCLPP_BENCH_PROXY_REF_H_
#define MSCCLPP_BENCH_PROXY_REF_H_

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>

#include "bench.h"

#define RAW_SLOTS 128

typedef struct rawRing {
  uint64_t slot[RAW_SLOTS][2] __attribute__((aligned(64)));
  uint64_t head __attribute__((aligned(64))); /* the producer's only */
  uint64_t tail __attribute__((aligned(64))); /* the consumer's only */
  uint64_t sink;                              /* what the consumer read, so that the reads stay */
  uint64_t pub __attribute__((aligned(64)));  /* protocol ring: the tail the consumer published */
  uint64_t pubSeen __attribute__((aligned(64))); /* protocol ring: the producer's copy of pub */
  int run __attribute__((aligned(64)));       /* futex word: 0 park, 1 poll, 2 exit, 3 poll and publish */
  pthread_t thread;
} rawRing;

static inline void rawFutex(int* w, int op, int v) { syscall(SYS_futex, w, op, v, NULL, NULL, 0); }

static void* rawConsumer(void* arg)
{
  rawRing* r = arg;
  for (;;) {
    int run = __atomic_load_n(&r->run, __ATOMIC_ACQUIRE);
    if (run == 2) return NULL;
    uint64_t* s = r->slot[r->tail % RAW_SLOTS];
    uint64_t v0 = __atomic_load_n(&s[0], __ATOMIC_ACQUIRE);
    if (v0 == 0) {
      if (run == 3 && r->pub != r->tail) __atomic_store_n(&r->pub, r->tail, __ATOMIC_RELEASE);
      if (run == 0) rawFutex(&r->run, FUTEX_WAIT_PRIVATE, 0);
      else bench_pause();
      continue;
    }
    r->sink += v0 ^ __atomic_load_n(&s[1], __ATOMIC_RELAXED);
    __atomic_store_n(&s[1], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s[0], 0, __ATOMIC_RELEASE);
    r->tail++;
    if (run == 3 && r->tail % 4 == 0) __atomic_store_n(&r->pub, r->tail, __ATOMIC_RELEASE);
  }
}

/* Starts the consumer, parked, pinned to cpu. */
static inline void rawStart(rawRing* r, int cpu)
{
  memset(r, 0, sizeof(*r));
  if (pthread_create(&r->thread, NULL, rawConsumer, r) != 0) BENCH_DIE("pthread_create");
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(r->thread, sizeof(set), &set) != 0) BENCH_DIE("pthread_setaffinity_np");
}

/* Sets the consumer polling (on 1; 3: publishing its tail as the FIFO protocol does) or parked
 * (on 0: once the ring is empty). */
static inline void rawRun(rawRing* r, int on)
{
  __atomic_store_n(&r->run, on, __ATOMIC_RELEASE);
  if (on) rawFutex(&r->run, FUTEX_WAKE_PRIVATE, 1);
}

static inline void rawStop(rawRing* r)
{
  __atomic_store_n(&r->run, 2, __ATOMIC_RELEASE);
  rawFutex(&r->run, FUTEX_WAKE_PRIVATE, 1);
  pthread_join(r->thread, NULL);
}

/* Pushes one entry (w0 != 0), waiting for its slot to be empty; returns its sequence number. */
static inline uint64_t rawPush(rawRing* r, uint64_t w0, uint64_t w1)
{
  uint64_t h = r->head++;
  uint64_t* s = r->slot[h % RAW_SLOTS];
  while (__atomic_load_n(&s[0], __ATOMIC_ACQUIRE) != 0) bench_pause();
  __atomic_store_n(&s[1], w1, __ATOMIC_RELAXED);
  __atomic_store_n(&s[0], w0, __ATOMIC_RELEASE);
  return h;
}

/* Waits until the entry pushed as h was served (its slot emptied; no later push yet). */
static inline void rawWaitServed(rawRing* r, uint64_t h)
{
  uint64_t* s = r->slot[h % RAW_SLOTS];
  while (__atomic_load_n(&s[0], __ATOMIC_ACQUIRE) != 0) bench_pause();
}

/* The FIFO protocol of mscclppfifo.h on the raw ring: a claim by atomic add on the head (several
 * initiators may push), room known from the tail the consumer publishes (every 4 entries and
 * whenever it finds the ring empty), read only when a cached copy says full; served = that
 * tail past the entry. */
static inline uint64_t rawPushProto(rawRing* r, uint64_t w0, uint64_t w1)
{
  uint64_t h = __atomic_fetch_add(&r->head, 1, __ATOMIC_RELAXED);
  if (h >= RAW_SLOTS + r->pubSeen)
    while (h >= RAW_SLOTS + (r->pubSeen = __atomic_load_n(&r->pub, __ATOMIC_ACQUIRE))) bench_pause();
  uint64_t* s = r->slot[h % RAW_SLOTS];
  __atomic_store_n(&s[1], w1, __ATOMIC_RELAXED);
  __atomic_store_n(&s[0], w0, __ATOMIC_RELEASE);
  return h;
}

static inline void rawWaitServedProto(rawRing* r, uint64_t h)
{
  while (__atomic_load_n(&r->pub, __ATOMIC_ACQUIRE) <= h) bench_pause();
}

/* The reference for the putWithSignal-through-the-proxy rows: a raw ring of the same slots,
 * served by a thread that does what the proxy does for a Data|Flag trigger into a mapped
 * buffer (a memcpy into the peer's buffer, then a release store of a signal count the peer
 * polls) and, when the ring is empty, sleeps on a futex doorbell that a push rings, as an idle
 * host-mode proxy that shares its initiator's CPU does. Nothing is decoded or checked. */
typedef struct rawProxy {
  uint64_t slot[RAW_SLOTS][2] __attribute__((aligned(64)));
  uint64_t head __attribute__((aligned(64)));  /* producers: claims (its low half: the doorbell) */
  uint32_t asleep;                             /* the server sleeps on the doorbell */
  uint64_t tail __attribute__((aligned(64)));  /* the server's only */
  uint64_t sent;                               /* signals sent */
  const char* src;
  char* dst;
  volatile uint64_t* peerSignal;
  int stop;
  pthread_t thread;
} rawProxy;

static void* rawProxyMain(void* arg)
{
  rawProxy* p = arg;
  for (;;) {
    uint64_t* s = p->slot[p->tail % RAW_SLOTS];
    uint64_t size = __atomic_load_n(&s[0], __ATOMIC_ACQUIRE);
    if (size == 0) {
      if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) return NULL;
      __atomic_store_n(&p->asleep, 1, __ATOMIC_SEQ_CST);
      uint64_t h = __atomic_load_n(&p->head, __ATOMIC_SEQ_CST);
      if (h == p->tail && !__atomic_load_n(&p->stop, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, (uint32_t*)&p->head, FUTEX_WAIT_PRIVATE, (uint32_t)h, NULL, NULL, 0);
      __atomic_store_n(&p->asleep, 0, __ATOMIC_RELAXED);
      continue;
    }
    memcpy(p->dst, p->src, size);
    __atomic_store_n(p->peerSignal, ++p->sent, __ATOMIC_RELEASE);
    __atomic_store_n(&s[1], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s[0], 0, __ATOMIC_RELEASE);
    p->tail++;
  }
}

/* Starts the server thread (it inherits the caller's CPU affinity). */
static inline void rawProxyStart(rawProxy* p, const char* src, char* dst, volatile uint64_t* peerSignal)
{
  memset(p, 0, sizeof(*p));
  p->src = src;
  p->dst = dst;
  p->peerSignal = peerSignal;
  if (pthread_create(&p->thread, NULL, rawProxyMain, p) != 0) BENCH_DIE("pthread_create");
}

/* Pushes a put of size (> 0) bytes with its signal, ringing the doorbell of a sleeping server. */
static inline void rawProxyPush(rawProxy* p, uint64_t size)
{
  uint64_t h = __atomic_fetch_add(&p->head, 1, __ATOMIC_SEQ_CST);
  uint64_t* s = p->slot[h % RAW_SLOTS];
  while (__atomic_load_n(&s[0], __ATOMIC_ACQUIRE) != 0) bench_pause();
  __atomic_store_n(&s[1], 1, __ATOMIC_RELAXED);
  __atomic_store_n(&s[0], size, __ATOMIC_RELEASE);
  if (__atomic_load_n(&p->asleep, __ATOMIC_SEQ_CST))
    syscall(SYS_futex, (uint32_t*)&p->head, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static inline void rawProxyStop(rawProxy* p)
{
  __atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&p->asleep, __ATOMIC_SEQ_CST))
    syscall(SYS_futex, (uint32_t*)&p->head, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  pthread_join(p->thread, NULL);
}

#endif
