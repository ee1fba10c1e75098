/*
 * dropin.cc: call sequences real programs written against upstream 0.1 make,
 * which upstream accepts. The transport is su_transport()
 * (MSCCLPP_TEST_TRANSPORT: SHM by default, p2p, ethernet, ib).
 *
 *   dropin pyseq        upstream's Python bootstrap test: init by ip:port,
 *                       allgather of ints and of bytes, a setup with no
 *                       connections, connect to every peer, register a
 *                       buffer (nranks-1 entries), setup again, proxy launch,
 *                       proxy stop, destroy
 *   dropin incremental  connect to half the peers, setup, use them; connect
 *                       to the rest (and a second tag to every peer) while
 *                       the proxy runs, setup, use all at once; the device
 *                       connection array and a pointer into it keep their
 *                       addresses; a setup with nothing new; relaunch, use all
 *   dropin incremental mixed   the same, the second tag over Ethernet: a
 *                       transport first used while the proxies run is served
 * mscclppRegisterBuffer before setup is `regbuf before` (regbuf.cc).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <vector>

static const size_t CH = 8192; /* bytes each rank puts per connection and round */

/* ---- pyseq ---- */

static int run_pyseq()
{
  int n = su_nranks, me = su_rank;
  su_comm_init();
  std::vector<int> ints(n);
  ints[me] = 1000 + me;
  SU_CK(mscclppBootstrapAllGather(su_comm, ints.data(), sizeof(int)));
  for (int r = 0; r < n; r++) SU_CHECK(ints[r] == 1000 + r, "int allgather slot %d = %d", r, ints[r]);
  std::vector<char> bytes(3 * n);
  for (int k = 0; k < 3; k++) bytes[3 * me + k] = (char)('a' + me + k);
  SU_CK(mscclppBootstrapAllGather(su_comm, bytes.data(), 3));
  for (int r = 0; r < n; r++)
    for (int k = 0; k < 3; k++) SU_CHECK(bytes[3 * r + k] == (char)('a' + r + k), "byte allgather slot %d.%d", r, k);
  SU_CK(mscclppConnectionSetup(su_comm)); /* no connections yet: a barrier */
  char* buf = nullptr;
  SU_CK(mscclppHostAlloc((void**)&buf, CH));
  for (int p = 0; p < n; p++)
    if (p != me) SU_CK(mscclppConnect(su_comm, p, 0, buf, CH, su_transport(), su_ibdev()));
  mscclppRegisteredMemory reg;
  SU_CK(mscclppRegisterBuffer(su_comm, buf, CH, &reg));
  SU_CHECK(reg.p2p.size() == (size_t)(n - 1), "%zu registration entries for %d peers", reg.p2p.size(), n - 1);
  SU_CK(mscclppConnectionSetup(su_comm));
  mscclppDevConn_t* conns = nullptr;
  int nc = 0;
  SU_CK(mscclppGetAllDeviceConnections(su_comm, &conns, &nc));
  SU_CHECK(nc == n - 1, "%d device connections, want %d", nc, n - 1);
  SU_CK(mscclppProxyLaunch(su_comm));
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  su_comm = nullptr;
  SU_CK(mscclppHostFree(buf));
  return su_finish();
}

/* ---- incremental ---- */

struct Link {
  int peer, tag;
  char* buf; /* [0, CH): what I send; [CH, 2 CH): what the peer sends me */
};

static bool mixed = false; /* tag 1 over Ethernet */

static void connect_links(std::vector<Link>& links, bool (*phase)(int me, int peer, int tag), bool second)
{
  for (int tag = 0; tag < 2; tag++)
    for (int p = 0; p < su_nranks; p++) {
      if (p == su_rank || phase(su_rank, p, tag) != second) continue;
      Link l{p, tag, nullptr};
      SU_CK(mscclppHostAlloc((void**)&l.buf, 2 * CH));
      memset(l.buf, 0, 2 * CH);
      mscclppTransport_t t = mixed && tag == 1 ? mscclppTransportEthernet : su_transport();
      SU_CK(mscclppConnect(su_comm, p, tag, l.buf, 2 * CH, t, t == mscclppTransportIB ? su_ibdev() : NULL));
      links.push_back(l);
    }
}

