/*
 * robust.cc: every wait bounded, misuse an error, destroy safe under calls.
 *
 *   robust hogs        (2 ranks) With 3 CPU-hog threads running on rank 0,
 *                      waits with 30, 100 and 200 ms timeouts for a signal
 *                      that never comes must return InProgress, never before
 *                      the timeout nor past it + 2 s, and within the timeout
 *                      + 50 ms in the best of up to 5 tries (a library that
 *                      misses its deadline under hogs misses it every time;
 *                      the machine's other load stalls only some tries);
 *                      then rank 1 exits and a 10 s wait must come back with
 *                      RemoteError within 500 ms, and later waits at once
 *                      (< 50 ms, best of up to 5). Rank 1 exits on purpose (run with
 *                      the launcher's --expect-fail 1).
 *   robust misuse      (2 ranks) No /dev/shm name of the job is left once
 *                      init returned. NULL and foreign connections and FIFOs give
 *                      error codes and a process-wide message, never a
 *                      crash; a put through handle 0 (the signal slot) is
 *                      refused and the peer's epoch stays put; the
 *                      communicator's last error is the latest one, and a
 *                      data-path error sets the process-wide text too.
 *   robust destroy     (2 ranks) A second thread keeps calling into the
 *                      communicator (rank, size, last error, async error, a
 *                      0 ms wait, a put) while the main thread destroys it:
 *                      every call returns success or InvalidUsage (InProgress
 *                      for the wait), never crashes, and after the destroy
 *                      every call is InvalidUsage.
 *   robust collthreads (2 ranks) Two threads per rank run 300 allgathers at
 *                      once on one communicator: collectives are serialized,
 *                      so every result holds the calling thread's own entry
 *                      and whole entries of the peer.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

static const size_t BUF = 1 << 16;

struct Pair {
  char* buf = nullptr;
  mscclppDevConn_t* conn = nullptr;
};

static Pair connect_peer(bool launch)
{
  Pair p;
  SU_CK(mscclppHostAlloc((void**)&p.buf, BUF));
  memset(p.buf, 0, BUF);
  int peer = 1 - su_rank;
  SU_CK(mscclppConnect(su_comm, peer, 0, p.buf, BUF, mscclppTransportSHM));
  SU_CK(mscclppConnectionSetup(su_comm));
  if (launch) SU_CK(mscclppProxyLaunch(su_comm));
  SU_CK(mscclppGetDeviceConnection(su_comm, peer, 0, &p.conn));
  return p;
}

/* Tries per timed wait in run_hogs: the machine may be loaded by other processes besides the
 * test's own hogs, and a single try can be stalled by them far past any fixed slack. */
static const int HOGS_TRIES = 5;

