/*
 * seqwait.c: a host wait for a counter another process of the node publishes
 * (the node segment's collective sequence numbers, impl/coll.go), under the
 * policy of every host wait (backoff.h) rather than a copy of it in Go. Once
 * the back-off would sleep, the wait sleeps on a futex on the counter instead,
 * counted in the publisher's sleeper word, and the publisher (engPublishSeq)
 * wakes it at once, as a socket read would be woken.
 */
#include "backoff.h"
#include "engine.h"

void engPublishSeq(volatile uint64_t* seq, uint64_t v, uint32_t* sleepers)
{
  /* seq-cst store, then load: a waiter counts itself in, then loads the counter (engWaitFutex) */
  __atomic_store_n(seq, v, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0) engFutexWake(seq);
}

/* A brief wait (the chunk rounds of a large gather) lasts about one chunk's copy on the peer:
 * a long spin or yield phase there only keeps the CPU from a peer that shares it, so it goes
 * to the futex after at most these many. */
#define ENG_SEQ_BRIEF_SPIN 100
#define ENG_SEQ_BRIEF_YIELDS 50

int engWaitSeq(engComm* comm, volatile uint64_t* seq, uint64_t want, int pid, int64_t timeoutMs, uint32_t* sleepers,
               int brief)
{
  engBackoffCfg c = comm->waitCfg;
  if (brief) {
    if (c.spin > ENG_SEQ_BRIEF_SPIN) c.spin = ENG_SEQ_BRIEF_SPIN;
    if (c.yields > ENG_SEQ_BRIEF_YIELDS) c.yields = ENG_SEQ_BRIEF_YIELDS;
  }
  const engBackoffCfg* cfg = &c;
  engWait w;
  engWaitInit(&w, timeoutMs);
  while (__atomic_load_n(seq, __ATOMIC_ACQUIRE) < want) {
    int st = w.b.n >= cfg->spin + cfg->yields ? engWaitFutex(&w, seq, want, sleepers, NULL, NULL) : engWaitStep(&w, cfg);
    if (st == ENG_WAIT_GO) continue;
    /* the peer may publish and exit (or fail) between the load above and a check: look again */
    if (st == ENG_WAIT_TIMEOUT)
      return __atomic_load_n(seq, __ATOMIC_ACQUIRE) >= want ? ENG_SEQ_REACHED : ENG_SEQ_TIMEOUT;
    if (st == ENG_WAIT_SLOW && engProcessGone(pid) && __atomic_load_n(seq, __ATOMIC_ACQUIRE) < want)
      return ENG_SEQ_GONE;
    /* a peer that finished this collective may fail right after: only a value still
     * missing after the failure was seen is lost to it (the communicator's failure: one
     * connection's does not stop the collectives) */
    if (__atomic_load_n(&comm->broken, __ATOMIC_ACQUIRE) && __atomic_load_n(seq, __ATOMIC_ACQUIRE) < want)
      return ENG_SEQ_REMOTE;
  }
  return ENG_SEQ_REACHED;
}
