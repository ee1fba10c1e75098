/*
 * perf_bench.h: perf's measurement loop, for perf.c (included once there,
 * after the communicator and the connections it drives; static functions):
 * one allgather (allgather_once), a phase of warm-up and timed iterations
 * then the check (run_phase), the ranks' times combined into a row
 * (combine), every size of one element type (run_type), and rank 0's header
 * lines. A file of its own: the timed part, apart from the options
 * (perf_opts.h), the set-up of ranks and connections and main (perf.c).
 */
#ifndef PERF_BENCH_H_
#define PERF_BENCH_H_

/* ---- the benchmark ---- */

static void wait_peer(int p, const char* when)
{
  mscclppResult_t r = mscclppDevConnWaitTimeout(conn[p], 60000);
  if (r != mscclppSuccess) {
    fprintf(stderr, "perf rank %d: waiting for rank %d (%s): %s: %s\n", rank, p, when, mscclppGetErrorString(r),
            mscclppGetLastError(comm));
    exit(1);
  }
}

/* One allgather: out of place, the chunk first goes from send to its slot. */
static void allgather_once(unsigned char* buf, const unsigned char* send, size_t chunk, int inPlace, int blocking)
{
  size_t off = (size_t)rank * chunk;
  if (!inPlace) memcpy(buf + off, send, chunk);
  for (int k = 1; k < nranks; k++) {
    int p = (rank + k) % nranks;
    mscclppResult_t r = mscclppDevConnPutWithSignal(conn[p], off, off, chunk);
    if (r != mscclppSuccess) {
      fprintf(stderr, "perf rank %d: put of %zu bytes to rank %d: %s: %s\n", rank, chunk, p, mscclppGetErrorString(r),
              mscclppGetLastError(comm));
      exit(1);
    }
  }
  for (int k = 1; k < nranks; k++) wait_peer((rank + nranks - k) % nranks, "allgather");
  if (blocking) CK(mscclppBootstrapBarrier(comm));
}

struct phase {
  unsigned char *buf, *send;
  size_t chunk, ws;
  int inPlace, iters, warmup;
};

/* One column set: prepare, warm up, time, check; this rank's seconds per
 * collective and its wrong elements (-1 without -c) through *dt and *wrong. */
static void run_phase(const struct perf_opts* o, const struct phase* ph, double* dt, long long* wrong)
{
  size_t chunk = ph->chunk, mine = (size_t)rank * chunk;
  if (o->check) {
    for (int p = 0; p < nranks; p++)
      if (p != rank || !ph->inPlace) memset(ph->buf + (size_t)p * chunk, 0xEE, chunk);
    fill(ph->inPlace ? ph->buf + mine : ph->send, chunk, seed_of(rank, chunk, ph->inPlace));
  }
  CK(mscclppBootstrapBarrier(comm));
  for (int i = 0; i < ph->warmup; i++) allgather_once(ph->buf, ph->send, chunk, ph->inPlace, o->blocking);
  CK(mscclppBootstrapBarrier(comm));
  int launches = o->graph > 0 ? o->graph : 1;
  double t0 = now();
  for (int g = 0; g < launches; g++)
    for (int i = 0; i < ph->iters; i++)
      for (int a = 0; a < o->agg; a++) allgather_once(ph->buf, ph->send, chunk, ph->inPlace, o->blocking);
  *dt = (now() - t0) / ((double)launches * ph->iters * o->agg);
  *wrong = -1;
  if (o->check) {
    *wrong = 0;
    for (int p = 0; p < nranks; p++)
      *wrong += count_wrong(ph->buf + (size_t)p * chunk, chunk, seed_of(p, chunk, ph->inPlace), ph->ws);
  }
  mscclppResult_t async = mscclppSuccess;
  CK(mscclppCommGetAsyncError(comm, &async));
  if (async != mscclppSuccess) {
    fprintf(stderr, "perf rank %d: async error at chunk %zu: %s: %s\n", rank, chunk, mscclppGetErrorString(async),
            mscclppGetLastError(comm));
    *wrong = *wrong < 0 ? 1 : *wrong + 1;
  }
  if (*wrong > 0) fprintf(stderr, "perf rank %d: %lld wrong elements at chunk %zu bytes\n", rank, *wrong, chunk);
}

/* Every rank's time and wrong count to every rank: -a's time, the sum of wrongs. */
static void combine(const struct perf_opts* o, size_t size, double dt, long long wrong, struct perf_half* h)
{
  struct { double t; long long w; } * all = calloc((size_t)nranks, sizeof *all);
  all[rank].t = dt;
  all[rank].w = wrong;
  CK(mscclppBootstrapAllGather(comm, all, (int)sizeof *all));
  double t = all[0].t; /* -a 0: rank 0's */
  long long w = -1;     /* -1: nobody checked and nothing failed */
  for (int p = 1; p < nranks; p++) {
    if (o->average == 1) t += all[p].t;
    if (o->average == 2 && all[p].t < t) t = all[p].t;
    if (o->average == 3 && all[p].t > t) t = all[p].t;
  }
  for (int p = 0; p < nranks; p++)
    if (all[p].w >= 0) w = (w < 0 ? 0 : w) + all[p].w;
  if (o->average == 1) t /= nranks;
  free(all);
  h->timeUs = t * 1e6;
  h->algbw = t > 0 ? (double)size / t / 1e9 : 0;
  h->busbw = h->algbw * (double)(nranks - 1) / (double)nranks;
  h->wrong = w;
}

/* ---- the header lines (rank 0) ---- */

