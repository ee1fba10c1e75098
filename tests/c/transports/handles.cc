/*
 * handles.cc: several registered buffers per connection.
 *
 * Every rank connects to every other rank twice:
 *   tag 0: mscclppConnect with B1 (mscclppHostAlloc) as handle 1, then
 *          mscclppRegisterBufferForConnection of B2 (mscclppHostAlloc) -> handle 2
 *          and B3 (malloc) -> handle 3;
 *   tag 1: mscclppConnectWithoutBuffer, then B4 (malloc) -> handle 1.
 * Each buffer has one region of R bytes per source rank, where that rank's
 * puts land, and a source region at nranks*R. Every rank puts, at odd
 * non-zero offsets, h3->h2, h2->h3, h1->h1 (the C++ put method), h1->h3 and,
 * on the tag-1 connection, h1->h1; signals; waits for every peer; and checks
 * each of its buffers byte for byte against the image it expects (canary
 * where nobody wrote). Two rounds with different data.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <vector>

static const size_t R = 8192;

struct Op
{
  int conn; /* 0: tag 0, 1: tag 1 */
  uint32_t dstH, srcH;
  size_t dstOff; /* within the source rank's region */
  size_t srcOff; /* within the source region */
  size_t size;
};

static std::vector<Op> ops(int s)
{
  return {
    {0, 2, 3, 7, 13, 1000 + (size_t)s},
    {0, 3, 2, 3, 5, 2000},
    {0, 1, 1, 11, 1, 777},
    {0, 3, 1, 2500, 2000, 999},
    {1, 1, 1, 1, 3, R - 3},
  };
}

static uint64_t srcSeed(int round, int rank, uint32_t buffer) { return su_seed(1000 + round, rank, buffer); }

