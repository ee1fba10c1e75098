/*
 * proxy_mscclpp: the library's proxy path in host mode (the host-mode FIFO
 * and proxy run the code CUDA mode runs, minus the driver calls), beside
 * references run by the same processes. Started by launch (bench.h):
 *
 *   launch 2 proxy_mscclpp trig
 *       Rank 0 measures; rank 1 only holds the other end of the connections
 *       (it launches no proxy and sleeps until rank 0 is done). Rank 0 makes
 *       4 SHM connections and 1 Ethernet connection to rank 1, so it has two
 *       proxy threads (one per transport), finds their thread ids (the
 *       threads mscclppProxyLaunch started: the task list before and after,
 *       then a burst of triggers into each FIFO tells which one serves it)
 *       and pins itself to CPU 0, the proxies and the raw ring's consumer
 *       (proxy_ref.h) to CPU 1. Then, interleaved block by block (each block
 *       after a few untimed round trips, so that no block starts with a
 *       proxy asleep in its back-off):
 *         rt.raw / rt.ours      one 16-byte entry pushed, then waited for
 *                               until served: the raw ring / mscclppFifoPush
 *                               of a Sync (size 1: the smallest served
 *                               trigger, no transport work) then
 *                               mscclppFifoWaitServed; ns per round trip,
 *                               each sample RT_GROUP round trips timed
 *                               together (a clock read costs a third of a
 *                               round trip and moves in 10 ns steps on some
 *                               VMs: timed one by one, both figures would
 *                               carry it), median over samples
 *         rt.direct             the same trigger pushed and waited for
 *                               through the FIFO's fields, as device code
 *                               does (mscclppfifo.h's protocol on a CPU
 *                               thread: no library call): the proxy's own
 *                               part of rt.ours
 *         tput.raw / tput.<k>   8192 entries pushed as fast as the 128 slots
 *                               allow, then the last one waited for: the raw
 *                               ring / Syncs round-robin over k = 1, 2, 4
 *                               SHM connections (one proxy); entries per
 *                               second, median over blocks
 *         tput.2proxy           the same, alternating between the SHM and
 *                               the Ethernet FIFO (two proxies on CPU 1)
 *         tput.2proxy2cpu       the same with the Ethernet proxy on CPU 0,
 *                               beside the producer (two proxies on 2 CPUs)
 *         tput.data             1-byte Data triggers, one connection
 *         push.ours / push.proto 100 pushes into a FIFO with room, timed
 *                               apart from their service: ns per push,
 *                               mscclppFifoPush / the protocol's push
 *         rt.proto / tput.proto the raw ring with the FIFO protocol of
 *                               mscclppfifo.h (proxy_ref.h rawPushProto: a
 *                               claim by atomic add, room from a published
 *                               tail): the floor under any FIFO with this ABI
 *       Then the idle cost: CPU time of each proxy thread (its thread CPU
 *       clock) over BENCH_PROXY_IDLE_S (0.5 s) of idling, per second; and the
 *       wake-up: after N = 1, 10, 100 ms idle, one Sync pushed -> served.
 *   launch -p 2 proxy_mscclpp pair
 *       The pp.h ping-pong (pp_multi) at 8 B, 64 KiB, 1 MiB on one SHM
 *       connection between mscclppHostAlloc buffers, interleaved block by
 *       block: host (putWithSignal on the calling thread, no proxy), raw (a
 *       raw ring served by a thread of the rank that copies into the
 *       peer's buffer and stores a signal count, asleep on a futex doorbell
 *       when idle: proxy_ref.h rawProxy) and proxy (epochIncrement +
 *       mscclppFifoPush of a Data|Flag trigger, as device putWithSignal
 *       does; the rank's proxy does the copy and the signal). Both directions of a round go the same way; the peer waits
 *       with wait(). Each rank's proxy runs on its rank's CPU (inherited from
 *       launch -p). Figures pair.<size>.<host|raw|proxy>.oneway_ns / .gbps.
 *
 * Figures: RESULT lines of rank 0 (bench.h).
 */