static int run_hogs()
{
  su_comm_init();
  Pair p = connect_peer(false);
  SU_CK(mscclppBootstrapBarrier(su_comm));
  if (su_rank == 1) {
    /* wait for rank 0 to start its timed waits, then leave without a word */
    SU_CK(mscclppBootstrapBarrier(su_comm));
    printf("hogs rank 1: exiting on purpose\n");
    fflush(stdout);
    _exit(3);
  }
  std::atomic<bool> stop(false);
  std::vector<std::thread> hogs;
  for (int i = 0; i < 3; i++)
    hogs.emplace_back([&] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  const int64_t timeouts[] = {30, 100, 200};
  for (int64_t t : timeouts) {
    /* Each try must return InProgress, no earlier than the timeout and never hang (bounded by
     * t + 2 s). The promise "within t + 50 ms" is judged on the best try: a library that
     * misses its deadline under the hogs misses it on every try, while a try the machine's
     * other load stalls is followed by one that is not (see run_hogs' comment at the top). */
    double best = 1e30;
    for (int attempt = 0; attempt < HOGS_TRIES && best > (double)t + 50.0; attempt++) {
      *p.conn->waitEpochId += 1; /* a signal that never comes */
      double t0 = su_now();
      mscclppResult_t r = mscclppConnWait(p.conn, t);
      double ms = (su_now() - t0) * 1e3;
      *p.conn->waitEpochId -= 1;
      SU_CHECK(r == mscclppInProgress, "a %lld ms wait for nothing returned %s", (long long)t, mscclppGetErrorString(r));
      printf("hogs rank 0: a %lld ms wait took %.1f ms (try %d)\n", (long long)t, ms, attempt + 1);
      SU_CHECK(ms >= (double)t * 0.95 && ms <= (double)t + 2000.0, "a %lld ms wait took %.1f ms", (long long)t, ms);
      if (ms < best) best = ms;
    }
    SU_CHECK(best <= (double)t + 50.0, "a %lld ms wait took %.1f ms at best in %d tries (> timeout + 50 ms each time)",
             (long long)t, best, HOGS_TRIES);
  }
  SU_CK(mscclppBootstrapBarrier(su_comm)); /* rank 1 exits now */
  double t0 = su_now();
  mscclppResult_t r = mscclppDevConnWaitTimeout(p.conn, 10000);
  double ms = (su_now() - t0) * 1e3;
  printf("hogs rank 0: the dead peer was noticed after %.1f ms: %s\n", ms, mscclppGetErrorString(r));
  SU_CHECK(r == mscclppRemoteError, "a wait for a dead peer returned %s", mscclppGetErrorString(r));
  SU_CHECK(ms < 500, "a wait for a dead peer took %.1f ms", ms);
  const char* why = su_lasterr(su_comm);
  SU_CHECK(strstr(why, "rank 1") != NULL && strstr(why, "exited") != NULL, "last error: %s", why);
  /* later waits fail at once (the error is recorded): every one RemoteError, the best of a few < 50 ms */
  double best = 1e30;
  for (int attempt = 0; attempt < HOGS_TRIES && best >= 50.0; attempt++) {
    t0 = su_now();
    r = mscclppDevConnWaitTimeout(p.conn, 10000);
    ms = (su_now() - t0) * 1e3;
    SU_CHECK(r == mscclppRemoteError, "wait %d after the peer died: %s after %.1f ms", attempt + 2, mscclppGetErrorString(r), ms);
    if (ms < best) best = ms;
  }
  SU_CHECK(best < 50, "later waits for a dead peer took %.1f ms at best in %d tries", best, HOGS_TRIES);
  stop = true;
  for (auto& h : hogs) h.join();
  mscclppCommDestroy(su_comm);
  return su_finish();
}

static bool has(const char* s, const char* part) { return s != NULL && strstr(s, part) != NULL; }

static int run_misuse()
{
  su_shm_list shmBefore;
  su_shm_list_now(&shmBefore);
  su_comm_init();
  /* the node segment's name is gone as soon as init returns: nothing to leave behind */
  int pids[2] = {0, 0};
  pids[su_rank] = (int)getpid();
  SU_CK(mscclppBootstrapAllGather(su_comm, pids, sizeof(int)));
  su_shm_list now;
  su_shm_list_now(&now);
  for (int i = 0; i < now.n; i++)
    SU_CHECK(su_shm_has(&shmBefore, now.names[i]) || !su_shm_mentions(now.names[i], pids, 2),
             "/dev/shm/%s of this job is still there after init", now.names[i]);
  Pair p = connect_peer(true);
  /* NULL and foreign objects: a NULL connection is a bad argument (as every NULL), a zeroed or forged one misuse */
  SU_CHECK(mscclppConnOp(NULL, mscclppData, 0, 0, 8) == mscclppInvalidArgument, "ConnOp(NULL)");
  SU_CHECK(has(mscclppGetLastError(NULL), "conn is NULL"), "global: %s", su_lasterr(NULL));
  mscclppDevConn_t zero;
  memset(&zero, 0, sizeof(zero));
  SU_CHECK(mscclppConnOp(&zero, mscclppData, 0, 0, 8) == mscclppInvalidUsage, "ConnOp(zeroed)");
  SU_CHECK(has(mscclppGetLastError(NULL), "not a connection"), "global: %s", su_lasterr(NULL));
  char junk[4096];
  memset(junk, 0x5a, sizeof(junk));
  mscclppDevConn_t forged = *p.conn;
  forged.fifo.triggerFifo = (mscclppTrigger*)(void*)junk;
  forged.fifo.triggerFifoHead = (uint64_t*)(void*)junk;
  forged.fifo.triggerFifoTail = (uint64_t*)(void*)junk;
  SU_CHECK(mscclppConnOp(&forged, mscclppData | mscclppFlag, 0, 0, 8) == mscclppInvalidUsage, "ConnOp(forged)");
  SU_CHECK(mscclppConnWait(&forged, 10) == mscclppInvalidUsage, "ConnWait(forged)");
  SU_CHECK(mscclppFifoPush(NULL, mscclppData, 0, 0, 8) == MSCCLPP_FIFO_PUSH_FAILED, "FifoPush(NULL)");
  SU_CHECK(has(mscclppGetLastError(NULL), "fifo is NULL"), "global: %s", su_lasterr(NULL));
  SU_CHECK(mscclppFifoWaitServed(NULL, 0) == mscclppInvalidUsage, "FifoWaitServed(NULL)");
  SU_CHECK(mscclppFifoPush(&forged.fifo, mscclppData, 0, 0, 8) == MSCCLPP_FIFO_PUSH_FAILED, "FifoPush(forged)");
  SU_CHECK(mscclppFifoWaitServed(&forged.fifo, 0) == mscclppInvalidUsage, "FifoWaitServed(forged)");
  SU_CHECK(mscclppFifoPush(&p.conn->fifo, 0, 0, 0, 8) == MSCCLPP_FIFO_PUSH_FAILED, "FifoPush(type 0)");
  SU_CHECK(mscclppFifoWaitServed(&p.conn->fifo, 1000000) == mscclppInvalidArgument, "FifoWaitServed(future seq)");
  SU_CK(mscclppBootstrapBarrier(su_comm));

  /* handle 0 is the signal slot: a put there must not move the peer's epoch */
  uint64_t before = p.conn->localSignalEpochId->proxy;
  SU_CK(mscclppBootstrapBarrier(su_comm));
  mscclppResult_t r = mscclppConnPutHandle(p.conn, 0, 0, 1, 0, 8);
  SU_CHECK(r == mscclppInvalidArgument, "put to handle 0 returned %s", mscclppGetErrorString(r));
  r = mscclppConnPutHandle(p.conn, 1, 0, 0, 0, 8);
  SU_CHECK(r == mscclppInvalidArgument, "put from handle 0 returned %s", mscclppGetErrorString(r));
  SU_CHECK(has(mscclppGetLastError(NULL), "handle 0 is the signal slot"), "global: %s", su_lasterr(NULL));
  SU_CHECK(has(mscclppGetLastError(su_comm), "handle 0 is the signal slot"), "comm: %s", su_lasterr(su_comm));
  SU_CK(mscclppBootstrapBarrier(su_comm));
  SU_CHECK(p.conn->localSignalEpochId->proxy == before, "my epoch moved from %llu to %llu through a data put",
           (unsigned long long)before, (unsigned long long)p.conn->localSignalEpochId->proxy);

  /* the latest error, not the first */
  r = mscclppConnPutHandle(p.conn, 1, BUF, 1, 0, 8); /* past the end: a data-path error */
  SU_CHECK(r == mscclppInvalidArgument, "put past the end returned %s", mscclppGetErrorString(r));
  SU_CHECK(has(mscclppGetLastError(su_comm), "offset 65536 of remote handle 1"), "comm: %s", su_lasterr(su_comm));
  SU_CHECK(has(mscclppGetLastError(NULL), "offset 65536 of remote handle 1"), "global: %s", su_lasterr(NULL));
  int junkRank = 0;
  r = mscclppConnect(su_comm, 1 - su_rank, p.conn->tag, p.buf, BUF, mscclppTransportSHM); /* after setup: a twin */
  SU_CHECK(r == mscclppInvalidArgument, "a second connection with the same rank and tag returned %s",
           mscclppGetErrorString(r));
  SU_CHECK(has(mscclppGetLastError(su_comm), "already exists"), "comm: %s", su_lasterr(su_comm));
  r = mscclppCommRank(su_comm, NULL);
  SU_CHECK(r != mscclppSuccess && has(mscclppGetLastError(su_comm), "NULL"), "comm: %s", su_lasterr(su_comm));
  SU_CK(mscclppCommRank(su_comm, &junkRank));
  mscclppResult_t async = mscclppSuccess;
  SU_CK(mscclppCommGetAsyncError(su_comm, &async));
  SU_CHECK(async == mscclppInvalidArgument, "async error %d: the first data-path error stays", async);
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  return su_finish();
}

static bool okOr(mscclppResult_t r, mscclppResult_t alt) { return r == mscclppSuccess || r == mscclppInvalidUsage || r == alt; }

static int run_destroy()
{
  for (int round = 0; round < 5; round++) {
    su_comm_init();
    Pair p = connect_peer(true);
    std::atomic<bool> started(false), after(false);
    std::atomic<long> calls(0), bad(0), lateOk(0);
    mscclppComm_t comm = su_comm;
    mscclppDevConn_t* conn = p.conn;
    std::thread t([&] {
      for (;;) {
        bool late = after.load();
        int v = 0;
        mscclppResult_t rs[6];
        rs[0] = mscclppCommRank(comm, &v);
        rs[1] = mscclppCommSize(comm, &v);
        (void)mscclppGetLastError(comm);
        mscclppResult_t ae;
        rs[2] = mscclppCommGetAsyncError(comm, &ae);
        rs[3] = mscclppConnWait(conn, 0);
        rs[4] = mscclppConnPutHandle(conn, 1, 0, 1, 0, 64);
        rs[5] = mscclppBootstrapAllGather(comm, NULL, 0); /* bad argument or gone: never a crash */
        for (int i = 0; i < 5; i++)
          if (!okOr(rs[i], mscclppInProgress)) bad++;
        if (late)
          for (int i = 0; i < 5; i++)
            if (rs[i] != mscclppInvalidUsage) lateOk++;
        calls++;
        started = true;
        if (late) break;
      }
    });
    while (!started.load()) std::this_thread::yield();
    SU_CK(mscclppBootstrapBarrier(su_comm));
    SU_CK(mscclppProxyStop(su_comm));
    SU_CK(mscclppCommDestroy(su_comm));
    after = true;
    t.join();
    SU_CHECK(bad.load() == 0, "round %d: %ld unexpected results in %ld rounds of calls", round, bad.load(), calls.load());
    SU_CHECK(lateOk.load() == 0, "round %d: %ld calls after destroy did not return InvalidUsage", round, lateOk.load());
    SU_CK(mscclppHostFree(p.buf));
    su_comm = NULL;
  }
  return su_finish();
}

static int run_collthreads()
{
  su_comm_init();
  const int ITERS = 300, T = 2;
  std::atomic<long> bad(0);
  std::vector<std::thread> ts;
  for (int t = 0; t < T; t++)
    ts.emplace_back([&, t] {
      for (int i = 0; i < ITERS; i++) {
        uint64_t mine = ((uint64_t)su_rank << 48) | ((uint64_t)t << 32) | (uint64_t)i;
        uint64_t out[2] = {0, 0};
        out[su_rank] = mine;
        if (mscclppBootstrapAllGather(su_comm, out, sizeof(uint64_t)) != mscclppSuccess) {
          bad++;
          continue;
        }
        if (out[su_rank] != mine) bad++;
        int peer = 1 - su_rank;
        if ((out[peer] >> 48) != (uint64_t)peer || ((out[peer] >> 32) & 0xffff) >= (uint64_t)T ||
            (out[peer] & 0xffffffff) >= (uint64_t)ITERS)
          bad++;
      }
    });
  for (auto& t : ts) t.join();
  SU_CHECK(bad.load() == 0, "%ld of %d concurrent allgathers returned foreign or broken data", bad.load(), T * ITERS);
  SU_CK(mscclppCommDestroy(su_comm));
  return su_finish();
}

int main(int argc, char** argv)
{
  su_init("robust");
  if (argc < 2) {
    printf("usage: robust hogs|misuse|destroy|collthreads\n");
    return 2;
  }
  std::string what = argv[1];
  SU_REQUIRE(su_nranks == 2, "needs 2 ranks, got %d", su_nranks);
  if (what == "hogs") return run_hogs();
  if (what == "misuse") return run_misuse();
  if (what == "destroy") return run_destroy();
  if (what == "collthreads") return run_collthreads();
  printf("unknown case %s\n", what.c_str());
  return 2;
}
