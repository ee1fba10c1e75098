/*
 * fifo.cc: triggers through the proxy FIFO (conn.fifo.push / fifo.sync).
 *
 *   fifo wrap [--malloc]     (2+ ranks; every rank talks to rank (me+1)%n and
 *                             hears from (me-1+n)%n)
 *     Before mscclppProxyLaunch: 128 pushes fill the FIFO (none may block);
 *     a 129th push and a fifo.sync on a queued trigger must fail at once with
 *     the last error naming mscclppProxyLaunch (nobody would ever free a slot:
 *     waiting would hang), and leave the FIFO as it was.
 *     Then thousands of Data triggers (every one writing its own bytes at
 *     odd offsets and sizes) with a Flag every 100, Sync + fifo.sync, flush().
 *     The receiver waits for every signal (bounded), checks that the signal
 *     count is exact, every byte that should have arrived did, and the rest
 *     of its buffer is untouched.
 *   fifo concurrent          (3 ranks: two connections share the FIFO)
 *     4 threads push at once (2 per connection) 3000 triggers each, then the
 *     same threads do direct host puts at once; one Flag per connection at
 *     the end. Every byte checked.
 *   fifo order [--malloc]    (2 ranks)
 *   fifo flagorder [--malloc] (2 ranks)
 *     Host-mode ordering between FIFO triggers and the host methods:
 *     (a) fifo.push Data..., then conn.flush(), then the sender overwrites its
 *         source: the receiver must see the data as it was before flush();
 *     (b) fifo.push Data..., then conn.signal() (the host method): the
 *         receiver, once its wait returns, must see all of that data.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

static char* buf;
static size_t bufBytes;
static bool useMalloc = false;

static void alloc_buf(size_t n)
{
  bufBytes = n;
  if (useMalloc) {
    buf = (char*)malloc(n);
    SU_REQUIRE(buf != nullptr, "malloc");
  } else {
    SU_CK(mscclppHostAlloc((void**)&buf, n));
  }
  memset(buf, 0xEE, n);
}

static void free_buf()
{
  if (useMalloc)
    free(buf);
  else
    SU_CK(mscclppHostFree(buf));
}

static void finish_comm()
{
  mscclppResult_t async = mscclppSuccess;
  SU_CK(mscclppCommGetAsyncError(su_comm, &async));
  SU_CHECK(async == mscclppSuccess, "async error %s: %s", mscclppGetErrorString(async), su_lasterr(su_comm));
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  su_comm = nullptr;
  free_buf();
}

/* ---------------- wrap ---------------- */

static const int K = 6000; /* data triggers per sender */
static const size_t SLOT = 64;

static size_t wrap_dst(int i) { return (size_t)i * SLOT + (size_t)(i % 3); }
static size_t wrap_src(int i) { return (size_t)K * SLOT + (size_t)i * SLOT + 1; }
static size_t wrap_len(int i) { return 1 + (size_t)((i * 37) % 61); }

