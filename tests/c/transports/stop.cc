/*
 * stop.cc: mscclppProxyStop / mscclppCommDestroy with proxies running and
 * triggers still queued, repeated over several communicators.
 *
 * A control communicator (port +15 of MSCCLPP_TEST_ADDR) lives through the
 * whole test and only provides barriers. Then, for cycle k = 0..CYCLES-1, a
 * fresh communicator at port +k: every rank connects to every other (buffers
 * from mscclppHostAlloc on even cycles, malloc on odd ones), launches the
 * proxies, pushes a backlog of FIFO triggers to every peer without waiting
 * for them, and then
 *   even k: mscclppProxyStop at once (it must drain the backlog), a second
 *           ProxyStop (InvalidUsage), mscclppCommDestroy;
 *   odd k:  mscclppCommDestroy at once, proxies still running (over SHM the
 *           backlog still lands; over Ethernet or IB what is in flight may
 *           be dropped with the peer's registrations, so only the rest is
 *           checked).
 * After a control barrier every rank checks every byte its peers pushed. On
 * every cycle: ProxyLaunch twice is InvalidUsage; no /dev/shm/mscclpp.* file
 * of this job remains after destroy; the number of open file descriptors
 * does not grow from cycle to cycle; and once a cycle's buffers are freed no
 * mapping of any mscclppHostAlloc memory (mine or a peer's) remains.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <string>
#include <vector>

/* Two cycles of each kind: the second of each finds what the first left behind (fds, files,
 * mappings), each kind after the other has run. NT is more than a FIFO holds
 * (MSCCLPP_PROXY_FIFO_SIZE, 128), so the pushes wait for room and the FIFO is full when the
 * stop or destroy comes; TS makes each trigger a copy, so the backlog takes a while to serve. */
static const int CYCLES = 4;
static const int NT = 200;          /* triggers per peer */
static const size_t TS = 16 * 1024; /* bytes per trigger */

static std::string addr_plus(int k)
{
  std::string a = su_addr;
  size_t colon = a.rfind(':');
  int port = atoi(a.c_str() + colon + 1);
  return a.substr(0, colon + 1) + std::to_string(port + k);
}