#define _GNU_SOURCE
#include <mscclpp.h>
#include <pthread.h>
#include <sys/stat.h>

#include "pp.h"
#include "proxy_ref.h"

static mscclppComm_t comm;

#define CK(call) BENCH_CK(comm, call)

/* ---- threads ---- */

#define MAXTASKS 256

static int listTasks(int* tids)
{
  DIR* d = opendir("/proc/self/task");
  if (d == NULL) BENCH_DIE("opendir /proc/self/task: %s", strerror(errno));
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL && n < MAXTASKS)
    if (e->d_name[0] != '.') tids[n++] = atoi(e->d_name);
  closedir(d);
  return n;
}

/* CPU time (ns) of thread tid of this process: its per-thread CPU clock (MAKE_THREAD_CPUCLOCK). */
static uint64_t threadCpuNs(int tid)
{
  clockid_t id = (clockid_t)((~(unsigned)tid) << 3) | 6; /* CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED */
  struct timespec ts;
  if (clock_gettime(id, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pinTid(int tid, int cpu)
{
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(tid, sizeof(set), &set) != 0) BENCH_DIE("sched_setaffinity(%d): %s", tid, strerror(errno));
}

static void pushServed(mscclppDevConn_t* c)
{
  uint64_t s = mscclppFifoPush(&c->fifo, mscclppSync, 0, 0, 1);
  if (s == MSCCLPP_FIFO_PUSH_FAILED) BENCH_DIE("mscclppFifoPush: %s", mscclppGetLastError(NULL));
  if (mscclppFifoWaitServed(&c->fifo, s) != 0) BENCH_DIE("mscclppFifoWaitServed: %s", mscclppGetLastError(NULL));
}

/* Of the threads in cand[0..n) (not yet taken: -1 marks taken), the one whose CPU time grows
 * most while 20000 triggers are served through c: c's proxy. */
static int findProxy(int* cand, int n, mscclppDevConn_t* c)
{
  uint64_t before[MAXTASKS];
  for (int i = 0; i < n; i++) before[i] = cand[i] > 0 ? threadCpuNs(cand[i]) : 0;
  for (int i = 0; i < 20000; i++) pushServed(c);
  int best = -1;
  uint64_t most = 0;
  for (int i = 0; i < n; i++) {
    if (cand[i] <= 0) continue;
    uint64_t d = threadCpuNs(cand[i]) - before[i];
    if (d > most) most = d, best = i;
  }
  if (best < 0) BENCH_DIE("no proxy thread found");
  int tid = cand[best];
  cand[best] = -1;
  return tid;
}

/* ---- interleaved blocks ---- */

enum { MAXW = 10, CAP = 400000 };
typedef struct way {
  const char* key;
  void (*block)(struct way* w);
  uint64_t* v; /* samples */
  size_t n;
  int kind; /* 0: ns per iteration (median), 1: per second (median) */
} way;

static mscclppDevConn_t* conns;
static mscclppDevConn_t* eth;
static rawRing ring;
static int timing; /* 0 during the warm-up cycle: samples are dropped */

static void add(way* w, uint64_t v)
{
  if (timing && w->n < CAP) w->v[w->n++] = v;
}

#define RT_ITERS 400
#define RT_GROUP 8 /* round trips per timed sample */
#define TPUT_N 8192

/* RT_ITERS round trips rt(), after 16 untimed ones: one sample of ns per round trip per group. */
#define RT_BLOCK(w, rt)                                                   \
  do {                                                                    \
    for (int i_ = 0; i_ < 16; i_++) rt;                                   \
    for (int i_ = 0; i_ < RT_ITERS / RT_GROUP; i_++) {                    \
      uint64_t t0_ = bench_now_ns();                                      \
      for (int j_ = 0; j_ < RT_GROUP; j_++) rt;                           \
      add((w), (bench_now_ns() - t0_) / RT_GROUP);                        \
    }                                                                     \
  } while (0)

static void rtOurs(way* w) { RT_BLOCK(w, pushServed(&conns[0])); }

/* The device protocol of mscclppfifo.h on a CPU thread, on the library's FIFO through its public
 * fields: a claim by atomic add on the head, room from a copy of the tail read again only when it
 * says full, word 1 then word 0 (release); served: the slot emptied (the FIFO's own tail is past
 * it only once the slot was reused, which a round trip never does). */
static uint64_t directTailSeen;
static inline uint64_t directPush(struct mscclppConcurrentFifo* f)
{
  uint64_t h = __atomic_fetch_add(f->triggerFifoHead, 1, __ATOMIC_SEQ_CST);
  while (h >= MSCCLPP_PROXY_FIFO_SIZE + directTailSeen)
    if (h >= MSCCLPP_PROXY_FIFO_SIZE + (directTailSeen = __atomic_load_n(f->triggerFifoTail, __ATOMIC_ACQUIRE))) bench_pause();
  mscclppTrigger* s = &f->triggerFifo[h % MSCCLPP_PROXY_FIFO_SIZE];
  __atomic_store_n(&s->value[1], MSCCLPP_TRIGGER_WORD1(mscclppSync, f->connId, 0), __ATOMIC_RELAXED);
  __atomic_store_n(&s->value[0], MSCCLPP_TRIGGER_WORD0(0, 1), __ATOMIC_RELEASE);
  return h;
}
static inline void directWait(struct mscclppConcurrentFifo* f, uint64_t h)
{
  while (__atomic_load_n(&f->triggerFifo[h % MSCCLPP_PROXY_FIFO_SIZE].value[0], __ATOMIC_ACQUIRE) != 0) bench_pause();
}
static void rtDirect(way* w)
{
  struct mscclppConcurrentFifo* f = &conns[0].fifo;
  RT_BLOCK(w, directWait(f, directPush(f)));
}

/* The raw ring's blocks: proto 0 the ring alone, 1 with the FIFO protocol (always inlined with a
 * constant proto, so that each reference runs its own code, no call through a pointer). */
#define RING_PUSH(proto) ((proto) ? rawPushProto(&ring, 1, 4) : rawPush(&ring, 1, 4))
#define RING_WAIT(proto, h) ((proto) ? rawWaitServedProto(&ring, (h)) : rawWaitServed(&ring, (h)))

static inline __attribute__((always_inline)) void rtRing(way* w, int proto)
{
  rawRun(&ring, proto ? 3 : 1);
  RT_BLOCK(w, RING_WAIT(proto, RING_PUSH(proto)));
  rawRun(&ring, 0);
}

static inline __attribute__((always_inline)) void tputRing(way* w, int proto)
{
  rawRun(&ring, proto ? 3 : 1);
  for (int i = 0; i < 16; i++) RING_WAIT(proto, RING_PUSH(proto));
  uint64_t t0 = bench_now_ns(), h = 0;
  for (int i = 0; i < TPUT_N; i++) h = RING_PUSH(proto);
  RING_WAIT(proto, h);
  add(w, (uint64_t)(TPUT_N * 1e9 / (double)(bench_now_ns() - t0)));
  rawRun(&ring, 0);
}

/* The cost of a push alone: PUSH_N pushes into a FIFO with room for them (none waits), timed
 * without their service, then waited for; ns per push. Ours, and the FIFO protocol's push. */
#define PUSH_N 100

static void pushOurs(way* w)
{
  mscclppDevConn_t* c = &conns[0];
  for (int r = 0; r < 50; r++) {
    pushServed(c);
    uint64_t t0 = bench_now_ns(), h = 0;
    for (int i = 0; i < PUSH_N; i++) h = mscclppFifoPush(&c->fifo, mscclppSync, 0, 0, 1);
    uint64_t t1 = bench_now_ns();
    if (h == MSCCLPP_FIFO_PUSH_FAILED || mscclppFifoWaitServed(&c->fifo, h) != 0)
      BENCH_DIE("mscclppFifoPush/WaitServed: %s", mscclppGetLastError(NULL));
    add(w, (t1 - t0) / PUSH_N);
  }
}

static void pushProto(way* w)
{
  rawRun(&ring, 3);
  for (int r = 0; r < 50; r++) {
    RING_WAIT(1, RING_PUSH(1));
    uint64_t t0 = bench_now_ns(), h = 0;
    for (int i = 0; i < PUSH_N; i++) h = RING_PUSH(1);
    uint64_t t1 = bench_now_ns();
    RING_WAIT(1, h);
    add(w, (t1 - t0) / PUSH_N);
  }
  rawRun(&ring, 0);
}

static void rtRaw(way* w) { rtRing(w, 0); }
static void rtProto(way* w) { rtRing(w, 1); }
static void tputRaw(way* w) { tputRing(w, 0); }
static void tputProto(way* w) { tputRing(w, 1); }

/* TPUT_N triggers of type/size round-robin over the FIFOs of cs[0..k), then the last of each served. */
static void tputOn(way* w, mscclppDevConn_t** cs, int k, uint64_t type)
{
  for (int j = 0; j < k; j++)
    for (int i = 0; i < 8; i++) pushServed(cs[j]);
  uint64_t last[4];
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < TPUT_N; i++) {
    mscclppDevConn_t* c = cs[i % k];
    last[i % k] = mscclppFifoPush(&c->fifo, type, 0, 0, 1);
    if (last[i % k] == MSCCLPP_FIFO_PUSH_FAILED) BENCH_DIE("mscclppFifoPush: %s", mscclppGetLastError(NULL));
  }
  for (int j = 0; j < k; j++)
    if (mscclppFifoWaitServed(&cs[j]->fifo, last[j]) != 0) BENCH_DIE("mscclppFifoWaitServed: %s", mscclppGetLastError(NULL));
  add(w, (uint64_t)(TPUT_N * 1e9 / (double)(bench_now_ns() - t0)));
}

static void tput1(way* w) { mscclppDevConn_t* cs[] = {&conns[0]}; tputOn(w, cs, 1, mscclppSync); }
static void tput2(way* w) { mscclppDevConn_t* cs[] = {&conns[0], &conns[1]}; tputOn(w, cs, 2, mscclppSync); }
static void tput4(way* w)
{
  mscclppDevConn_t* cs[] = {&conns[0], &conns[1], &conns[2], &conns[3]};
  tputOn(w, cs, 4, mscclppSync);
}
static void tput2proxy(way* w) { mscclppDevConn_t* cs[] = {&conns[0], eth}; tputOn(w, cs, 2, mscclppSync); }

/* The same with the two proxies on the two CPUs: the Ethernet proxy moves to CPU 0 (the
 * producer's) for the block, then back. */
static int ethProxyTid, cpuOfProxies;
static void tput2proxy2cpu(way* w)
{
  pinTid(ethProxyTid, 0);
  tput2proxy(w);
  pinTid(ethProxyTid, cpuOfProxies);
}
static void tputData(way* w) { mscclppDevConn_t* cs[] = {&conns[0]}; tputOn(w, cs, 1, mscclppData); }

/* Runs the blocks of ws[0..k) in turn until budget (after a warm-up cycle and minCycles) and
 * reports each way's median; med[j] gets it. */
static void interleave(way* ws, int k, double budget, int minCycles, double* med)
{
  for (int j = 0; j < k; j++)
    if (!(ws[j].v = calloc(CAP, sizeof(uint64_t)))) BENCH_DIE("out of memory");
  uint64_t start = 0;
  for (int cycle = 0;; cycle++) {
    timing = cycle > 0;
    if (cycle == 1) start = bench_now_ns();
    for (int j = 0; j < k; j++) ws[j].block(&ws[j]);
    if (cycle >= minCycles && (double)(bench_now_ns() - start) * 1e-9 > budget) break;
  }
  for (int j = 0; j < k; j++) {
    char name[128];
    snprintf(name, sizeof(name), "%s.samples", ws[j].key);
    bench_result(name, (double)ws[j].n);
    snprintf(name, sizeof(name), "%s.%s", ws[j].key, ws[j].kind ? "per_s" : "ns");
    med[j] = (double)bench_median(ws[j].v, ws[j].n);
    bench_result(name, med[j]);
    free(ws[j].v);
  }
}

/* ---- trig ---- */

/* The median of way key among ws[0..k) (med from interleave); dies on an unknown key. */
static double medOf(const way* ws, const double* med, int k, const char* key)
{
  for (int j = 0; j < k; j++)
    if (!strcmp(ws[j].key, key)) return med[j];
  BENCH_DIE("no way %s", key);
}

static void idleCost(int tid, const char* key, double idleS)
{
  struct timespec settle = {0, 50000000};
  nanosleep(&settle, NULL);
  uint64_t c0 = threadCpuNs(tid), t0 = bench_now_ns();
  struct timespec ts = {(time_t)idleS, (long)((idleS - (double)(time_t)idleS) * 1e9)};
  nanosleep(&ts, NULL);
  uint64_t c1 = threadCpuNs(tid), t1 = bench_now_ns();
  char name[96];
  snprintf(name, sizeof(name), "idle.%s.cpu_ns_per_s", key);
  bench_result(name, (double)(c1 - c0) * 1e9 / (double)(t1 - t0));
}

static void wakeup(int ms, int reps)
{
  uint64_t v[16];
  for (int i = 0; i < reps; i++) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    uint64_t t0 = bench_now_ns();
    pushServed(&conns[0]);
    v[i] = bench_now_ns() - t0;
  }
  char name[64];
  snprintf(name, sizeof(name), "wake.%d.ns", ms);
  bench_result(name, (double)bench_median(v, (size_t)reps));
}