/* The first setup covers tag 0 to the peers of the other parity; the second everything else. */
static bool second_phase(int me, int peer, int tag) { return tag == 1 || (me + peer) % 2 == 0; }

/* One round on every link: put CH bytes with a signal, wait for every peer's, check them. */
static void round_all(const std::vector<Link>& links, mscclppDevConn_t* conns, int round)
{
  for (size_t i = 0; i < links.size(); i++)
    su_fill(links[i].buf, CH, su_seed(su_rank * 131 + links[i].peer, links[i].tag, round));
  for (size_t i = 0; i < links.size(); i++) conns[i].putWithSignal(CH, 0, CH);
  for (size_t i = 0; i < links.size(); i++) su_wait(&conns[i], 20000, "round");
  for (size_t i = 0; i < links.size(); i++) {
    char what[96];
    snprintf(what, sizeof(what), "round %d from rank %d tag %d", round, links[i].peer, links[i].tag);
    su_verify(links[i].buf + CH, CH, su_seed(links[i].peer * 131 + su_rank, links[i].tag, round), what);
  }
  SU_CK(mscclppBootstrapBarrier(su_comm)); /* nobody overwrites a buffer still being checked */
}

static int run_incremental()
{
  su_comm_init();
  std::vector<Link> links;
  connect_links(links, second_phase, false);
  SU_CK(mscclppConnectionSetup(su_comm));
  mscclppDevConn_t *first = nullptr, *again = nullptr, *one = nullptr, *oneAgain = nullptr;
  int n1 = 0, n2 = 0;
  SU_CK(mscclppGetAllDeviceConnections(su_comm, &first, &n1));
  SU_CHECK(n1 == (int)links.size() && n1 > 0, "%d connections after the first setup, want %zu", n1, links.size());
  SU_CK(mscclppGetDeviceConnection(su_comm, links[0].peer, links[0].tag, &one));
  SU_CK(mscclppProxyLaunch(su_comm));
  round_all(links, first, 0);

  connect_links(links, second_phase, true); /* while the proxy runs */
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppGetAllDeviceConnections(su_comm, &again, &n2));
  SU_CHECK(again == first, "the device connection array moved from %p to %p", (void*)first, (void*)again);
  SU_CHECK(n2 == (int)links.size() && n2 == 2 * (su_nranks - 1), "%d connections after the second setup, want %zu",
           n2, links.size());
  SU_CK(mscclppGetDeviceConnection(su_comm, links[0].peer, links[0].tag, &oneAgain));
  SU_CHECK(one == oneAgain && one == &first[0], "connection 0 moved from %p to %p", (void*)one, (void*)oneAgain);
  for (int i = 0; i < n2; i++)
    SU_CHECK(first[i].remoteRank == links[i].peer && first[i].tag == links[i].tag, "entry %d: rank %d tag %d", i,
             first[i].remoteRank, first[i].tag);
  round_all(links, first, 1); /* the new connections served by the running proxy */
  round_all(links, first, 2);

  SU_CK(mscclppConnectionSetup(su_comm)); /* nothing new: a barrier */
  SU_CK(mscclppGetAllDeviceConnections(su_comm, &again, &n2));
  SU_CHECK(again == first && n2 == (int)links.size(), "a setup with nothing new changed the array");
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  round_all(links, first, 3);
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  su_comm = nullptr;
  for (auto& l : links) SU_CK(mscclppHostFree(l.buf));
  return su_finish();
}

int main(int argc, char** argv)
{
  const char* mode = argc > 1 ? argv[1] : "";
  su_init("dropin");
  SU_REQUIRE(su_nranks >= 2, "nranks %d", su_nranks);
  if (strcmp(mode, "pyseq") == 0) return run_pyseq();
  mixed = argc > 2 && strcmp(argv[2], "mixed") == 0;
  if (strcmp(mode, "incremental") == 0) return run_incremental();
  printf("usage: dropin pyseq|incremental\n");
  return 2;
}
