/*
 * bias.h: a lock biased to the first thread that takes it (engBiasLock). The
 * owner takes and releases it with plain stores to its own flag, so a locked
 * instruction does not sit between a wait that returned and the put that
 * answers it (there it waits for the load of the data that just arrived). The
 * first other thread that takes it revokes the bias for good: it marks the
 * lock revoking, runs membarrier (every thread of the process passes a full
 * barrier: asymmetric Dekker with the owner's flag, as the context holds of
 * ctx.h), waits until the owner is out, and from then on every taker uses the
 * lock word. Without membarrier mode (ctx.h) there is no bias: the lock word
 * from the start.
 */
#ifndef MSCCLPP_ENGINE_BIAS_H_
#define MSCCLPP_ENGINE_BIAS_H_

#include "ctx.h"

/* owner: the thread record the lock is biased to, or one of these */
#define ENG_BIAS_NONE ((const engThread*)0)       /* nobody took it yet */
#define ENG_BIAS_REVOKING ((const engThread*)1)   /* a revoker waits for the owner to leave */
#define ENG_BIAS_REVOKED ((const engThread*)2)    /* everyone uses word */

/* engBiasLock itself is in objects.h: every connection has one (engConn.sigLock). */

/* How a taker holds the lock: through the bias or through the word. */
enum { ENG_BIAS_HELD_WORD = 0, ENG_BIAS_HELD_BIAS = 1 };

/* The slow path of engBiasTake (bias.c): claims the bias, revokes another thread's, or takes
 * the word, backing off with cfg while it waits. */
int engBiasTakeSlow(engBiasLock* l, const engBackoffCfg* cfg);

/* The owner t enters through the bias: 1 when it holds l, 0 when the bias was revoked meanwhile. */
static inline int engBiasEnter(engBiasLock* l, const engThread* t)
{
  __atomic_store_n(&l->busy, 1, __ATOMIC_RELAXED);
  __asm__ __volatile__("" ::: "memory"); /* the revoker's membarrier orders the store before this load */
  if (__builtin_expect(__atomic_load_n(&l->owner, __ATOMIC_ACQUIRE) == t, 1)) return 1;
  __atomic_store_n(&l->busy, 0, __ATOMIC_RELEASE); /* revoked meanwhile: the revoker waits for this */
  return 0;
}

/* Takes l: ENG_BIAS_HELD_BIAS or ENG_BIAS_HELD_WORD, to hand to engBiasRelease. */
static inline int engBiasTake(engBiasLock* l, const engBackoffCfg* cfg)
{
  const engThread* t = engThreadSelf;
  if (__builtin_expect(t != NULL && __atomic_load_n(&l->owner, __ATOMIC_RELAXED) == t, 1) && engBiasEnter(l, t))
    return ENG_BIAS_HELD_BIAS;
  return engBiasTakeSlow(l, cfg);
}

static inline void engBiasRelease(engBiasLock* l, int held)
{
  if (held == ENG_BIAS_HELD_BIAS)
    __atomic_store_n(&l->busy, 0, __ATOMIC_RELEASE);
  else
    __atomic_store_n(&l->word, 0, __ATOMIC_RELEASE);
}

#endif
