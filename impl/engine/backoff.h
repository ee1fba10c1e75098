/*
 * backoff.h: the polling policy shared by every host-side wait (proxy idle
 * loop, FIFO push, flush, wait): spin with a CPU pause, then sched_yield,
 * then sleep with a doubling period. On a machine with fewer cores than
 * spinning threads a pure spin waits for the scheduler's tick;
 * yielding hands the core to the thread that will make progress.
 */
#ifndef MSCCLPP_BACKOFF_H_
#define MSCCLPP_BACKOFF_H_

#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "objects.h"

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

/* A bounded wait: back-off plus a deadline and periodic slow checks. The
 * clock is read every ENG_CLOCK_EVERY pauses while spinning and at every
 * yield or sleep, so a deadline holds in every phase, also when CPU hogs make
 * each sched_yield last a time slice. */
#define ENG_CLOCK_EVERY 64
#define ENG_SLOW_FIRST_NS 1000000ull /* first slow check (peer liveness) after 1 ms */
#define ENG_SLOW_EVERY_NS 5000000ull /* then every 5 ms */

enum { ENG_WAIT_GO = 0, ENG_WAIT_CHECK = 1, ENG_WAIT_SLOW = 2, ENG_WAIT_TIMEOUT = 3 };

typedef struct engWait {
  engBackoff b;
  int64_t timeoutMs; /* < 0: none */
  uint64_t deadline; /* absolute ns, set at the first clock read (timeoutMs >= 0) */
  uint64_t nextSlow; /* absolute ns of the next slow check; 0 before the first clock read */
  uint64_t start;    /* absolute ns of the first clock read */
} engWait;

static inline void engWaitInit(engWait* w, int64_t timeoutMs)
{
  /* no clock read yet: a wait that ends within its first spins never pays for one */
  w->b.n = 0;
  w->b.sleepUs = 0;
  w->timeoutMs = timeoutMs;
  w->deadline = 0;
  w->nextSlow = 0;
  w->start = 0;
}

/* Reads the clock; the first read starts the wait's deadline and slow-check period. */
static inline uint64_t engWaitClock(engWait* w)
{
  uint64_t now = engNowNs();
  if (w->nextSlow == 0) {
    if (w->timeoutMs >= 0) {
      /* saturate: a timeout past the end of the clock (INT64_MAX ms) waits for ever, never wraps */
      uint64_t ms = (uint64_t)w->timeoutMs;
      w->deadline = ms > (UINT64_MAX - now) / 1000000ull ? UINT64_MAX : now + ms * 1000000ull;
    }
    w->nextSlow = now + ENG_SLOW_FIRST_NS;
    w->start = now;
  }
  return now;
}

/* The wait's deadline (absolute, engNowNs), UINT64_MAX without a timeout; reads the clock
 * when the wait has not yet. */
static inline uint64_t engWaitDeadline(engWait* w)
{
  if (w->timeoutMs < 0) return UINT64_MAX;
  if (w->nextSlow == 0) engWaitClock(w);
  return w->deadline;
}

/* Checks first, then backs off one step. Returns ENG_WAIT_GO (keep polling),
 * ENG_WAIT_CHECK (look at cheap conditions such as a recorded error or a
 * closing context), ENG_WAIT_SLOW (also run slow checks such as peer
 * liveness) or ENG_WAIT_TIMEOUT. The first call always asks for the cheap
 * checks, without reading the clock; from then on the clock is read every
 * ENG_CLOCK_EVERY pauses and at every yield or sleep. */
static inline int engWaitStep(engWait* w, const engBackoffCfg* cfg)
{
  int rc = ENG_WAIT_GO;
  if (w->b.n == 0) {
    rc = ENG_WAIT_CHECK;
  } else if (w->b.n >= cfg->spin || (w->b.n % ENG_CLOCK_EVERY) == 0) {
    uint64_t now = engWaitClock(w);
    if (w->timeoutMs >= 0 && now >= w->deadline) return ENG_WAIT_TIMEOUT;
    rc = ENG_WAIT_CHECK;
    if (now >= w->nextSlow) {
      w->nextSlow = now + ENG_SLOW_EVERY_NS;
      rc = ENG_WAIT_SLOW;
    }
  }
  engBackoffStep(&w->b, cfg);
  return rc;
}

/* The low 32 bits of a 64-bit counter: the futex word. */
static inline uint32_t* engLow32(volatile uint64_t* word)
{
  return (uint32_t*)(uintptr_t)word + (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? 1 : 0);
}

/* Wakes every thread asleep on the low 32 bits of a 64-bit counter in shared memory. */
static inline void engFutexWake(volatile uint64_t* word)
{
  syscall(SYS_futex, engLow32(word), FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

/* Sleeps while the low 32 bits of the process-private counter *word still equal those of seen,
 * for at most us microseconds (woken by engFutexWakePrivate). */
static inline void engFutexWaitPrivate(uint64_t* word, uint64_t seen, uint32_t us)
{
  struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
  syscall(SYS_futex, engLow32(word), FUTEX_WAIT_PRIVATE, (uint32_t)seen, &ts, NULL, 0);
}

/* Wakes a thread asleep in engFutexWaitPrivate on *word. */
static inline void engFutexWakePrivate(uint64_t* word)
{
  syscall(SYS_futex, engLow32(word), FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Like engWaitStep in its sleeping phase, but sleeps on the counter *word (shared memory: its low
 * 32 bits) until it moves or 1 ms, the deadline or the next slow
 * check comes, counted in *sleepers so that a signaller knows to wake it. When pending is set
 * and says that work for the waiter arrived (it is checked after the count is raised, so a
 * signaller that publishes work, then reads the count, either is seen here or wakes), the
 * wait does not sleep. */
static inline int engWaitFutex(engWait* w, volatile uint64_t* word, uint64_t want, uint32_t* sleepers,
                               int (*pending)(struct engConn*), struct engConn* c)
{
  uint64_t now = engWaitClock(w);
  if (w->timeoutMs >= 0 && now >= w->deadline) return ENG_WAIT_TIMEOUT;
  int rc = ENG_WAIT_CHECK;
  if (now >= w->nextSlow) {
    w->nextSlow = now + ENG_SLOW_EVERY_NS;
    rc = ENG_WAIT_SLOW;
  }
  uint64_t until = now + 1000000ull;
  if (w->nextSlow < until) until = w->nextSlow;
  if (w->timeoutMs >= 0 && w->deadline < until) until = w->deadline;
  __atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
  uint64_t cur = __atomic_load_n(word, __ATOMIC_SEQ_CST);
  if (cur < want && (pending == NULL || !pending(c))) {
    struct timespec ts = {(time_t)((until - now) / 1000000000ull), (long)((until - now) % 1000000000ull)};
    syscall(SYS_futex, engLow32(word), FUTEX_WAIT, (uint32_t)cur, &ts, NULL, 0);
  }
  __atomic_fetch_sub(sleepers, 1, __ATOMIC_RELEASE);
  return rc;
}

#endif