static int run_wrap()
{
  int n = su_nranks, me = su_rank;
  SU_REQUIRE(n >= 2, "needs 2 ranks");
  int to = (me + 1) % n, from = (me + n - 1) % n;
  su_comm_init();
  alloc_buf(2 * (size_t)K * SLOT);
  uint64_t seed = su_seed(77, me, 0);
  su_fill(buf + (size_t)K * SLOT, (size_t)K * SLOT, seed);
  SU_CK(mscclppConnect(su_comm, to, 0, buf, bufBytes, su_transport(), su_ibdev()));
  if (from != to) SU_CK(mscclppConnect(su_comm, from, 0, buf, bufBytes, su_transport(), su_ibdev()));
  SU_CK(mscclppConnectionSetup(su_comm));
  mscclppDevConn_t* out = nullptr;
  mscclppDevConn_t* in = nullptr;
  SU_CK(mscclppGetDeviceConnection(su_comm, to, 0, &out));
  SU_CK(mscclppGetDeviceConnection(su_comm, from, 0, &in));
  mscclppDevConn_t& c = *out;

  /* 1. 128 pushes before the proxy runs: they fit */
  int pushed = 0, flags = 0;
  double t0 = su_now();
  for (; pushed < MSCCLPP_PROXY_FIFO_SIZE; pushed++)
    c.fifo.push(mscclppData, wrap_dst(pushed), wrap_src(pushed), wrap_len(pushed));
  SU_CHECK(su_now() - t0 < 2.0, "128 pushes into an empty FIFO took %.3f s", su_now() - t0);
  SU_CHECK(*c.fifo.triggerFifoHead == (uint64_t)MSCCLPP_PROXY_FIFO_SIZE, "head %llu after 128 pushes",
           (unsigned long long)*c.fifo.triggerFifoHead);
  /* 2. one more has no room and no proxy to make room: an error, not a hang */
  t0 = su_now();
  uint64_t seq = mscclppFifoPush(&c.fifo, mscclppData, wrap_dst(pushed), wrap_src(pushed), wrap_len(pushed));
  SU_CHECK(seq == MSCCLPP_FIFO_PUSH_FAILED, "push into a full FIFO without a proxy returned %llu",
           (unsigned long long)seq);
  const char* why = mscclppGetLastError(NULL);
  SU_CHECK(why != NULL && strstr(why, "mscclppProxyLaunch") != NULL, "last error after the refused push: %s",
           why ? why : "(null)");
  int rc = mscclppFifoWaitServed(&c.fifo, 5);
  SU_CHECK(rc == mscclppInvalidUsage, "fifo wait on a queued trigger without a proxy returned %d", rc);
  SU_CHECK(su_now() - t0 < 1.0, "the refusals took %.3f s", su_now() - t0);
  SU_CHECK(*c.fifo.triggerFifoHead == (uint64_t)MSCCLPP_PROXY_FIFO_SIZE, "head %llu after the refused push",
           (unsigned long long)*c.fifo.triggerFifoHead);
  SU_CHECK(*c.fifo.triggerFifoTail == 0, "tail %llu before any proxy ran", (unsigned long long)*c.fifo.triggerFifoTail);
  SU_CK(mscclppProxyLaunch(su_comm));
  t0 = su_now();
  /* the queued triggers are served now, and a second thread's pushes go through */
  const int EXTRA = 200;
  std::atomic<int> extraDone(0);
  int extraFrom = pushed;
  std::thread extra([&] {
    for (int i = extraFrom; i < extraFrom + EXTRA; i++)
      if (c.fifo.push(mscclppData, wrap_dst(i), wrap_src(i), wrap_len(i)) != MSCCLPP_FIFO_PUSH_FAILED)
        extraDone.fetch_add(1);
  });
  extra.join();
  pushed += EXTRA;
  SU_CHECK(extraDone.load() == EXTRA, "pusher thread pushed %d of %d", extraDone.load(), EXTRA);
  /* 3. the rest, a Flag every 100, a Sync now and then */
  uint64_t lastSync = 0;
  for (; pushed < K; pushed++) {
    c.fifo.push(mscclppData, wrap_dst(pushed), wrap_src(pushed), wrap_len(pushed));
    if (pushed % 100 == 99) {
      c.epochIncrement();
      c.fifo.push(mscclppFlag, 0, 0, 1);
      flags++;
    }
    if (pushed % 1000 == 500) {
      lastSync = c.fifo.push(mscclppSync, 0, 0, 1);
      c.fifo.sync(lastSync);
      SU_CHECK(*c.fifo.triggerFifoTail > lastSync || c.fifo.triggerFifo[lastSync % MSCCLPP_PROXY_FIFO_SIZE].value[0] == 0,
               "fifo.sync(%llu) returned with tail %llu", (unsigned long long)lastSync,
               (unsigned long long)*c.fifo.triggerFifoTail);
    }
  }
  c.epochIncrement();
  uint64_t h = c.fifo.push(mscclppFlag | mscclppSync, 0, 0, 1);
  flags++;
  c.fifo.sync(h);
  c.flush();
  double tPush = su_now() - t0;

  /* receive: every signal of the sender, then exactly that many */
  int wantFlags = flags; /* the sender pushes the same count */
  for (int i = 0; i < wantFlags; i++) su_wait(in, 30000, "wrap signals");
  su_sleep_ms(50);
  SU_CHECK(in->localSignalEpochId->proxy == (uint64_t)wantFlags, "signal epoch %llu, want exactly %d",
           (unsigned long long)in->localSignalEpochId->proxy, wantFlags);
  /* data: the expected image */
  uint64_t peerSeed = su_seed(77, from, 0);
  std::vector<uint8_t> src((size_t)K * SLOT), want((size_t)K * SLOT, 0xEE);
  su_fill(src.data(), src.size(), peerSeed);
  for (int i = 0; i < K; i++) memcpy(&want[wrap_dst(i)], &src[wrap_src(i) - (size_t)K * SLOT], wrap_len(i));
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < want.size(); i++)
    if ((uint8_t)buf[i] != want[i]) {
      if (!wrong) first = i;
      wrong++;
    }
  SU_CHECK(wrong == 0, "%zu bytes of %zu wrong, first at %zu (trigger %zu): 0x%02x want 0x%02x", wrong, want.size(),
           first, first / SLOT, (uint8_t)buf[first], want[first]);
  su_verify(buf + (size_t)K * SLOT, (size_t)K * SLOT, seed, "my source region");
  printf("fifo wrap rank %d: %d triggers + %d flags pushed in %.3f s after the proxy started (%.2f us/trigger)\n",
         me, K, flags, tPush, tPush / (K - MSCCLPP_PROXY_FIFO_SIZE + flags) * 1e6);
  finish_comm();
  return su_finish();
}

