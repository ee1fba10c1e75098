/*
 * destroy.cc: mscclppCommDestroy is local: it waits for no peer (2 ranks).
 *
 *   destroy busy     rank 1 stays alive but busy (it sits in a barrier of a
 *                    control communicator) while rank 0 queues 64 MiB of puts
 *                    to it through its proxy and destroys at once;
 *   destroy stopped  rank 1 SIGSTOPs itself (a peer that reads nothing, as
 *                    after a link loss) while rank 0 queues the same puts and
 *                    destroys; rank 0 then continues rank 1.
 *   destroy proxystop the same stopped peer, but rank 0 first waits until
 *                    its communicator reports the peer unreachable (a
 *                    remote error, after the bootstrap timeout), then calls
 *                    mscclppProxyStop: it must return that error within
 *                    the same bound, with no barrier or fence waiting for
 *                    the stopped peer (Ethernet and IB only: nothing tells a
 *                    stopped SHM peer from a slow one).
 *   destroy goodbye  rank 0's put past the end of rank 1's buffer is refused
 *                    (an asynchronous error of its communicator); then rank 1
 *                    destroys, and rank 0's wait on it ends with
 *                    mscclppRemoteError. Rank 0's last error must not be
 *                    rank 1's goodbye: a peer's orderly exit does not replace
 *                    the text of a communicator's failure (a survivor reading
 *                    why its call failed found another rank's destroy there).
 *
 * Rank 0's destroy must return within DESTROY_BOUND_S (the case runs with a
 * 5 s bootstrap timeout: a destroy that waited for the peer's fence, or for a
 * send to a stopped peer to time out, took at least that). Rank 1 then finds
 * its connection ended: a put succeeds or fails with mscclppRemoteError, a
 * wait ends with mscclppRemoteError (over SHM and IB, which have no stream
 * that ends, it may also reach its deadline, 1 s: mscclppInProgress), never
 * a crash; its own destroy is bounded the same way.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <signal.h>
#include <string>

static const int NT = 16;
static const size_t TS = 4u << 20; /* bytes per trigger: 64 MiB in all */
static const size_t AREA = (size_t)NT * TS;
/* Generous against a loaded machine (the destroy itself takes milliseconds, up to 0.6 s beside
 * other suites on 2 CPUs); half the 5 s of a destroy that waits for the peer. */
static const double DESTROY_BOUND_S = 2.5;

static std::string addr_plus(int k)
{
  std::string a = su_addr;
  size_t colon = a.rfind(':');
  int port = atoi(a.c_str() + colon + 1);
  return a.substr(0, colon + 1) + std::to_string(port + k);
}

/* Whether process pid is stopped (state T in /proc/pid/stat). */
static bool stopped(int pid)
{
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == nullptr) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* p = strrchr(buf, ')');
  return p != nullptr && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

/* The end of every case, once each rank destroyed its communicator: the buffers freed after both
 * did, the control communicator destroyed, the verdict. */
static int finish(mscclppComm_t ctl, char* buf)
{
  SU_CK(mscclppBootstrapBarrier(ctl)); /* nobody frees its buffer before both destroyed */
  free(buf);
  SU_CK(mscclppCommDestroy(ctl));
  return su_finish();
}

/* destroy goodbye (see the top): after rank 0's refused put, rank 1 destroys; rank 0's wait on it
 * ends, and its last error is still the put's refusal, not the goodbye. */
static int goodbye(mscclppComm_t ctl, mscclppDevConn_t* conn, char* buf, size_t S)
{
  if (su_rank == 0) {
    mscclppResult_t r = mscclppDevConnPutWithSignal(conn, S, AREA, 1);
    SU_CHECK(r == mscclppInvalidArgument, "a put at offset %zu of a %zu-byte buffer: %s, want invalid argument", S, S,
             mscclppGetErrorString(r));
    mscclppResult_t a = mscclppSuccess;
    SU_CK(mscclppCommGetAsyncError(su_comm, &a));
    SU_CHECK(a != mscclppSuccess, "the refused put recorded no asynchronous error");
  }
  SU_CK(mscclppBootstrapBarrier(ctl)); /* rank 0's put was refused */
  if (su_rank == 1) {
    SU_CK(mscclppCommDestroy(su_comm));
    su_comm = nullptr;
  }
  SU_CK(mscclppBootstrapBarrier(ctl)); /* rank 1 said goodbye */
  if (su_rank == 0) {
    double t0 = su_now();
    mscclppResult_t r = mscclppDevConnWaitTimeout(conn, 10000);
    std::string last = su_lasterr(su_comm);
    printf("destroy goodbye rank 0: the wait on the destroyed rank 1: %s after %.0f ms; last error \"%s\"\n",
           mscclppGetErrorString(r), (su_now() - t0) * 1e3, last.c_str());
    SU_CHECK(r == mscclppRemoteError, "a wait on a destroyed peer: %s, want remote error", mscclppGetErrorString(r));
    SU_CHECK(last.find("destroyed its communicator") == std::string::npos,
             "the last error after a refused put is rank 1's goodbye: \"%s\"", last.c_str());
    SU_CK(mscclppCommDestroy(su_comm));
    su_comm = nullptr;
  }
  return finish(ctl, buf);
}

