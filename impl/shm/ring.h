/*
 * ring.h: the SHM transport's eager ring. A put of a few bytes into memory
 * the peer could not map (malloc) would cost one process_vm_writev; instead
 * the sender copies it into a ring in shared memory that the receiver created
 * (in a sealed memfd holding its communicator's rings, which the sender maps
 * at setup), and the receiver lands it in the
 * destination with a memcpy: in its waits on the connection, and otherwise in
 * a lander thread of its communicator that polls with back-off, so the data
 * arrives with no call on the receiver's side.
 *
 * Layout of the ring (shared): a header page, then nslots slots of 64 bytes.
 * An entry takes consecutive slots (its 32-byte header, then its payload,
 * wrapping at the end of the ring); its first slot's seq is its position + 1
 * once published. Senders claim positions with a CAS on head, never past
 * tail + nslots; the receiver lands in order, then publishes tail. A signal
 * queued in an entry is published after the entry's data landed.
 *
 * Waits on the receiver's epoch of a connection with a ring count their
 * sleepers in the ring's header (both sides use that count, see shmRingHdr).
 *
 * Ordering: while the ring holds entries not landed, a signal goes into the
 * ring too and a direct put (process_vm_writev, memcpy) first waits until
 * the ring is empty; with the ring empty both keep their direct path.
 */
#ifndef MSCCLPP_SHM_RING_H_
#define MSCCLPP_SHM_RING_H_

#include <pthread.h>
#include <stdint.h>

#include "../engine/backoff.h"
#include "../engine/bias.h"
#include "../engine/engine.h"

#define SHM_RING_MAGIC 0x4d5343434c505245ull /* "MSCCLPPE" */
#define SHM_RING_HDR 4096                    /* bytes before the first slot */
#define SHM_SLOT 64
#define SHM_ENTRY_HDR 32
#define SHM_EAGER_MAX (64u << 10) /* the largest eager threshold */

typedef struct shmRingHdr {
  uint64_t magic;
  uint32_t nslots;   /* a power of two */
  uint32_t maxBytes; /* the largest payload of an entry */
  uint64_t head __attribute__((aligned(64))); /* positions claimed by senders */
  uint64_t tail __attribute__((aligned(64))); /* positions landed by the receiver */
  /* Threads of the receiver asleep on its epoch of the connection: with a ring, this count
   * replaces the one beside the epoch in the node segment, so that a put, which must look at
   * it, reads a line that changes only when a wait sleeps, not the epoch's line. */
  uint32_t sleepers __attribute__((aligned(64)));
  uint32_t closed; /* set by the receiver at destroy: nothing more lands */
} shmRingHdr;

typedef struct shmEntry {
  uint64_t seq;    /* position + 1 once published */
  uint64_t off;    /* offset in the destination registration */
  uint32_t handle; /* the receiver's handle of the destination; 0 with size 0: a signal only */
  uint32_t size;   /* payload bytes, after this header */
  uint64_t signal; /* the signal count to publish once landed, or 0 */
} shmEntry;

/* Slots an entry of size payload bytes takes. */
static inline uint64_t shmEntrySlots(uint64_t size) { return (SHM_ENTRY_HDR + size + SHM_SLOT - 1) / SHM_SLOT; }

/* The receiving side of a ring: what landing needs, copied at setup so that the lander
 * never reads the engine connection (freed before the transport closes). */
typedef struct shmIn {
  shmRingHdr* hdr;
  char* slots;
  uint32_t nslots, maxBytes;
  uint64_t tail; /* positions landed (hdr->tail is its published copy) */
  int lock;      /* held by the thread landing */
  int failed;    /* a malformed entry was met: nothing more is landed */
  int nLocal;
  engReg* local;            /* the receiver's registrations by handle (a copy) */
  volatile uint64_t* epoch; /* the receiver's proxy epoch of the connection */
  uint32_t* sleepers;       /* threads asleep on it (&hdr->sleepers) */
  engComm* comm;
  int connId, peerRank, tag;
  struct shmIn* next; /* the lander's list */
} shmIn;