/* ---------------- concurrent ---------------- */

static const int T = 4;    /* threads */
static const int M = 3000; /* triggers per thread */
static const size_t CSLOT = 16;

/* Region of (source rank s, thread t, phase ph) in the receiver's buffer. */
static size_t conc_region(int n, int s, int t, int ph)
{
  (void)n;
  return (((size_t)s * T + (size_t)t) * 2 + (size_t)ph) * (size_t)M * CSLOT;
}

static int run_concurrent()
{
  int n = su_nranks, me = su_rank;
  SU_REQUIRE(n >= 2, "needs 2 ranks");
  size_t recvBytes = (size_t)n * T * 2 * M * CSLOT;
  size_t srcBytes = (size_t)M * CSLOT;
  su_comm_init();
  alloc_buf(recvBytes + srcBytes);
  uint64_t seed = su_seed(99, me, 0);
  su_fill(buf + recvBytes, srcBytes, seed);
  std::vector<int> peers;
  for (int k = 1; k < n && (int)peers.size() < 2; k++) peers.push_back((me + k) % n);
  /* every rank connects to all others so that the mirror connections exist */
  for (int p = 0; p < n; p++)
    if (p != me) SU_CK(mscclppConnect(su_comm, p, 0, buf, bufBytes, su_transport(), su_ibdev()));
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  std::vector<mscclppDevConn_t*> conn(n, nullptr);
  for (int p = 0; p < n; p++)
    if (p != me) SU_CK(mscclppGetDeviceConnection(su_comm, p, 0, &conn[p]));
  /* senders: thread t pushes to peers[t % peers.size()] */
  double t0 = su_now();
  std::atomic<int> ready(0);
  std::vector<std::thread> th;
  for (int t = 0; t < T; t++)
    th.emplace_back([&, t] {
      mscclppDevConn_t& c = *conn[peers[t % peers.size()]];
      ready.fetch_add(1);
      while (ready.load() < T) {
      }
      size_t base = conc_region(n, me, t, 0);
      for (int i = 0; i < M; i++) {
        size_t len = 1 + (size_t)((i + t) % (int)CSLOT);
        c.fifo.push(mscclppData, base + (size_t)i * CSLOT, recvBytes + (size_t)i * CSLOT, len);
      }
      /* phase 1: direct host puts from all threads at once */
      base = conc_region(n, me, t, 1);
      for (int i = 0; i < M; i++) {
        size_t len = 1 + (size_t)((i + 3 * t) % (int)CSLOT);
        c.put(base + (size_t)i * CSLOT, recvBytes + (size_t)i * CSLOT, len);
      }
    });
  for (auto& x : th) x.join();
  double tPush = su_now() - t0;
  for (int p : peers) {
    mscclppDevConn_t& c = *conn[p];
    c.epochIncrement();
    uint64_t h = c.fifo.push(mscclppFlag | mscclppSync, 0, 0, 1);
    c.fifo.sync(h);
  }
  /* receivers: every rank that has me among its peers */
  std::vector<int> senders;
  for (int s = 0; s < n; s++) {
    if (s == me) continue;
    for (int k = 1; k < n && k <= 2; k++)
      if ((s + k) % n == me) senders.push_back(s);
  }
  for (int s : senders) su_wait(conn[s], 30000, "concurrent final signal");
  std::vector<uint8_t> src(srcBytes);
  for (int s : senders) {
    su_fill(src.data(), srcBytes, su_seed(99, s, 0));
    /* which threads of s wrote to me: those with peers_s[t % 2] == me */
    std::vector<int> peersS;
    for (int k = 1; k < n && (int)peersS.size() < 2; k++) peersS.push_back((s + k) % n);
    for (int t = 0; t < T; t++) {
      bool mine = peersS[t % peersS.size()] == me;
      for (int ph = 0; ph < 2; ph++) {
        const uint8_t* r = (const uint8_t*)buf + conc_region(n, s, t, ph);
        size_t wrong = 0, first = 0;
        for (int i = 0; i < M; i++) {
          size_t len = mine ? 1 + (size_t)((i + (ph ? 3 * t : t)) % (int)CSLOT) : 0;
          for (size_t b = 0; b < CSLOT; b++) {
            uint8_t w = b < len ? src[(size_t)i * CSLOT + b] : 0xEE;
            if (r[(size_t)i * CSLOT + b] != w) {
              if (!wrong) first = (size_t)i * CSLOT + b;
              wrong++;
            }
          }
        }
        SU_CHECK(wrong == 0, "from rank %d thread %d phase %s: %zu bytes wrong, first at %zu (trigger %zu)", s, t,
                 ph ? "direct" : "fifo", wrong, first, first / CSLOT);
      }
    }
  }
  printf("fifo concurrent rank %d: %d threads x %d FIFO pushes + %d direct puts in %.3f s\n", me, T, M, M, tPush);
  finish_comm();
  return su_finish();
}

