/*
 * scale: the library at many ranks -- init, the 4-byte allgather and a full
 * all-to-all connection setup. Started by launch (bench.sh's scale section).
 *
 *   launch N scale [noag]
 *
 * 1. init: mscclppCommInitRank from the release (reported through
 *    bench_ready; launch prints LAUNCH init_ns), after one untimed
 *    mscclppGetVersion as boot_mscclpp.c does;
 * 2. mscclppBootstrapAllGather of 4 B per rank, timed by boot.h (ag4),
 *    unless "noag";
 * 3. the all-to-all setup: after a barrier every rank notes the time,
 *    mscclppConnect's every other rank (tag 0, a 64-byte mscclppHostAlloc
 *    buffer of its own per peer; mscclppTransportSHM to a rank of its node,
 *    mscclppTransportEthernet to a rank of another node) and calls
 *    mscclppConnectionSetup once, and notes the time again. The figure,
 *    a2a.setup_ns, is the last rank's return minus the first rank's start
 *    (CLOCK_MONOTONIC is one clock for every process of the machine, also
 *    in other network namespaces), as launch measures init; a2a.connect_ns
 *    is the slowest rank's time in the Connect calls alone; a2a.fds the
 *    most file descriptors a rank holds open after the setup (against
 *    ulimit -n).
 * 4. what each rank holds and spent (for the model of docs/PERFORMANCE.md):
 *    its open descriptors and resident memory after init and after the
 *    setup, and its CPU time (getrusage, user + system) in init, per
 *    4-byte allgather (AG_CPU_CALLS more, after the timed ones) and in the
 *    setup. Rank 0 (the bootstrap's root and the star's hub) is reported
 *    apart from the others (their median and maximum):
 *      init.fds, a2a.fds                 the most descriptors a rank holds
 *      fds.<init|a2a>.root_n, .median_n, .max_n
 *      rss.<init|a2a>.root_kb, .median_kb, .max_kb   resident KiB
 *      cpu.<init|ag4|a2a>.root_ns, .median_ns, .max_ns
 * 5. untimed: the proxies start and every rank puts 8 bytes with a signal
 *    into every peer's buffer, waits for every peer's and checks them (a
 *    setup that connected the wrong pairs fails the run).
 *
 * The node of each rank: MSCCLPP_TEST_PLACEMENT (a comma list, set by
 * tests/multinode/rank.sh in a simulated cluster), else all on one node.
 */
#define _GNU_SOURCE
#include <mscclpp.h>

#include "boot.h"

#define CK(x)                                                                                             \
  do {                                                                                                    \
    mscclppResult_t r_ = (x);                                                                             \
    if (r_ != mscclppSuccess)                                                                             \
      BENCH_DIE("rank %d: %s: %s (%s)", rank, #x, mscclppGetErrorString(r_), mscclppGetLastError(NULL)); \
  } while (0)

#include <sys/resource.h>

enum { BUFSZ = 64, WAIT_MS = 60000, AG_CPU_CALLS = 50 };
/* per rank, gathered to rank 0: setup start, end, end of the Connect calls; descriptors and
 * resident KiB after init and after the setup; CPU ns in init, per allgather, in the setup */
enum { T_START, T_END, T_CONN, FDS_A2A, FDS_INIT, RSS_INIT, RSS_A2A, CPU_INIT, CPU_AG, CPU_A2A, NFIG };

static int rank, nranks;

static int ag(void* ctx, void* data, int size)
{
  return mscclppBootstrapAllGather((mscclppComm_t)ctx, data, size) != mscclppSuccess;
}

static int bar(void* ctx) { return mscclppBootstrapBarrier((mscclppComm_t)ctx) != mscclppSuccess; }

/* node[r] from MSCCLPP_TEST_PLACEMENT, else 0 for every rank */
static void placement(int* node)
{
  const char* p = getenv("MSCCLPP_TEST_PLACEMENT");
  for (int r = 0; r < nranks; r++) {
    node[r] = 0;
    if (p && *p) {
      node[r] = atoi(p);
      p = strchr(p, ',');
      p = p ? p + 1 : NULL;
    }
  }
}

static uint64_t word(int from, int to) { return 0x5ca1e00000000000ull | ((uint64_t)from << 16) | (uint64_t)to; }

/* The timed part: connect to every peer, one setup. t[0], t[1]: start and
 * end; t[2]: the end of the Connect calls. */
static void connect_all(mscclppComm_t comm, const int* node, char** bufs, uint64_t* t)
{
  t[0] = bench_now_ns();
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    mscclppTransport_t tr = node[p] == node[rank] ? mscclppTransportSHM : mscclppTransportEthernet;
    CK(mscclppConnect(comm, p, 0, bufs[p], BUFSZ, tr, NULL));
  }
  t[2] = bench_now_ns();
  CK(mscclppConnectionSetup(comm));
  t[1] = bench_now_ns();
}

