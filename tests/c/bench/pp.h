/*
 * pp.h: the two-process ping-pong shared by every host data-path program
 * (the references in host_ref.c and mpi_ref.c, the library in
 * host_mscclpp.c), so that all are timed by the same code.
 *
 * One iteration: rank 0 sends `size` bytes of its source buffer into rank
 * 1's inbox and signals; rank 1 waits for the signal, then sends 8 bytes
 * back and signals; rank 0 waits. Rank 0 times each iteration (the round
 * trip, RTT); for messages of up to 8 bytes, PP_GROUP iterations together
 * (one sample = their time / PP_GROUP): a clock read costs a fifth of such a
 * round trip here and moves in 10 ns steps on some VMs, and timed one by
 * one every sample would carry it. The first 8 bytes of every message carry
 * rank 0's decision to stop, so both ranks run the same number of
 * iterations.
 *
 * Figures (rank 0): <key>.oneway_ns = median RTT / 2 for 8-byte messages;
 * <key>.gbps = size / median RTT (GB/s, 1e9 bytes/s) for larger ones (the
 * 8-byte answer is included, and is well under 1% of it).
 */
#ifndef MSCCLPP_BENCH_PP_H_
#define MSCCLPP_BENCH_PP_H_

#include "bench.h"

#define PP_GROUP 8 /* round trips per sample for messages of up to 8 bytes */

typedef struct {
  void* ctx;
  int rank;
  char* src;            /* my source buffer (what put sends from offset 0) */
  volatile char* inbox; /* where the peer's puts land (offset 0) */
  void (*put)(void* ctx, size_t size); /* copy src[0..size) into the peer's inbox, then signal */
  void (*wait)(void* ctx);             /* wait for the peer's next signal */
} pp_ops;

static inline void pp_run(pp_ops* o, const char* key, size_t size, double budget_s, int warm, int min_iters)
{
  int max_iters = 2000000;
  uint64_t* t = o->rank == 0 ? calloc((size_t)max_iters, sizeof(uint64_t)) : NULL;
  int k = 0, it = 0, g = size <= 8 ? PP_GROUP : 1, last = 0;
  uint64_t start = 0, t0 = 0;
  warm = (warm + g - 1) / g * g; /* groups start at multiples of g */
  for (;;) {
    if (o->rank == 0) {
      if (it % g == 0) { /* a group starts: whether it is the last, then its clock */
        if (it == warm) start = bench_now_ns();
        double el = it >= warm ? (double)(bench_now_ns() - start) * 1e-9 : 0;
        last = it >= warm && ((el > budget_s && (k + 1) * g >= min_iters) || k + 1 >= max_iters);
        t0 = bench_now_ns();
      }
      uint64_t stop = last && (it + 1) % g == 0;
      memcpy(o->src, &stop, 8);
      o->put(o->ctx, size);
      o->wait(o->ctx);
      if ((it + 1) % g == 0 && it >= warm) t[k++] = (bench_now_ns() - t0) / (uint64_t)g;
      it++;
      if (stop) break;
    } else {
      uint64_t stop;
      o->wait(o->ctx);
      memcpy(&stop, (const char*)o->inbox, 8);
      memcpy(o->src, &stop, 8);
      o->put(o->ctx, 8);
      if (stop) break;
    }
  }
  if (o->rank == 0) {
    char name[128];
    double rtt = (double)bench_median(t, (size_t)k);
    snprintf(name, sizeof(name), "%s.iters", key);
    bench_result(name, k);
    if (size <= 8) {
      snprintf(name, sizeof(name), "%s.oneway_ns", key);
      bench_result(name, rtt / 2);
    } else {
      snprintf(name, sizeof(name), "%s.gbps", key);
      bench_result(name, (double)size / rtt);
    }
    free(t);
  }
}

/*
 * pp_multi: the same ping-pong, with k ways of doing it interleaved in the
 * same two processes, so that every figure and its references see the same
 * CPU placement and the same neighbours (on a shared VM the cross-CPU
 * latency alone moves by 3x from one second to the next). Iterations run in
 * blocks of `block`; blocks cycle through ops[0..k-1]; the first cycle is a
 * warm-up. Every way handles the stop word the same (rank 0 writes it into
 * src, rank 1 reads it from inbox and copies it into its src: a way that
 * moves no data points both at private scratch), but rank 0 only sets it on
 * the last iteration of a cycle that ends with ops[k-1], ours (after budget_s
 * and at least min_cycles timed cycles). Messages of up to 8 bytes are timed
 * PP_GROUP iterations at a time, as in pp_run (block is a multiple of it).
 * With alternate, odd cycles run the ways in reverse order: a way run right after
 * another on the same buffers finds them warm, and one after a way on other
 * buffers cold, so where a third way on other buffers sits between two that
 * share theirs, each of the two follows it in every other cycle.
 * Figures: <keys[j]>.oneway_ns or <keys[j]>.gbps as in pp_run, each over
 * its own iterations.
 */