int main()
{
  su_init("handles");
  int n = su_nranks, me = su_rank;
  size_t S = (size_t)(n + 1) * R;
  su_comm_init();
  char* B[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  SU_CK(mscclppHostAlloc((void**)&B[1], S));
  SU_CK(mscclppHostAlloc((void**)&B[2], S));
  B[3] = (char*)malloc(S);
  B[4] = (char*)malloc(S);
  for (int b = 1; b <= 4; b++) memset(B[b], 0xEE, S);

  /* connection index -> (peer, tag) in Connect order */
  std::vector<int> idx0(n, -1), idx1(n, -1);
  int next = 0;
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    SU_CK(mscclppConnect(su_comm, p, 0, B[1], S, su_transport(), su_ibdev()));
    idx0[p] = next++;
    SU_CK(mscclppConnectWithoutBuffer(su_comm, p, 1, su_transport(), su_ibdev()));
    idx1[p] = next++;
  }
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    mscclppBufferHandle_t h = 0;
    SU_CK(mscclppRegisterBufferForConnection(su_comm, idx0[p], B[2], S, &h));
    SU_CHECK(h == 2, "second buffer of connection %d got handle %u, want 2", idx0[p], h);
    SU_CK(mscclppRegisterBufferForConnection(su_comm, idx0[p], B[3], S, &h));
    SU_CHECK(h == 3, "third buffer of connection %d got handle %u, want 3", idx0[p], h);
    SU_CK(mscclppRegisterBufferForConnection(su_comm, idx1[p], B[4], S, &h));
    SU_CHECK(h == 1, "first buffer of buffer-less connection %d got handle %u, want 1", idx1[p], h);
  }
  SU_CK(mscclppConnectionSetup(su_comm));
  mscclppDevConn_t* all = nullptr;
  int nConns = 0;
  SU_CK(mscclppGetAllDeviceConnections(su_comm, &all, &nConns));
  SU_REQUIRE(nConns == 2 * (n - 1), "%d connections", nConns);
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    mscclppDevConn_t& c0 = all[idx0[p]];
    mscclppDevConn_t& c1 = all[idx1[p]];
    SU_CHECK(c0.remoteRank == p && c0.tag == 0 && c1.remoteRank == p && c1.tag == 1, "identity of peer %d", p);
    SU_CHECK(c0.localBuff == B[1], "tag 0 localBuff %p want %p", c0.localBuff, (void*)B[1]);
    SU_CHECK(!su_transport_maps() || c0.remoteBuff != nullptr, "tag 0: remoteBuff NULL for a mscclppHostAlloc'd buffer");
    SU_CHECK(c1.remoteBuff == nullptr, "tag 1: remoteBuff %p for a malloc'd buffer", c1.remoteBuff);
  }
  SU_CK(mscclppProxyLaunch(su_comm));

  for (int round = 0; round < 2; round++) {
    for (uint32_t b = 1; b <= 4; b++) su_fill(B[b] + (size_t)n * R, R, srcSeed(round, me, b));
    SU_CK(mscclppBootstrapBarrier(su_comm));
    for (int k = 1; k < n; k++) {
      int p = (me + k) % n;
      for (const Op& o : ops(me)) {
        mscclppDevConn_t& c = all[o.conn ? idx1[p] : idx0[p]];
        uint64_t dst = (uint64_t)me * R + o.dstOff, src = (uint64_t)n * R + o.srcOff;
        if (o.conn == 0 && o.dstH == 1 && o.srcH == 1)
          c.put(dst, src, o.size); /* the C++ method: handle 1 to handle 1 */
        else
          SU_CK(mscclppConnPutHandle(&c, o.dstH, dst, o.srcH, src, o.size));
      }
      all[idx0[p]].signal();
      SU_CK(mscclppDevConnSignal(&all[idx1[p]]));
    }
    for (int k = 1; k < n; k++) {
      int p = (me + n - k) % n;
      su_wait(&all[idx0[p]], 30000, "signal on tag 0");
      su_wait(&all[idx1[p]], 30000, "signal on tag 1");
    }
    /* the images: canary everywhere, my source regions, each peer's puts */
    std::vector<std::vector<uint8_t>> want(5, std::vector<uint8_t>(S, 0xEE));
    for (uint32_t b = 1; b <= 4; b++) su_fill(want[b].data() + (size_t)n * R, R, srcSeed(round, me, b));
    for (int s = 0; s < n; s++) {
      if (s == me) continue;
      for (const Op& o : ops(s)) {
        uint32_t dstBuf = o.conn ? 4 : o.dstH, srcBuf = o.conn ? 4 : o.srcH;
        std::vector<uint8_t> src(R);
        su_fill(src.data(), R, srcSeed(round, s, srcBuf));
        memcpy(want[dstBuf].data() + (size_t)s * R + o.dstOff, src.data() + o.srcOff, o.size);
      }
    }
    for (int b = 1; b <= 4; b++) {
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < S; i++)
        if ((uint8_t)B[b][i] != want[b][i]) {
          if (!wrong) first = i;
          wrong++;
        }
      SU_CHECK(wrong == 0, "round %d buffer B%d: %zu bytes wrong, first at %zu (region of rank %zu, offset %zu): "
               "0x%02x, want 0x%02x", round, b, wrong, first, first / R, first % R, (uint8_t)B[b][first],
               want[b][first]);
    }
    if (su_failures) su_exit_fail();
    SU_CK(mscclppBootstrapBarrier(su_comm));
    for (int b = 1; b <= 4; b++) memset(B[b], 0xEE, S);
  }

  mscclppResult_t async = mscclppSuccess;
  SU_CK(mscclppCommGetAsyncError(su_comm, &async));
  SU_CHECK(async == mscclppSuccess, "async error %s: %s", mscclppGetErrorString(async), su_lasterr(su_comm));
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  su_comm = nullptr;
  SU_CK(mscclppHostFree(B[1]));
  SU_CK(mscclppHostFree(B[2]));
  free(B[3]);
  free(B[4]);
  return su_finish();
}