/* The file descriptors this process holds open. */
static uint64_t open_fds(void)
{
  int n = bench_count_entries("/proc/self/fd");
  return n > 1 ? (uint64_t)(n - 1) : 0; /* not the directory's own */
}

/* The resident memory of this process, KiB (/proc/self/statm). */
static uint64_t rss_kb(void)
{
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, res = 0;
  if (f == NULL || fscanf(f, "%llu %llu", &size, &res) != 2) BENCH_DIE("rank %d: /proc/self/statm", rank);
  fclose(f);
  return res * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

/* The CPU time this process used so far (user + system), ns. */
static uint64_t cpu_ns(void)
{
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) BENCH_DIE("rank %d: getrusage: %s", rank, strerror(errno));
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

/* Rank 0's figure fig and the median and maximum of the other ranks' (all: NFIG per rank). */
static void report_ranks(const uint64_t* all, int fig, const char* key, const char* unit)
{
  char name[96];
  uint64_t* v = calloc((size_t)nranks, sizeof(uint64_t));
  if (v == NULL) BENCH_DIE("out of memory");
  int n = 0;
  uint64_t max = 0;
  for (int r = 1; r < nranks; r++) {
    v[n++] = all[NFIG * r + fig];
    if (all[NFIG * r + fig] > max) max = all[NFIG * r + fig];
  }
  snprintf(name, sizeof(name), "%s.root_%s", key, unit);
  bench_result(name, (double)all[fig]);
  if (n > 0) {
    snprintf(name, sizeof(name), "%s.median_%s", key, unit);
    bench_result(name, (double)bench_median(v, (size_t)n));
    snprintf(name, sizeof(name), "%s.max_%s", key, unit);
    bench_result(name, (double)max);
  }
  free(v);
}

/* Every rank puts word(rank, p) into every peer p's buffer at offset 8, then
 * waits for every peer's word in its own buffers. */
static void check_pairs(mscclppComm_t comm, char** bufs)
{
  CK(mscclppProxyLaunch(comm));
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    uint64_t w = word(rank, p);
    memcpy(bufs[p], &w, sizeof(w));
    mscclppDevConn_t* dc = NULL;
    CK(mscclppGetDeviceConnection(comm, p, 0, &dc));
    CK(mscclppDevConnPutWithSignal(dc, 8, 0, sizeof(w)));
  }
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    mscclppDevConn_t* dc = NULL;
    CK(mscclppGetDeviceConnection(comm, p, 0, &dc));
    CK(mscclppDevConnWaitTimeout(dc, WAIT_MS));
    uint64_t got;
    memcpy(&got, bufs[p] + 8, sizeof(got));
    if (got != word(p, rank))
      BENCH_DIE("rank %d: from rank %d got %#llx, want %#llx", rank, p, (unsigned long long)got,
                (unsigned long long)word(p, rank));
  }
  CK(mscclppBootstrapBarrier(comm));
  CK(mscclppProxyStop(comm));
}