static void trig(int rank)
{
  enum { NSHM = 4, NB = NSHM + 1 };
  char* bufs[NB];
  for (int i = 0; i < NB; i++) {
    CK(mscclppHostAlloc((void**)&bufs[i], 4096));
    memset(bufs[i], 0, 4096);
  }
  for (int i = 0; i < NSHM; i++) CK(mscclppConnect(comm, 1 - rank, i, bufs[i], 4096, mscclppTransportSHM, NULL));
  CK(mscclppConnect(comm, 1 - rank, NSHM, bufs[NSHM], 4096, mscclppTransportEthernet, NULL));
  CK(mscclppConnectionSetup(comm));
  int nc;
  CK(mscclppGetAllDeviceConnections(comm, &conns, &nc));
  if (nc != NB || !conns[0].remoteBuff) BENCH_DIE("trig: expected %d connections, a mapped SHM buffer", NB);
  eth = &conns[NSHM];
  volatile uint64_t* done = (volatile uint64_t*)(bufs[0] + 64); /* rank 0 sets rank 1's through the mapping */
  if (rank == 1) {
    struct timespec ms = {0, 1000000};
    while (__atomic_load_n(done, __ATOMIC_ACQUIRE) == 0) nanosleep(&ms, NULL);
    CK(mscclppBootstrapBarrier(comm));
  } else {
    int before[MAXTASKS], after[MAXTASKS], cand[MAXTASKS], nb = listTasks(before), na, n = 0;
    CK(mscclppProxyLaunch(comm));
    na = listTasks(after);
    for (int i = 0; i < na; i++) {
      int old = 0;
      for (int j = 0; j < nb; j++) old |= after[i] == before[j];
      if (!old) cand[n++] = after[i];
    }
    int shmTid = findProxy(cand, n, &conns[0]);
    int ethTid = findProxy(cand, n, eth);
    int cpu1 = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0;
    bench_pin(0);
    pinTid(shmTid, cpu1);
    pinTid(ethTid, cpu1);
    ethProxyTid = ethTid;
    cpuOfProxies = cpu1;
    rawStart(&ring, cpu1);
    bench_result("trig.new_threads", n);
    double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
    way ws[] = {
        {"rt.raw", rtRaw, 0, 0, 0},         {"rt.ours", rtOurs, 0, 0, 0},
        {"tput.raw", tputRaw, 0, 0, 1},     {"tput.1", tput1, 0, 0, 1},
        {"tput.2", tput2, 0, 0, 1},         {"tput.4", tput4, 0, 0, 1},
        {"tput.2proxy", tput2proxy, 0, 0, 1}, {"tput.2proxy2cpu", tput2proxy2cpu, 0, 0, 1},
        {"tput.data", tputData, 0, 0, 1},
        {"push.ours", pushOurs, 0, 0, 0},   {"push.proto", pushProto, 0, 0, 0},
        {"rt.proto", rtProto, 0, 0, 0},     {"tput.proto", tputProto, 0, 0, 1},
        {"rt.direct", rtDirect, 0, 0, 0},
    };
    enum { K = sizeof(ws) / sizeof(ws[0]) };
    double med[K];
    interleave(ws, K, 4 * budget, 5, med);
    /* this run's ratios (the VM's cross-CPU latency moves between runs: the ratio of one run's
     * interleaved medians is steadier than a ratio of medians over runs): each round trip to the
     * raw ring's, each rate to the raw ring's, and the proof row ours against the protocol */
    static const char* const ratios[][3] = {
        {"rt.ratio", "rt.ours", "rt.raw"},          {"rt.proto.ratio", "rt.proto", "rt.raw"},
        {"rt.direct.ratio", "rt.direct", "rt.raw"}, {"tput.1.ratio", "tput.1", "tput.raw"},
        {"tput.2.ratio", "tput.2", "tput.raw"},     {"tput.4.ratio", "tput.4", "tput.raw"},
        {"tput.2proxy.ratio", "tput.2proxy", "tput.raw"}, {"tput.2proxy2cpu.ratio", "tput.2proxy2cpu", "tput.raw"},
        {"tput.data.ratio", "tput.data", "tput.raw"}, {"tput.proto.ratio", "tput.proto", "tput.raw"},
        {"tput.1.vsproto", "tput.1", "tput.proto"},
    };
    for (size_t r = 0; r < sizeof(ratios) / sizeof(ratios[0]); r++) {
      double a = medOf(ws, med, K, ratios[r][1]), b = medOf(ws, med, K, ratios[r][2]);
      if (b > 0) bench_result(ratios[r][0], a / b);
    }
    rawStop(&ring);
    double idleS = bench_env_double("BENCH_PROXY_IDLE_S", 0.5);
    idleCost(shmTid, "shm", idleS);
    idleCost(ethTid, "eth", idleS);
    wakeup(1, 9);
    wakeup(10, 9);
    wakeup(100, 3);
    __atomic_store_n((volatile uint64_t*)((char*)conns[0].remoteBuff + 64), 1, __ATOMIC_RELEASE);
    CK(mscclppBootstrapBarrier(comm));
  }
}

