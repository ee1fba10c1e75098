/*
 * seqwait.c: a host wait for a counter another process of the node publishes
 * (the node segment's collective sequence numbers, impl/coll.go), under the
 * policy of every host wait (backoff.h) rather than a copy of it in Go.
 */
#include "backoff.h"
#include "engine.h"

int engWaitSeq(engComm* comm, volatile uint64_t* seq, uint64_t want, int pid, int64_t timeoutMs)
{
  engWait w;
  engWaitInit(&w, timeoutMs);
  while (__atomic_load_n(seq, __ATOMIC_ACQUIRE) < want) {
    int st = engWaitStep(&w, &comm->waitCfg);
    if (st == ENG_WAIT_GO) continue;
    /* the peer may publish and exit (or fail) between the load above and a check: look again */
    if (st == ENG_WAIT_TIMEOUT)
      return __atomic_load_n(seq, __ATOMIC_ACQUIRE) >= want ? ENG_SEQ_REACHED : ENG_SEQ_TIMEOUT;
    if (st == ENG_WAIT_SLOW && engProcessGone(pid) && __atomic_load_n(seq, __ATOMIC_ACQUIRE) < want)
      return ENG_SEQ_GONE;
    /* a peer that finished this collective may fail right after: only a value still
     * missing after the failure was seen is lost to it */
    if (errAsyncCode(&comm->err) == mscclppRemoteError && __atomic_load_n(seq, __ATOMIC_ACQUIRE) < want)
      return ENG_SEQ_REMOTE;
  }
  return ENG_SEQ_REACHED;
}