/* ---------------- order ---------------- */

static int run_order()
{
  int n = su_nranks, me = su_rank;
  SU_REQUIRE(n == 2, "needs 2 ranks");
  int peer = 1 - me;
  const int NT = 64;                 /* triggers per phase */
  const size_t TS = 256 * 1024;      /* bytes per trigger */
  size_t area = (size_t)NT * TS;     /* 16 MiB */
  su_comm_init();
  alloc_buf(3 * area); /* [0,area): receive (a), [area,2area): receive (b), [2area,3area): source */
  SU_CK(mscclppConnect(su_comm, peer, 0, buf, bufBytes, su_transport(), su_ibdev()));
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  mscclppDevConn_t* cp = nullptr;
  SU_CK(mscclppGetDeviceConnection(su_comm, peer, 0, &cp));
  mscclppDevConn_t& c = *cp;
  char* src = buf + 2 * area;

  /* (a) flush() must cover the triggers pushed before it */
  if (me == 0) {
    su_fill(src, area, su_seed(5, 0, 0));
    for (int i = 0; i < NT; i++) c.fifo.push(mscclppData, (size_t)i * TS, 2 * area + (size_t)i * TS, TS);
    c.flush();
    memset(src, 0x5A, area); /* allowed once flush() returned */
    c.epochIncrement();
    uint64_t h = c.fifo.push(mscclppFlag | mscclppSync, 0, 0, 1);
    c.fifo.sync(h);
  } else {
    su_wait(&c, 30000, "order (a)");
    size_t bad = su_verify(buf, area, su_seed(5, 0, 0), "(a) data pushed through the FIFO before flush(), source "
                                                        "overwritten after flush() returned");
    if (bad) printf("fifo order rank 1: flush() returned before the FIFO triggers pushed earlier were served\n");
  }
  SU_CK(mscclppBootstrapBarrier(su_comm));

  /* (b) the host signal() must not overtake the triggers pushed before it */
  if (me == 0) {
    su_fill(src, area, su_seed(6, 0, 0));
    uint64_t h = 0;
    for (int i = 0; i < NT; i++) h = c.fifo.push(mscclppData, area + (size_t)i * TS, 2 * area + (size_t)i * TS, TS);
    c.signal();
    c.fifo.sync(h); /* keep the source alive until served */
  } else {
    su_wait(&c, 30000, "order (b)");
    size_t bad = su_verify(buf + area, area, su_seed(6, 0, 0), "(b) data pushed through the FIFO before the host "
                                                              "signal(), read as soon as wait() returned");
    if (bad) printf("fifo order rank 1: the host signal() arrived before the FIFO triggers pushed earlier were served\n");
  }
  SU_CK(mscclppBootstrapBarrier(su_comm));
  finish_comm();
  return su_finish();
}