/* ---- pair ---- */

static void hostPut(void* c, size_t size) { CK(mscclppDevConnPutWithSignal((mscclppDevConn_t*)c, 0, 0, size)); }
static void proxyPut(void* c, size_t size)
{
  mscclppDevConn_t* d = c;
  mscclppDevConnEpochIncrement(d);
  if (mscclppFifoPush(&d->fifo, mscclppData | mscclppFlag, 0, 0, size) == MSCCLPP_FIFO_PUSH_FAILED)
    BENCH_DIE("mscclppFifoPush: %s", mscclppGetLastError(NULL));
}
static void connWait(void* c) { CK(mscclppDevConnWait((mscclppDevConn_t*)c)); }

/* The raw reference's two ends: a push into the raw proxy's ring, and a wait on the signal
 * count the peer's raw proxy stores (4000 pauses, then yields: the library wait's default). */
typedef struct rawEnd {
  rawProxy p;
  volatile uint64_t* signal; /* in my buffer: the peer's raw proxy counts its signals here */
  uint64_t want;
} rawEnd;
static void rawPut(void* c, size_t size) { rawProxyPush(&((rawEnd*)c)->p, size); }
static void rawWait(void* c)
{
  rawEnd* e = c;
  e->want++;
  for (uint32_t n = 0; __atomic_load_n(e->signal, __ATOMIC_ACQUIRE) < e->want; n++)
    if (n < 4000) bench_pause();
    else sched_yield();
}