int main()
{
  su_init("stop");
  int n = su_nranks, me = su_rank;
  su_shm_list before;
  su_shm_list_now(&before);
  mscclppComm_t ctl = nullptr;
  SU_CK(mscclppCommInitRank(&ctl, n, addr_plus(15).c_str(), me));
  std::vector<int> pids(n, 0);
  pids[me] = (int)getpid();
  SU_CK(mscclppBootstrapAllGather(ctl, pids.data(), sizeof(int)));

  size_t area = (size_t)NT * TS;          /* what one peer writes into me */
  size_t S = (size_t)n * area + area;     /* n receive areas (mine unused) + my source */
  int fdsAfterFirst = -1;
  int maps[CYCLES] = {0};
  for (int k = 0; k < CYCLES; k++) {
    bool hostAlloc = k % 2 == 0;
    bool stopFirst = k % 2 == 0;
    SU_CK(mscclppCommInitRank(&su_comm, n, addr_plus(k).c_str(), me));
    char* buf = nullptr;
    if (hostAlloc)
      SU_CK(mscclppHostAlloc((void**)&buf, S));
    else {
      buf = (char*)malloc(S);
      SU_REQUIRE(buf != nullptr, "malloc");
    }
    memset(buf, 0xEE, (size_t)n * area);
    su_fill(buf + (size_t)n * area, area, su_seed(k, me, 77));
    for (int p = 0; p < n; p++)
      if (p != me) SU_CK(mscclppConnect(su_comm, p, 0, buf, S, su_transport(), su_ibdev()));
    SU_CK(mscclppConnectionSetup(su_comm));
    mscclppResult_t r = mscclppProxyStop(su_comm);
    SU_CHECK(r == mscclppInvalidUsage, "ProxyStop before ProxyLaunch: %s", mscclppGetErrorString(r));
    SU_CK(mscclppProxyLaunch(su_comm));
    r = mscclppProxyLaunch(su_comm);
    SU_CHECK(r == mscclppInvalidUsage, "second ProxyLaunch: %s", mscclppGetErrorString(r));
    mscclppDevConn_t* all = nullptr;
    int nc = 0;
    SU_CK(mscclppGetAllDeviceConnections(su_comm, &all, &nc));
    /* the backlog, interleaved over the peers */
    for (int i = 0; i < NT; i++)
      for (int c = 0; c < nc; c++)
        all[c].fifo.push(mscclppData, (size_t)me * area + (size_t)i * TS, (size_t)n * area + (size_t)i * TS, TS);
    /* the triggers still queued to the first peer as the stop or destroy is called */
    unsigned long long backlog = *all[0].fifo.triggerFifoHead - *all[0].fifo.triggerFifoTail;
    double t0 = su_now();
    if (stopFirst) {
      SU_CK(mscclppProxyStop(su_comm));
      double dt = su_now() - t0;
      r = mscclppProxyStop(su_comm);
      SU_CHECK(r == mscclppInvalidUsage, "second ProxyStop: %s", mscclppGetErrorString(r));
      SU_CHECK(*all[0].fifo.triggerFifoTail == *all[0].fifo.triggerFifoHead,
               "after ProxyStop: tail %llu, head %llu (not drained)", (unsigned long long)*all[0].fifo.triggerFifoTail,
               (unsigned long long)*all[0].fifo.triggerFifoHead);
      t0 = su_now();
      SU_CK(mscclppCommDestroy(su_comm));
      if (me == 0)
        printf("stop cycle %d: ProxyStop with a backlog of %llu triggers %.3f s, destroy %.3f s\n", k, backlog, dt,
               su_now() - t0);
    } else {
      SU_CK(mscclppCommDestroy(su_comm));
      if (me == 0)
        printf("stop cycle %d: destroy with running proxies and a backlog of %llu triggers %.3f s\n", k, backlog,
               su_now() - t0);
    }
    su_comm = nullptr;
    SU_CK(mscclppBootstrapBarrier(ctl)); /* every rank's backlog was drained by its stop/destroy */
    /* Over a network transport a destroy without ProxyStop may drop what is still in flight:
     * the peer's registrations go away with its communicator (as upstream's IB did). */
    bool dataKept = (k % 2 == 0) || su_transport() == mscclppTransportSHM;
    for (int p = 0; p < n && dataKept; p++) {
      if (p == me) continue;
      char what[64];
      snprintf(what, sizeof what, "cycle %d: backlog from rank %d", k, p);
      su_verify(buf + (size_t)p * area, area, su_seed(k, p, 77), what);
    }
    SU_CK(mscclppBootstrapBarrier(ctl)); /* nobody frees before all have checked */
    if (hostAlloc)
      SU_CK(mscclppHostFree(buf));
    else
      free(buf);
    SU_CK(mscclppBootstrapBarrier(ctl));
    int left = su_shm_leftovers(&before, pids.data(), n);
    SU_CHECK(left == 0, "cycle %d: %d /dev/shm/mscclpp.* file(s) left after destroy", k, left);
    maps[k] = su_count_maps("mscclpp-hostalloc");
    int fds = su_count_fds();
    if (k == 0)
      fdsAfterFirst = fds;
    else
      SU_CHECK(fds <= fdsAfterFirst, "cycle %d: %d open fds, %d after the first cycle", k, fds, fdsAfterFirst);
    if (me == 0 && k == CYCLES - 1) printf("stop: %d fds open after cycle 0, %d after cycle %d\n", fdsAfterFirst, fds, k);
    if (su_failures) break;
  }
  std::string mapList;
  int anyMaps = 0;
  for (int k = 0; k < CYCLES; k++) {
    mapList += " " + std::to_string(maps[k]);
    anyMaps |= maps[k];
  }
  SU_CHECK(anyMaps == 0, "mappings of mscclppHostAlloc memory left after each cycle's destroy and mscclppHostFree on "
           "every rank:%s (peers' buffers mapped at connection setup are never unmapped)", mapList.c_str());
  SU_CK(mscclppCommDestroy(ctl));
  int left = su_shm_leftovers(&before, pids.data(), n);
  SU_CHECK(left == 0, "%d /dev/shm/mscclpp.* file(s) left at the end", left);
  return su_finish();
}