int main(int argc, char** argv)
{
  rank = bench_env_int("BENCH_RANK", 0), nranks = bench_env_int("BENCH_NRANKS", 1);
  const char* addr = getenv("BENCH_ADDR");
  if (!addr) BENCH_DIE("run me through launch");
  (void)boot_all; /* boot.h's, unused here */
  int noag = argc > 1 && strcmp(argv[1], "noag") == 0;
  int v;
  mscclppGetVersion(&v);
  bench_start();
  uint64_t cpu0 = cpu_ns();
  mscclppComm_t comm = NULL;
  CK(mscclppCommInitRank(&comm, nranks, addr, rank));
  bench_ready();
  uint64_t cpuInit = cpu_ns() - cpu0, fdsInit = open_fds(), rssInit = rss_kb(), cpuAg = 0;

  if (!noag) {
    boot_ops o = {comm, rank, nranks, ag, bar};
    boot_measure(&o, "ag4", 4, bench_env_double("BENCH_BUDGET_S", 0.3), 20, 20, 100000);
    int32_t* slots = calloc((size_t)nranks, sizeof(int32_t));
    if (slots == NULL) BENCH_DIE("out of memory");
    uint64_t c0 = cpu_ns();
    for (int i = 0; i < AG_CPU_CALLS; i++) CK(mscclppBootstrapAllGather(comm, slots, 4));
    cpuAg = (cpu_ns() - c0) / AG_CPU_CALLS;
    free(slots);
  }

  int* node = calloc((size_t)nranks, sizeof(int));
  char** bufs = calloc((size_t)nranks, sizeof(char*));
  uint64_t* all = calloc((size_t)nranks * NFIG, sizeof(uint64_t));
  if (!node || !bufs || !all) BENCH_DIE("out of memory");
  placement(node);
  for (int p = 0; p < nranks; p++)
    if (p != rank) CK(mscclppHostAlloc((void**)&bufs[p], BUFSZ));
  CK(mscclppBootstrapBarrier(comm));
  uint64_t* t = all + NFIG * rank;
  uint64_t c1 = cpu_ns();
  connect_all(comm, node, bufs, t);
  t[CPU_A2A] = cpu_ns() - c1;
  t[FDS_A2A] = open_fds();
  t[FDS_INIT] = fdsInit;
  t[RSS_INIT] = rssInit;
  t[RSS_A2A] = rss_kb();
  t[CPU_INIT] = cpuInit;
  t[CPU_AG] = cpuAg;
  CK(mscclppBootstrapAllGather(comm, all, NFIG * sizeof(uint64_t)));
  if (rank == 0) {
    uint64_t first = all[T_START], last = all[T_END], conn = 0, fds = 0, fdsI = 0;
    for (int r = 0; r < nranks; r++) {
      t = all + NFIG * r;
      if (t[T_START] < first) first = t[T_START];
      if (t[T_END] > last) last = t[T_END];
      if (t[T_CONN] - t[T_START] > conn) conn = t[T_CONN] - t[T_START];
      if (t[FDS_A2A] > fds) fds = t[FDS_A2A];
      if (t[FDS_INIT] > fdsI) fdsI = t[FDS_INIT];
    }
    bench_result("a2a.setup_ns", (double)(last - first));
    bench_result("a2a.connect_ns", (double)conn);
    bench_result("a2a.fds", (double)fds);
    bench_result("init.fds", (double)fdsI);
    report_ranks(all, FDS_INIT, "fds.init", "n");
    report_ranks(all, FDS_A2A, "fds.a2a", "n");
    report_ranks(all, RSS_INIT, "rss.init", "kb");
    report_ranks(all, RSS_A2A, "rss.a2a", "kb");
    report_ranks(all, CPU_INIT, "cpu.init", "ns");
    if (!noag) report_ranks(all, CPU_AG, "cpu.ag4", "ns");
    report_ranks(all, CPU_A2A, "cpu.a2a", "ns");
  }
  check_pairs(comm, bufs);
  CK(mscclppCommDestroy(comm));
  for (int p = 0; p < nranks; p++)
    if (p != rank) CK(mscclppHostFree(bufs[p]));
  free(node);
  free(bufs);
  free(all);
  return 0;
}
