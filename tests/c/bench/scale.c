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
 *    mscclppConnect's every other rank (tag 0, a 64-byte slice per peer of
 *    one mscclppHostAlloc buffer; mscclppTransportSHM to a rank of its node,
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
 * 5. the check: the proxies start and every rank puts 8 bytes with a signal
 *    into every peer's buffer, waits for every peer's (at most twice
 *    MSCCLPP_BOOTSTRAP_TIMEOUT, default 30 s) and checks them (a
 *    setup that connected the wrong pairs fails the run), then a closing
 *    barrier. Reported after it, as the setup's CPU figures, to show where
 *    the time goes when ranks outnumber CPUs (every wait of the library is
 *    bounded by MSCCLPP_BOOTSTRAP_TIMEOUT: a phase whose slowest rank ends
 *    more than that after its fastest one fails its closing barrier):
 *      chk.wall_ns      first rank's start to last rank's barrier entry
 *      chk.spread_ns    the closing barrier's longest wait: last entry - first
 *      <a2a|chk>.cpu_sum_ns   the CPU time of all ranks in the phase
 *      <a2a|chk>.busy_pct     the machine's busy CPU in the phase, % of
 *                       all its CPUs (/proc/stat, read by rank 0 around it:
 *                       other processes' load included)
 *      <a2a|chk>.ours_pct     the ranks' CPU, % of all CPUs over the phase
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

enum { BUFSZ = 64, AG_CPU_CALLS = 50 };
/* per rank, gathered to rank 0: setup start, end, end of the Connect calls; descriptors and
 * resident KiB after init and after the setup; CPU ns in init, per allgather, in the setup */
enum { T_START, T_END, T_CONN, FDS_A2A, FDS_INIT, RSS_INIT, RSS_A2A, CPU_INIT, CPU_AG, CPU_A2A, NFIG };
/* per rank, gathered after the check's closing barrier: its start, barrier entry and CPU ns */
enum { C_START, C_BAR, C_CPU, NCHK };

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

/* The machine's busy and total CPU time so far, in clock ticks (/proc/stat's cpu line). */
static void machine_ticks(uint64_t* busy, uint64_t* total)
{
  unsigned long long v[8] = {0};
  FILE* f = fopen("/proc/stat", "r");
  if (f == NULL || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                          &v[6], &v[7]) != 8)
    BENCH_DIE("rank %d: /proc/stat", rank);
  fclose(f);
  *total = 0;
  for (int i = 0; i < 8; i++) *total += v[i];
  *busy = *total - v[3] - v[4]; /* not idle, not iowait */
}

/* The CPU figures of a phase of wall ns in which the ranks used cpuSum ns and the machine
 * (busy, total: ticks between rank 0's two readings) was busy busy of total. */
static void report_phase(const char* key, uint64_t wall, uint64_t cpuSum, uint64_t busy, uint64_t total)
{
  char name[96];
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(name, sizeof(name), "%s.cpu_sum_ns", key);
  bench_result(name, (double)cpuSum);
  if (total > 0) {
    snprintf(name, sizeof(name), "%s.busy_pct", key);
    bench_result(name, 100.0 * (double)busy / (double)total);
  }
  if (wall > 0 && ncpu > 0) {
    snprintf(name, sizeof(name), "%s.ours_pct", key);
    bench_result(name, 100.0 * (double)cpuSum / ((double)wall * (double)ncpu));
  }
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
static void check_pairs(mscclppComm_t comm, char** bufs, uint64_t* c, int waitMs)
{
  c[C_START] = bench_now_ns();
  uint64_t cpu0 = cpu_ns();
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
    CK(mscclppDevConnWaitTimeout(dc, waitMs));
    uint64_t got;
    memcpy(&got, bufs[p] + 8, sizeof(got));
    if (got != word(p, rank))
      BENCH_DIE("rank %d: from rank %d got %#llx, want %#llx", rank, p, (unsigned long long)got,
                (unsigned long long)word(p, rank));
  }
  c[C_CPU] = cpu_ns() - cpu0;
  c[C_BAR] = bench_now_ns();
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
  /* one allocation, a BUFSZ slice per peer: the descriptors a rank holds are then the library's
   * (a mscclppHostAlloc buffer is a memfd of its own: one per peer would add N - 1) */
  char* block = NULL;
  CK(mscclppHostAlloc((void**)&block, (size_t)nranks * BUFSZ));
  for (int p = 0; p < nranks; p++) bufs[p] = block + (size_t)p * BUFSZ;
  CK(mscclppBootstrapBarrier(comm));
  uint64_t* t = all + NFIG * rank;
  uint64_t busy0 = 0, total0 = 0, busy1 = 0, total1 = 0;
  if (rank == 0) machine_ticks(&busy0, &total0);
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
    machine_ticks(&busy1, &total1);
    uint64_t first = all[T_START], last = all[T_END], conn = 0, fds = 0, fdsI = 0, cpuSum = 0;
    for (int r = 0; r < nranks; r++) {
      t = all + NFIG * r;
      if (t[T_START] < first) first = t[T_START];
      if (t[T_END] > last) last = t[T_END];
      if (t[T_CONN] - t[T_START] > conn) conn = t[T_CONN] - t[T_START];
      if (t[FDS_A2A] > fds) fds = t[FDS_A2A];
      if (t[FDS_INIT] > fdsI) fdsI = t[FDS_INIT];
      cpuSum += t[CPU_A2A];
    }
    bench_result("a2a.setup_ns", (double)(last - first));
    report_phase("a2a", last - first, cpuSum, busy1 - busy0, total1 - total0);
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
  uint64_t* chk = calloc((size_t)nranks * NCHK, sizeof(uint64_t));
  if (chk == NULL) BENCH_DIE("out of memory");
  if (rank == 0) machine_ticks(&busy0, &total0);
  check_pairs(comm, bufs, chk + NCHK * rank, 2000 * bench_env_int("MSCCLPP_BOOTSTRAP_TIMEOUT", 30));
  if (rank == 0) machine_ticks(&busy1, &total1);
  CK(mscclppBootstrapAllGather(comm, chk, NCHK * sizeof(uint64_t)));
  if (rank == 0) {
    uint64_t first = UINT64_MAX, barFirst = UINT64_MAX, barLast = 0, cpuSum = 0;
    for (int r = 0; r < nranks; r++) {
      uint64_t* c = chk + NCHK * r;
      if (c[C_START] < first) first = c[C_START];
      if (c[C_BAR] < barFirst) barFirst = c[C_BAR];
      if (c[C_BAR] > barLast) barLast = c[C_BAR];
      cpuSum += c[C_CPU];
    }
    bench_result("chk.wall_ns", (double)(barLast - first));
    bench_result("chk.spread_ns", (double)(barLast - barFirst));
    report_phase("chk", barLast - first, cpuSum, busy1 - busy0, total1 - total0);
  }
  free(chk);
  CK(mscclppCommDestroy(comm));
  CK(mscclppHostFree(block));
  free(node);
  free(bufs);
  free(all);
  return 0;
}