static inline void pp_multi(pp_ops* const* ops, const char* const* keys, int k, size_t size, double budget_s, int block,
                     int min_cycles, int alternate)
{
  enum { MAXK = 8 };
  size_t cap = 400000;
  pp_ops* ours = ops[k - 1];
  int rank = ours->rank;
  uint64_t* t[MAXK] = {0};
  size_t nt[MAXK] = {0};
  int g = size <= 8 ? PP_GROUP : 1;
  if (k > MAXK) BENCH_DIE("pp_multi: too many ops");
  if (block % g != 0) BENCH_DIE("pp_multi: a block of %d iterations is not whole groups of %d", block, g);
  if (rank == 0)
    for (int j = 0; j < k; j++)
      if (!(t[j] = calloc(cap, sizeof(uint64_t)))) BENCH_DIE("out of memory");
  uint64_t start = 0, t0 = 0;
  for (uint64_t i = 0;; i++) {
    uint64_t cycle = i / ((uint64_t)k * (uint64_t)block);
    int pos = (int)((i / (uint64_t)block) % (uint64_t)k);
    int j = alternate && (cycle & 1) ? k - 1 - pos : pos;
    pp_ops* o = ops[j];
    /* the stop word travels in ours' data (a way that moves none cannot carry it): a run ends
     * with a cycle that ends with ours, so alternate cycles stop after as many reversed as not */
    int lastOfCycle = pos == k - 1 && j == k - 1 && (i + 1) % (uint64_t)block == 0;
    if (rank == 0) {
      if (i == (uint64_t)k * (uint64_t)block) start = bench_now_ns();
      uint64_t stop = 0;
      if (lastOfCycle && cycle >= 1) {
        double el = (double)(bench_now_ns() - start) * 1e-9;
        int full = 0;
        for (int q = 0; q < k; q++) full |= nt[q] + 2 * (size_t)block > cap; /* room for the next two cycles */
        stop = full || (el > budget_s && cycle >= (uint64_t)min_cycles);
      }
      memcpy(o->src, &stop, 8);
      if (i % (uint64_t)g == 0) t0 = bench_now_ns();
      o->put(o->ctx, size);
      o->wait(o->ctx);
      if ((i + 1) % (uint64_t)g == 0 && cycle >= 1) t[j][nt[j]++] = (bench_now_ns() - t0) / (uint64_t)g;
      if (stop) break;
    } else {
      uint64_t stop = 0;
      o->wait(o->ctx);
      memcpy(&stop, (const char*)o->inbox, 8);
      memcpy(o->src, &stop, 8);
      o->put(o->ctx, 8);
      if (stop) break;
    }
  }
  if (rank == 0) {
    for (int j = 0; j < k; j++) {
      char name[160];
      double rtt = (double)bench_median(t[j], nt[j]);
      snprintf(name, sizeof(name), "%s.iters", keys[j]);
      bench_result(name, (double)nt[j]);
      if (size <= 8) {
        snprintf(name, sizeof(name), "%s.oneway_ns", keys[j]);
        bench_result(name, rtt / 2);
      } else {
        snprintf(name, sizeof(name), "%s.gbps", keys[j]);
        bench_result(name, (double)size / rtt);
      }
      free(t[j]);
    }
  }
}

/* The standard sizes: 8 B, 1 MiB, 16 MiB, 256 MiB (largest first given). */
static const size_t pp_sizes[] = {8, 1u << 20, 16u << 20, 256u << 20};
static const char* const pp_names[] = {"8", "1m", "16m", "256m"};

/* Run the sizes up to maxSize, naming the figures <prefix>.<size>. */
static inline void pp_all(pp_ops* o, const char* prefix, size_t maxSize)
{
  double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
  for (int i = 0; i < 4 && pp_sizes[i] <= maxSize; i++) {
    char key[96];
    snprintf(key, sizeof(key), "%s.%s", prefix, pp_names[i]);
    size_t s = pp_sizes[i];
    if (s <= 8) pp_run(o, key, s, budget, 2000, 1000);
    else if (s <= (16u << 20)) pp_run(o, key, s, budget, 3, 10);
    else pp_run(o, key, s, budget, 1, 3);
  }
}

#endif
