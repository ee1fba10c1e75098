/*
 * bias.c: the slow path of the biased lock (bias.h): the first taker claims
 * the bias, the first other taker revokes it, and after that every taker
 * exchanges the lock word. Out of line: a connection's signals reach it once
 * per thread that signals, then only while another thread holds the word.
 */
#define _GNU_SOURCE
#include "bias.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backoff.h"

/* Takes the word: after the bias is revoked, or where there never is one. */
static int takeWord(engBiasLock* l, const engBackoffCfg* cfg)
{
  engBackoff b = {0, 0};
  while (__atomic_exchange_n(&l->word, 1, __ATOMIC_ACQUIRE) != 0)
    while (__atomic_load_n(&l->word, __ATOMIC_RELAXED) != 0) engBackoffStep(&b, cfg);
  return ENG_BIAS_HELD_WORD;
}

/* Ends owner o's bias: from here on every taker uses the word. */
static void biasRevoke(engBiasLock* l, const engThread* o, const engBackoffCfg* cfg)
{
  if (!__atomic_compare_exchange_n(&l->owner, &o, ENG_BIAS_REVOKING, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
    return; /* another taker moved it first: the caller looks again */
  /* the owner's CPU passes a full barrier: it stored busy before, or it sees REVOKING after */
  syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0);
  engBackoff b = {0, 0};
  while (__atomic_load_n(&l->busy, __ATOMIC_ACQUIRE) != 0) engBackoffStep(&b, cfg);
  __atomic_store_n(&l->owner, ENG_BIAS_REVOKED, __ATOMIC_RELEASE);
}

int engBiasTakeSlow(engBiasLock* l, const engBackoffCfg* cfg)
{
  if (__atomic_load_n(&engUseMembarrier, __ATOMIC_ACQUIRE) != 1) return takeWord(l, cfg);
  const engThread* t = engThreadSelf;
  if (t == NULL) t = engThreadRecordNew(); /* a proxy thread's first signal */
  engBackoff b = {0, 0};
  for (;;) {
    const engThread* o = __atomic_load_n(&l->owner, __ATOMIC_ACQUIRE);
    if (o == ENG_BIAS_REVOKED) return takeWord(l, cfg);
    if (o == ENG_BIAS_REVOKING) {
      engBackoffStep(&b, cfg);
      continue;
    }
    if (t == NULL) { /* no record (out of memory): no bias for anyone */
      if (o == ENG_BIAS_NONE)
        __atomic_compare_exchange_n(&l->owner, &o, ENG_BIAS_REVOKED, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
      else
        biasRevoke(l, o, cfg);
      continue;
    }
    if (o == ENG_BIAS_NONE) {
      __atomic_compare_exchange_n(&l->owner, &o, t, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
      continue; /* claimed, or another thread did: look again */
    }
    if (o == t) { /* claimed just now, or a record new to this thread */
      if (engBiasEnter(l, t)) return ENG_BIAS_HELD_BIAS;
      continue;
    }
    biasRevoke(l, o, cfg);
  }
}