static void print_header(const struct perf_opts* o, const char* bufKind)
{
  static const char* const avgNames[] = {"rank 0's time", "the average over the ranks", "the minimum over the ranks",
                                         "the maximum over the ranks"};
  int version = 0;
  mscclppGetVersion(&version);
  printf("# mscclpp all_gather_perf: host mode over %s, library version %d\n", over, version);
  char step[64];
  if (o->factor > 1)
    snprintf(step, sizeof step, "%g(factor)", o->factor);
  else
    snprintf(step, sizeof step, "%zu(bytes)", o->stepBytes);
  printf("# nranks %d (pid %d is rank 0) nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d "
         "iters: %d agg iters: %d validation: %d graph: %d\n",
         nranks, (int)getpid(), o->minBytes, o->maxBytes, step, o->warmup, o->iters, o->agg, o->check, o->graph);
  printf("# launcher: %s; unique id: %s\n", launcherName, idSource);
  printf("# buffers: %s; algorithm: %s (each rank puts its chunk into every peer's buffer)\n", bufKind, algo);
  printf("# %s: %s (-a %d) of each rank's mean time per collective; algbw = size / time; busbw = algbw * (%d-1)/%d\n",
         o->cputime ? "cputime" : "time", avgNames[o->average], o->average, nranks, nranks);
  printf("# out-of-place: each rank's chunk starts in its own send buffer; in-place: it starts at its slot of the "
         "receive buffer\n");
  if (!o->itersGiven || !o->warmupGiven)
    printf("# iters: the timed iterations of each row; without -n sizes above 25 MiB run fewer (512 MiB gathered per "
           "size, at least 2)%s\n", o->warmupGiven ? "" : ", without -w one warm-up");
  if (o->rootGiven || strcmp(o->op, "sum") != 0 || o->root != 0)
    printf("# -o %s -r %d: an allgather has neither a reduction nor a root; like nccl-tests, redop reads none and root "
           "-1\n", o->op, o->root);
  if (o->blocking) printf("# Blocking Enabled: a barrier after each collective\n");
  if (o->parallel) printf("# Parallel Init: one rank per process, so -p 1 changes nothing\n");
  if (o->graph > 0)
    printf("# -G %d: host mode has no CUDA graph; the timed loop runs %d times over and time is divided by %d\n",
           o->graph, o->graph, o->graph);
  if (o->streamNull) printf("# -y 1: host mode has no streams; accepted, changes nothing\n");
  if (o->csv) printf("# Writing results to file: %s (CSV)\n", o->csv);
  if (o->json) printf("# Writing results to file: %s (JSON)\n", o->json);
}

static void json_params(const struct perf_opts* o, char* out, size_t len)
{
  snprintf(out, len,
           "\"minbytes\": %zu, \"maxbytes\": %zu, \"stepbytes\": %zu, \"stepfactor\": %g, \"iters\": %d, "
           "\"warmup_iters\": %d, \"agg_iters\": %d, \"check\": %d, \"average\": %d, \"blocking\": %d, "
           "\"cudagraph\": %d, \"parallel_init\": %d, \"op\": \"%s\", \"root\": %d, \"algorithm\": \"%s\", "
           "\"launcher\": \"%s\"",
           o->minBytes, o->maxBytes, o->stepBytes, o->factor, o->iters, o->warmup, o->agg, o->check, o->average,
           o->blocking, o->graph, o->parallel, o->op, o->root, algo, launcherName);
}

/* the largest chunk in bytes over the sizes and types */
static size_t top_chunk(const struct perf_opts* o)
{
  size_t top = 8;
  for (int t = 0; t < o->ntypes; t++)
    for (size_t s = o->minBytes; s != 0 && s <= o->maxBytes; s = next_size(s, o->factor, o->stepBytes)) {
      size_t c = chunk_of(s, (size_t)perf_types[o->types[t]].bytes);
      if (c > top) top = c;
    }
  return top;
}

/* Every size of one type: both column sets, one row each; the bus bandwidth sum and count through busSum/nBus. */
static long long run_type(const struct perf_opts* o, struct perf_report* rep, unsigned char* buf, unsigned char* send,
                          int type, double* busSum, int* nBus)
{
  long long wrongTotal = 0;
  size_t ws = (size_t)perf_types[type].bytes, lastChunk = 0;
  for (size_t want = o->minBytes; want != 0 && want <= o->maxBytes; want = next_size(want, o->factor, o->stepBytes)) {
    size_t chunk = chunk_of(want, ws);
    if (chunk == lastChunk) continue;
    lastChunk = chunk;
    size_t size = chunk * (size_t)nranks, budget = (size_t)512 << 20;
    struct phase ph = {buf, send, chunk, ws, 0, o->iters, o->warmup};
    if (!o->itersGiven && (size_t)ph.iters * size > budget) ph.iters = budget / size < 2 ? 2 : (int)(budget / size);
    if (!o->warmupGiven && ph.warmup > 0 && (size_t)ph.warmup * size > budget / 4) ph.warmup = 1;
    struct perf_row row = {perf_types[type].name, size, chunk / ws, ph.iters, {{0, 0, 0, 0}, {0, 0, 0, 0}}};
    for (ph.inPlace = 0; ph.inPlace < 2; ph.inPlace++) {
      double dt;
      long long wrong;
      run_phase(o, &ph, &dt, &wrong);
      combine(o, size, dt, wrong, &row.h[ph.inPlace]);
      if (row.h[ph.inPlace].wrong > 0) wrongTotal += row.h[ph.inPlace].wrong;
      *busSum += row.h[ph.inPlace].busbw;
      (*nBus)++;
    }
    if (rank == 0) report_row(rep, &row);
  }
  return wrongTotal;
}

#endif