/* The sending side: the peer's ring mapped here, and the eager threshold. */
typedef struct shmOut {
  shmRingHdr* hdr;
  char* slots;
  uint32_t nslots;
  uint32_t maxBytes; /* the smaller of this side's threshold and the ring's */
  int lock;          /* held by the thread queueing or signalling: positions and signals agree */
  uint64_t tailSeen; /* hdr->tail as last read (under lock): read again only when the ring looks full,
                      * so that a put does not pull the line the receiver writes at every landing */
} shmOut;

/* An SHM connection's transport state (engConn.transport): either ring may be absent. */
typedef struct shmConn {
  shmOut out;  /* out.hdr NULL: no ring to the peer */
  shmIn* in;   /* NULL: no ring from the peer */
} shmConn;

/* Sending (ring.c). Whether c has a ring to the peer. */
static inline int shmHasRing(const engConn* c)
{
  const shmConn* s = (const shmConn*)c->transport;
  return s != NULL && s->out.hdr != NULL;
}
/* Whether a put of size bytes into d goes through the ring. */
static inline int shmEager(const engConn* c, const engReg* d, uint64_t size)
{
  return shmHasRing(c) && d->mapped == NULL && size > 0 && size <= ((const shmConn*)c->transport)->out.maxBytes;
}
/* Whether the ring to the peer holds entries not landed yet. */
static inline int shmRingBusy(const engConn* c)
{
  const shmConn* s = (const shmConn*)c->transport;
  return s != NULL && s->out.hdr != NULL &&
         __atomic_load_n(&s->out.hdr->tail, __ATOMIC_ACQUIRE) != __atomic_load_n(&s->out.hdr->head, __ATOMIC_ACQUIRE);
}
/* Queues size bytes at src for the peer's handle at off, and with signal != 0 that signal count
 * after them (the engine's value, given under its signal lock). */
int shmRingPut(engConn* c, uint64_t handle, uint64_t off, const char* src, uint64_t size, uint64_t signal);
/* The signal value on a connection with a ring: queued behind the entries not landed yet, else direct. */
int shmRingSignal(engConn* c, uint64_t value);
/* Wakes the threads asleep on epoch, counted in sleepers (NULL: none can sleep there). The store
 * before it and the count's load are sequentially consistent, as are a sleeper's count and its
 * look at the epoch: one of the two sees the other. */
static inline void shmWake(volatile uint64_t* epoch, uint32_t* sleepers)
{
  if (sleepers != NULL && __atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0) engFutexWake(epoch);
}
/* Raises *epoch to v unless it is higher already (signallers may race: it never goes down),
 * then wakes its sleepers. */
static inline void shmRaise(volatile uint64_t* epoch, uint64_t v, uint32_t* sleepers)
{
  uint64_t cur = v - 1; /* the usual previous value: the first CAS takes the line once */
  while (cur < v && !__atomic_compare_exchange_n(epoch, &cur, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
    ;
  shmWake(epoch, sleepers);
}
/* Waits until every entry queued so far is landed. */
int shmRingDrain(engConn* c);

/* Receiving (ring.c): the waitPoll and waitPending of a connection with a ring from the peer
 * (shmLandOps): land what is published, say whether anything is. */
int shmLandPoll(engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w);
int shmLandPending(engConn* c);
/* Lands what is published in the ring: the count landed, or -1 when another thread is landing. */
int shmInLand(shmIn* in);

/* The lander thread of a communicator (lander.c). */
typedef struct shmLander shmLander;
shmLander* shmLanderNew(void);
/* Adds a ring (the lander frees it) and starts the thread if it does not run: 0, or an errno. */
int shmLanderAdd(shmLander* l, shmIn* in);
/* Stops the thread, lands what is left and frees the lander and its rings. */
void shmLanderFree(shmLander* l);

#endif
