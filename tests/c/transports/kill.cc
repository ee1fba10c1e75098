/*
 * kill.cc: a peer killed mid-transfer (run with the launcher's
 * --expect-fail VICTIM).
 *
 *   kill VICTIM timeout|wait [--malloc]
 *
 * Every rank connects to every other. After 20 good allgather rounds the
 * victim pushes a stream of 4 MiB triggers to every peer and, with those
 * still in flight, SIGKILLs itself. Every survivor waits for the victim's
 * next signal, with mscclppDevConnWaitTimeout(10 s) ("timeout") or the C++
 * wait() ("wait"): it must come back with mscclppRemoteError (timeout) or
 * without the signal (wait), well before 10 s; the async error must be
 * mscclppRemoteError with a message naming the victim; a second wait must
 * also return at once. mscclppProxyStop (a barrier with a dead rank) and
 * mscclppCommDestroy must return in bounded time, and afterwards no
 * /dev/shm/mscclpp.* file of this job may remain.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <string>
#include <vector>

int main(int argc, char** argv)
{
  su_init("kill");
  if (argc < 3) {
    printf("usage: kill VICTIM timeout|wait [--malloc]\n");
    return 2;
  }
  int victim = atoi(argv[1]);
  std::string how = argv[2];
  bool useMalloc = argc > 3 && !strcmp(argv[3], "--malloc");
  int n = su_nranks, me = su_rank;
  SU_REQUIRE(n >= 2 && victim >= 0 && victim < n, "victim %d of %d", victim, n);
  su_shm_list before;
  su_shm_list_now(&before);
  SU_CK(mscclppSetBootstrapConnTimeout(5));
  su_comm_init();
  std::vector<int> pids(n, 0);
  pids[me] = (int)getpid();
  SU_CK(mscclppBootstrapAllGather(su_comm, pids.data(), sizeof(int)));

  const size_t chunk = 4096, big = 4 << 20;
  size_t S = 2 * (size_t)n * chunk + big;
  char* buf = nullptr;
  if (useMalloc) {
    buf = (char*)malloc(S);
    SU_REQUIRE(buf != nullptr, "malloc");
  } else {
    SU_CK(mscclppHostAlloc((void**)&buf, S));
  }
  memset(buf, 0, S);
  for (int p = 0; p < n; p++)
    if (p != me) SU_CK(mscclppConnect(su_comm, p, 0, buf, S, su_transport(), su_ibdev()));
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  std::vector<mscclppDevConn_t*> conn(n, nullptr);
  for (int p = 0; p < n; p++)
    if (p != me) SU_CK(mscclppGetDeviceConnection(su_comm, p, 0, &conn[p]));

  /* good rounds first */
  for (int it = 0; it < 20; it++) {
    size_t base = (size_t)(it & 1) * n * chunk + (size_t)me * chunk;
    su_fill(buf + base, chunk, su_seed(it, me, 9));
    for (int k = 1; k < n; k++) conn[(me + k) % n]->putWithSignal(base, base, chunk);
    for (int k = 1; k < n; k++) su_wait(conn[(me + n - k) % n], 30000, "good rounds");
    for (int p = 0; p < n; p++) {
      size_t b = (size_t)(it & 1) * n * chunk + (size_t)p * chunk;
      su_verify(buf + b, chunk, su_seed(it, p, 9), "good round");
    }
  }
  if (su_failures) su_exit_fail();
  /* nobody may still be in the good rounds when the victim dies */
  SU_CK(mscclppBootstrapBarrier(su_comm));

  if (me == victim) {
    for (int k = 1; k < n; k++)
      for (int i = 0; i < 8; i++) conn[(me + k) % n]->fifo.push(mscclppData, 2 * n * chunk, 2 * n * chunk, big);
    kill(getpid(), SIGKILL);
    su_sleep_ms(10000);
    printf("kill rank %d: still alive after SIGKILL\n", me);
    return 3;
  }

  mscclppDevConn_t* c = conn[victim];
  double t0 = su_now();
  if (how == "timeout") {
    mscclppResult_t r = mscclppDevConnWaitTimeout(c, 10000);
    double dt = su_now() - t0;
    printf("kill rank %d: mscclppDevConnWaitTimeout on the dead rank %d returned %s after %.0f ms\n", me, victim,
           mscclppGetErrorString(r), dt * 1e3);
    SU_CHECK(r == mscclppRemoteError, "wait on a dead peer returned %s, want remote error", mscclppGetErrorString(r));
    SU_CHECK(dt < 3.0, "it took %.3f s to notice the dead peer", dt);
  } else {
    c->wait();
    double dt = su_now() - t0;
    printf("kill rank %d: wait() on the dead rank %d returned after %.0f ms\n", me, victim, dt * 1e3);
    SU_CHECK(c->localSignalEpochId->proxy < *c->waitEpochId, "the dead peer's signal arrived?");
    SU_CHECK(dt < 3.0, "it took %.3f s to notice the dead peer", dt);
  }
  mscclppResult_t a = mscclppSuccess;
  SU_CK(mscclppCommGetAsyncError(su_comm, &a));
  const char* msg = su_lasterr(su_comm);
  printf("kill rank %d: async error %s: \"%s\"\n", me, mscclppGetErrorString(a), msg);
  SU_CHECK(a == mscclppRemoteError, "async error %s, want remote error", mscclppGetErrorString(a));
  std::string want = "rank " + std::to_string(victim);
  SU_CHECK(strstr(msg, want.c_str()) != nullptr, "the message does not name %s: \"%s\"", want.c_str(), msg);
  /* a second wait returns at once too */
  t0 = su_now();
  mscclppResult_t r = mscclppDevConnWaitTimeout(c, 10000);
  SU_CHECK(r == mscclppRemoteError && su_now() - t0 < 1.0, "second wait: %s after %.3f s",
           mscclppGetErrorString(r), su_now() - t0);

  /* teardown with a dead rank: bounded */
  t0 = su_now();
  r = mscclppProxyStop(su_comm);
  double tStop = su_now() - t0;
  printf("kill rank %d: mscclppProxyStop with a dead rank: %s after %.3f s (\"%s\")\n", me, mscclppGetErrorString(r),
         tStop, r == mscclppSuccess ? "" : su_lasterr(su_comm));
  SU_CHECK(tStop < 8.0, "mscclppProxyStop took %.3f s", tStop);
  t0 = su_now();
  r = mscclppCommDestroy(su_comm);
  double tDestroy = su_now() - t0;
  su_comm = nullptr;
  printf("kill rank %d: mscclppCommDestroy: %s after %.3f s\n", me, mscclppGetErrorString(r), tDestroy);
  SU_CHECK(tDestroy < 8.0, "mscclppCommDestroy took %.3f s", tDestroy);
  if (useMalloc)
    free(buf);
  else
    SU_CK(mscclppHostFree(buf));
  int left = su_shm_leftovers(&before, pids.data(), n);
  SU_CHECK(left == 0, "%d /dev/shm/mscclpp.* file(s) of this job left after destroy", left);
  return su_finish();
}