/* ---------------- flagorder ---------------- */

/* A Flag served by the proxy must not announce signals whose triggers are still
 * queued behind it: two putWithSignal-style triggers (8 B, then 16 MiB) are
 * queued before the proxy runs; when the receiver's first wait returns, an
 * epoch of 2 would claim the big put, which the proxy is still copying. 16 MiB
 * takes the copy long enough that the receiver's check, reading from the
 * start, outruns it (a proxy that signals before it copies fails the case). */
static int run_flagorder()
{
  int n = su_nranks, me = su_rank;
  SU_REQUIRE(n == 2, "needs 2 ranks");
  int peer = 1 - me;
  const size_t BIG = 16u << 20, SRC = BIG + 64;
  su_comm_init();
  alloc_buf(SRC + BIG); /* [0,BIG): big receive, [BIG,BIG+8): small receive, [SRC,SRC+BIG): source */
  SU_CK(mscclppConnect(su_comm, peer, 0, buf, bufBytes, su_transport(), su_ibdev()));
  SU_CK(mscclppConnectionSetup(su_comm));
  mscclppDevConn_t* cp = nullptr;
  SU_CK(mscclppGetDeviceConnection(su_comm, peer, 0, &cp));
  mscclppDevConn_t& c = *cp;
  if (me == 0) {
    su_fill(buf + SRC, BIG, su_seed(9, 0, 0));
    c.epochIncrement();
    c.fifo.push(mscclppData | mscclppFlag, BIG, SRC, 8);
    c.epochIncrement();
    c.fifo.push(mscclppData | mscclppFlag, 0, SRC, BIG);
    SU_CK(mscclppProxyLaunch(su_comm));
    c.flush();
  } else {
    SU_CK(mscclppProxyLaunch(su_comm));
    su_wait(&c, 30000, "the first (8-byte) signal");
    uint64_t seen = *(volatile uint64_t*)&c.localSignalEpochId->proxy;
    if (seen >= 2) {
      size_t bad = su_verify(buf, BIG, su_seed(9, 0, 0), "big put announced by an epoch of 2");
      SU_CHECK(bad == 0, "the epoch said 2 signals were done right after the first wait, but the second put's data "
                         "was not there (%zu bytes wrong)", bad);
    }
    printf("fifo flagorder rank 1: epoch %llu right after the first wait\n", (unsigned long long)seen);
    SU_CHECK(su_verify(buf + BIG, 8, su_seed(9, 0, 0), "8-byte put") == 0, "the first put's data is wrong");
    su_wait(&c, 30000, "the second (big) signal");
    SU_CHECK(su_verify(buf, BIG, su_seed(9, 0, 0), "big put") == 0, "the second put's data is wrong");
  }
  SU_CK(mscclppBootstrapBarrier(su_comm));
  finish_comm();
  return su_finish();
}

int main(int argc, char** argv)
{
  std::string mode = argc > 1 ? argv[1] : "";
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--malloc")) useMalloc = true;
  static std::string name = "fifo " + mode;
  su_init(name.c_str());
  if (mode == "wrap") return run_wrap();
  if (mode == "concurrent") return run_concurrent();
  if (mode == "order") return run_order();
  if (mode == "flagorder") return run_flagorder();
  printf("usage: fifo wrap|concurrent|order [--malloc]\n");
  return 2;
}
