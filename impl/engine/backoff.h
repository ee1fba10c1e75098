/*
 * backoff.h: the polling policy shared by every host-side wait (proxy idle
 * loop, FIFO push, flush, wait): spin with a CPU pause, then sched_yield,
 * then sleep with a doubling period. On a machine with fewer cores than
 * spinning threads a pure spin waits for the scheduler tick (4 ms here);
 * yielding hands the core to the thread that will make progress.
 */
#ifndef MSCCLPP_BACKOFF_H_
#define MSCCLPP_BACKOFF_H_

#include <sched.h>
#include <stdint.h>
#include <time.h>

#include "engine.h"

typedef struct engBackoff {
  uint32_t n;
  uint32_t sleepUs;
} engBackoff;

static inline void engPause(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* One step of back-off; returns 1 once it has reached the sleeping phase
 * (callers use that to run slow checks such as peer liveness). */
static inline int engBackoffStep(engBackoff* b, const engBackoffCfg* cfg)
{
  if (b->n < cfg->spin) {
    b->n++;
    engPause();
    return 0;
  }
  if (b->n < cfg->spin + cfg->yields) {
    b->n++;
    sched_yield();
    return 0;
  }
  if (b->sleepUs == 0) b->sleepUs = 1;
  struct timespec ts = {0, (long)b->sleepUs * 1000};
  nanosleep(&ts, NULL);
  if (b->sleepUs < cfg->sleepMaxUs) {
    b->sleepUs *= 2;
    if (b->sleepUs > cfg->sleepMaxUs) b->sleepUs = cfg->sleepMaxUs;
  }
  return 1;
}

static inline uint64_t engNowNs(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
