/*
 * boot.h: the bootstrap measurement loop shared by boot_mscclpp.c (the
 * library) and boot_tcp.c (the plain-TCP reference), so that both are timed
 * by exactly the same code.
 *
 * Each figure is the median over iterations of one rank's (rank 0's) time
 * for one collective, run back to back. Iterations run in batches; after
 * each batch an untimed 4-byte allgather carries rank 0's decision to stop
 * (after BENCH_BUDGET_S seconds per figure, at least min iterations), so
 * every rank runs the same number of collectives.
 */
#ifndef MSCCLPP_BENCH_BOOT_H_
#define MSCCLPP_BENCH_BOOT_H_

#include "bench.h"

typedef struct {
  void* ctx;
  int rank, n;
  int (*allgather)(void* ctx, void* data, int size); /* 0 on success */
  int (*barrier)(void* ctx);
} boot_ops;

static inline int boot_op(boot_ops* o, void* buf, int size)
{
  return size > 0 ? o->allgather(o->ctx, buf, size) : o->barrier(o->ctx);
}

/* size 0: barrier. */
static void boot_measure(boot_ops* o, const char* key, int size, double budget_s, int batch, int min_iters,
                         int max_iters)
{
  int slot = size > 0 ? size : 1;
  char* buf = calloc((size_t)o->n, (size_t)slot);
  int32_t* ctrl = calloc((size_t)o->n, sizeof(int32_t));
  uint64_t* t = calloc((size_t)max_iters + (size_t)batch, sizeof(uint64_t));
  if (!buf || !ctrl || !t) BENCH_DIE("out of memory");
  for (int i = 0; i < 2; i++)
    if (boot_op(o, buf, size)) BENCH_DIE("%s warm-up failed on rank %d", key, o->rank);
  int k = 0;
  uint64_t start = bench_now_ns(), sum = 0;
  for (;;) {
    for (int b = 0; b < batch; b++) {
      memset(buf + (size_t)o->rank * slot, o->rank + k, (size_t)slot);
      uint64_t t0 = bench_now_ns();
      if (boot_op(o, buf, size)) BENCH_DIE("%s failed on rank %d", key, o->rank);
      t[k] = bench_now_ns() - t0;
      sum += t[k++];
    }
    if (size > 0) /* check what the predecessor sent us */
      for (int r = 0; r < o->n; r++)
        if ((unsigned char)buf[(size_t)r * slot + slot - 1] != (unsigned char)(r + k - 1))
          BENCH_DIE("%s: rank %d got a wrong slot %d", key, o->rank, r);
    double el = (double)(bench_now_ns() - start) * 1e-9;
    ctrl[o->rank] = (o->rank == 0) && (k + batch > max_iters || (el > budget_s && k >= min_iters));
    if (o->allgather(o->ctx, ctrl, 4)) BENCH_DIE("control allgather failed on rank %d", o->rank);
    if (ctrl[0]) break;
  }
  if (o->rank == 0) {
    char name[128];
    snprintf(name, sizeof(name), "%s.mean_ns", key);
    bench_result(name, (double)sum / k);
    snprintf(name, sizeof(name), "%s.iters", key);
    bench_result(name, k);
    snprintf(name, sizeof(name), "%s.median_ns", key);
    bench_result(name, (double)bench_median(t, (size_t)k));
  }
  free(buf);
  free(ctrl);
  free(t);
}

/* The three bootstrap figures, with per-figure time budgets. BENCH_ONLY
 * (a list of ag4, barrier, ag1m) runs only those. */
static void boot_all(boot_ops* o)
{
  double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
  const char* only = getenv("BENCH_ONLY");
#define BOOT_WANT(k) (!only || !*only || strstr(only, k))
  if (BOOT_WANT("ag4")) boot_measure(o, "ag4", 4, budget, 20, 20, 100000);
  if (BOOT_WANT("barrier")) boot_measure(o, "barrier", 0, budget, 20, 20, 100000);
  if (BOOT_WANT("ag1m")) boot_measure(o, "ag1m", 1 << 20, 2 * budget, 1, 3, 1000);
#undef BOOT_WANT
}

#endif