static void pair(int rank)
{
  size_t max = 1u << 20;
  char* buf;
  CK(mscclppHostAlloc((void**)&buf, max + 4096)); /* the raw reference's signal count at max */
  memset(buf, 1 + rank, max + 4096);
  memset(buf + max, 0, 64);
  CK(mscclppConnect(comm, 1 - rank, 0, buf, max + 4096, mscclppTransportSHM, NULL));
  CK(mscclppConnectionSetup(comm));
  int nc;
  CK(mscclppGetAllDeviceConnections(comm, &conns, &nc));
  if (nc != 1 || !conns[0].remoteBuff) BENCH_DIE("pair: expected 1 connection with a mapped buffer");
  int before[MAXTASKS], after[MAXTASKS], cand[MAXTASKS], nb = listTasks(before), n = 0;
  CK(mscclppProxyLaunch(comm));
  const char* where = getenv("BENCH_PROXY_CPU");
  if (where != NULL && *where) { /* a diagnostic layout: the proxy moved off its rank's CPU */
    int na = listTasks(after);
    for (int i = 0; i < na; i++) {
      int old = 0;
      for (int j = 0; j < nb; j++) old |= after[i] == before[j];
      if (!old) cand[n++] = after[i];
    }
    int tid = findProxy(cand, n, &conns[0]);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (!strcmp(where, "other")) CPU_SET(1 - rank, &set);
    else for (int c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; c++) CPU_SET(c, &set);
    if (sched_setaffinity(tid, sizeof(set), &set) != 0) BENCH_DIE("sched_setaffinity: %s", strerror(errno));
  }
  static rawEnd raw;
  rawProxyStart(&raw.p, buf, (char*)conns[0].remoteBuff, (volatile uint64_t*)((char*)conns[0].remoteBuff + max));
  raw.signal = (volatile uint64_t*)(buf + max);
  CK(mscclppBootstrapBarrier(comm)); /* both raw servers run before either pushes */
  pp_ops host = {&conns[0], rank, buf, buf, hostPut, connWait};
  pp_ops rawp = {&raw, rank, buf, buf, rawPut, rawWait};
  pp_ops proxy = {&conns[0], rank, buf, buf, proxyPut, connWait};
  pp_ops* ops[3] = {&host, &rawp, &proxy};
  double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
  static const size_t sizes[] = {8, 64u << 10, 1u << 20};
  static const char* const names[] = {"8", "64k", "1m"};
  for (int i = 0; i < 3; i++) {
    char k0[64], k1[64], k2[64];
    snprintf(k0, sizeof(k0), "pair.%s.host", names[i]);
    snprintf(k1, sizeof(k1), "pair.%s.raw", names[i]);
    snprintf(k2, sizeof(k2), "pair.%s.proxy", names[i]);
    const char* keys[3] = {k0, k1, k2};
    pp_multi(ops, keys, 3, sizes[i], budget, sizes[i] <= 8 ? 200 : 10, 3, 0);
  }
  rawProxyStop(&raw.p);
  CK(mscclppProxyStop(comm));
}

int main(int argc, char** argv)
{
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "trig") && strcmp(mode, "pair")) BENCH_DIE("usage: proxy_mscclpp trig|pair");
  int rank = bench_env_int("BENCH_RANK", 0), n = bench_env_int("BENCH_NRANKS", 1);
  if (!getenv("BENCH_ADDR")) BENCH_DIE("run me through launch");
  if (n != 2) BENCH_DIE("needs 2 ranks");
  bench_start();
  CK(mscclppCommInitRank(&comm, n, getenv("BENCH_ADDR"), rank));
  if (!strcmp(mode, "trig")) trig(rank);
  else pair(rank);
  CK(mscclppCommDestroy(comm));
  return 0;
}
