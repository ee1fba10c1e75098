/*
 * init_cpu: the CPU time one rank spends in mscclppCommInitRank (a diagnostic
 * of init_cpu.sh; make bench does not run it). Started by launch.
 *
 *   launch N init_cpu
 *
 * Like boot_mscclpp init: one cheap library call before the release, then
 * mscclppCommInitRank timed from the release. Each rank prints to stderr
 *
 *   INITCPU rank R cpu_us C wall_us W threads T0 T1 window_ns A B pid P
 *
 * C: the process's CPU time (every thread: the Go runtime's, the
 * bootstrap's) from the release to init's return; W: the wall time of the
 * same; T0, T1: the process's threads before and after; A, B: the window
 * in CLOCK_MONOTONIC ns (perf record -k CLOCK_MONOTONIC samples can be cut
 * to it; P is the process).
 */
#define _GNU_SOURCE
#include <mscclpp.h>
#include <time.h>

#include "bench.h"

static long long clockNs(clockid_t id)
{
  struct timespec t;
  clock_gettime(id, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(void)
{
  int rank = bench_env_int("BENCH_RANK", 0), n = bench_env_int("BENCH_NRANKS", 1);
  const char* addr = getenv("BENCH_ADDR");
  if (!addr) BENCH_DIE("run me through launch");
  int v;
  mscclppGetVersion(&v);
  int t0 = bench_count_entries("/proc/self/task");
  bench_start();
  long long c0 = clockNs(CLOCK_PROCESS_CPUTIME_ID), w0 = clockNs(CLOCK_MONOTONIC);
  mscclppComm_t comm = NULL;
  if (mscclppCommInitRank(&comm, n, addr, rank) != mscclppSuccess) BENCH_DIE("rank %d: init failed", rank);
  long long c1 = clockNs(CLOCK_PROCESS_CPUTIME_ID), w1 = clockNs(CLOCK_MONOTONIC);
  bench_ready();
  fprintf(stderr, "INITCPU rank %d cpu_us %.1f wall_us %.1f threads %d %d window_ns %lld %lld pid %d\n", rank,
          (c1 - c0) / 1e3, (w1 - w0) / 1e3, t0, bench_count_entries("/proc/self/task"), w0, w1, (int)getpid());
  if (mscclppBootstrapBarrier(comm) != mscclppSuccess) BENCH_DIE("rank %d: final barrier", rank);
  mscclppCommDestroy(comm);
  return 0;
}