int main(int argc, char** argv)
{
  su_init("destroy");
  SU_REQUIRE(su_nranks == 2 && argc == 2, "usage: destroy busy|stopped|proxystop|goodbye, 2 ranks");
  bool proxyStop = strcmp(argv[1], "proxystop") == 0;
  bool stop = proxyStop || strcmp(argv[1], "stopped") == 0;
  int me = su_rank, peer = 1 - su_rank;
  mscclppComm_t ctl = nullptr;
  SU_CK(mscclppCommInitRank(&ctl, 2, addr_plus(15).c_str(), me));
  int pids[2] = {0, 0};
  pids[me] = (int)getpid();
  SU_CK(mscclppBootstrapAllGather(ctl, pids, sizeof(int)));

  SU_CK(mscclppCommInitRank(&su_comm, 2, su_addr, me));
  size_t S = 2 * AREA; /* [0, AREA): what the peer puts here; [AREA, 2 AREA): my source */
  char* buf = (char*)malloc(S);
  SU_REQUIRE(buf != nullptr, "malloc");
  memset(buf, 0, S);
  SU_CK(mscclppConnect(su_comm, peer, 0, buf, S, su_transport(), su_ibdev()));
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  mscclppDevConn_t* conn = nullptr;
  SU_CK(mscclppGetDeviceConnection(su_comm, peer, 0, &conn));
  SU_CK(mscclppBootstrapBarrier(ctl));
  if (strcmp(argv[1], "goodbye") == 0) return goodbye(ctl, conn, buf, S);

  if (me == 1) {
    if (stop) raise(SIGSTOP); /* rank 0 continues this process after its destroy */
    /* busy: in a barrier of another communicator until rank 0 destroyed */
    SU_CK(mscclppBootstrapBarrier(ctl));
    char one = 1;
    memcpy(buf + AREA, &one, 1);
    mscclppResult_t r = mscclppDevConnPutWithSignal(conn, 0, AREA, 1);
    SU_CHECK(r == mscclppSuccess || r == mscclppRemoteError, "a put to a destroyed peer: %s (%s)",
             mscclppGetErrorString(r), su_lasterr(su_comm));
    double t0 = su_now();
    r = mscclppDevConnWaitTimeout(conn, 1000);
    bool eth = su_transport() == mscclppTransportEthernet; /* the one with a connection that ends */
    SU_CHECK(r == mscclppRemoteError || (!eth && r == mscclppInProgress),
             "a wait on a destroyed peer: %s after %.0f ms (%s)", mscclppGetErrorString(r), (su_now() - t0) * 1e3,
             su_lasterr(su_comm));
  } else {
    if (stop) {
      double t0 = su_now();
      while (!stopped(pids[1]) && su_now() - t0 < 20) su_sleep_ms(1);
      SU_REQUIRE(stopped(pids[1]), "rank 1 did not stop");
    }
    for (int i = 0; i < NT; i++)
      conn->fifo.push(mscclppData, (size_t)i * TS, AREA + (size_t)i * TS, TS);
    if (proxyStop) {
      mscclppResult_t async = mscclppSuccess;
      double t0 = su_now();
      while (async != mscclppRemoteError && su_now() - t0 < 30) {
        SU_CK(mscclppCommGetAsyncError(su_comm, &async));
        su_sleep_ms(5);
      }
      SU_REQUIRE(async == mscclppRemoteError, "the stopped peer was not reported within 30 s (%s)",
                 su_lasterr(su_comm));
      t0 = su_now();
      mscclppResult_t r = mscclppProxyStop(su_comm);
      double dt = su_now() - t0;
      printf("destroy proxystop rank 0: mscclppProxyStop after the failure took %.3f s: %s\n", dt,
             mscclppGetErrorString(r));
      SU_CHECK(r == mscclppRemoteError, "ProxyStop after a reported failure: %s, want the remote error",
               mscclppGetErrorString(r));
      SU_CHECK(dt <= DESTROY_BOUND_S, "mscclppProxyStop after a reported failure took %.3f s (bound %.1f s)", dt,
               DESTROY_BOUND_S);
    }
  }
  double t0 = su_now();
  SU_CK(mscclppCommDestroy(su_comm));
  double dt = su_now() - t0;
  su_comm = nullptr;
  printf("destroy %s rank %d: mscclppCommDestroy took %.3f s\n", argv[1], me, dt);
  SU_CHECK(dt <= DESTROY_BOUND_S, "mscclppCommDestroy took %.3f s (bound %.1f s): it waited for the peer", dt,
           DESTROY_BOUND_S);
  if (me == 0) {
    if (stop) kill(pids[1], SIGCONT);
    SU_CK(mscclppBootstrapBarrier(ctl)); /* rank 1 goes on */
  }
  return finish(ctl, buf);
}
