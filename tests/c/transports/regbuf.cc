/*
 * regbuf.cc: mscclppRegisterBuffer + mscclppRegisteredBufferWrite (C++).
 *
 * Every rank connects to every other, then registers two buffers
 * collectively: A from mscclppHostAlloc and B from malloc, each S bytes in
 * the middle of a canary-filled allocation; after mscclppConnectionSetup, or
 * with `regbuf before` before it (as upstream allows). The ranks take turns:
 * the writer calls mscclppRegisteredBufferWrite with a source, size,
 * srcOffset and dstOffset all its own (odd, non-zero), once through A's
 * registration and once through B's, then signals every connection; every
 * other rank waits for that signal (over Ethernet the bytes are in flight
 * until then) and checks that exactly those bytes arrived. A write past the
 * end of the peers' buffers must fail with mscclppInvalidArgument, with a
 * message, and write nothing. At the end every byte of both allocations is
 * checked against the expected image.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <vector>

static const size_t S = 64 * 1024, GUARD = 4096, SRC = 16 * 1024;

static size_t wSize(int w, int which) { return 1000 + 13 * (size_t)w + 7 * (size_t)which; }
static uint32_t wSrcOff(int w, int which) { return 37 + 3 * (uint32_t)w + (uint32_t)which; }
static uint32_t wDstOff(int w, int which) { return (uint32_t)w * 4096 + 5 + 2 * (uint32_t)which; }
static uint64_t wSeed(int w, int which) { return su_seed(31, w, which); }

int main(int argc, char** argv)
{
  su_init("regbuf");
  bool before = argc > 1 && strcmp(argv[1], "before") == 0;
  int n = su_nranks, me = su_rank;
  SU_REQUIRE(n >= 2 && (size_t)n * 4096 + 4096 <= S, "nranks %d", n);
  su_comm_init();
  char* connBuf = nullptr;
  SU_CK(mscclppHostAlloc((void**)&connBuf, 4096));
  for (int p = 0; p < n; p++)
    if (p != me) SU_CK(mscclppConnect(su_comm, p, 0, connBuf, 4096, su_transport(), su_ibdev()));
  if (!before) SU_CK(mscclppConnectionSetup(su_comm));

  char* alloc[2] = {nullptr, nullptr};
  SU_CK(mscclppHostAlloc((void**)&alloc[0], S + 2 * GUARD));
  alloc[1] = (char*)malloc(S + 2 * GUARD);
  SU_REQUIRE(alloc[1] != nullptr, "malloc");
  mscclppRegisteredMemory reg[2];
  for (int i = 0; i < 2; i++) {
    memset(alloc[i], 0xEE, S + 2 * GUARD);
    SU_CK(mscclppRegisterBuffer(su_comm, alloc[i] + GUARD, S, &reg[i]));
    SU_CHECK(reg[i].p2p.size() == (size_t)(n - 1), "registration %d has %zu entries for %d connections", i,
             reg[i].p2p.size(), n - 1);
    for (size_t k = 0; k < reg[i].p2p.size(); k++) {
      if (i == 0 && su_transport_maps())
        SU_CHECK(reg[i].p2p[k].remoteBuff != nullptr, "HostAlloc registration: entry %zu remoteBuff NULL", k);
      else if (i == 1 || !su_transport_maps())
        SU_CHECK(reg[i].p2p[k].remoteBuff == nullptr, "malloc registration: entry %zu remoteBuff %p", k,
                 reg[i].p2p[k].remoteBuff);
    }
  }
  if (before) SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  mscclppDevConn_t* conns = nullptr;
  int nc = 0;
  SU_CK(mscclppGetAllDeviceConnections(su_comm, &conns, &nc));

  std::vector<char> src(SRC);
  for (int w = 0; w < n; w++) {
    if (me == w) {
      for (int i = 0; i < 2; i++) {
        su_fill(src.data(), SRC, wSeed(w, i));
        SU_CK(mscclppRegisteredBufferWrite(su_comm, &reg[i], src.data(), wSize(w, i), wSrcOff(w, i), wDstOff(w, i), 0));
      }
      if (w == 0) {
        /* past the end: nothing may be written anywhere */
        su_fill(src.data(), SRC, su_seed(666, 0, 0));
        for (int i = 0; i < 2; i++) {
          mscclppResult_t r = mscclppRegisteredBufferWrite(su_comm, &reg[i], src.data(), 100, 0, (uint32_t)(S - 50), 0);
          SU_CHECK(r == mscclppInvalidArgument, "write of 100 bytes at %zu of %zu: %s", S - 50, S,
                   mscclppGetErrorString(r));
          const char* msg = su_lasterr(su_comm);
          SU_CHECK(msg[0] != '\0', "no message for the rejected write");
          if (i == 0) printf("regbuf rank 0: out-of-range write -> %s: \"%s\"\n", mscclppGetErrorString(r), msg);
          r = mscclppRegisteredBufferWrite(su_comm, &reg[i], src.data(), 1, 0, (uint32_t)S, 0);
          SU_CHECK(r == mscclppInvalidArgument, "write of 1 byte at %zu of %zu: %s", S, S, mscclppGetErrorString(r));
        }
      }
      for (int k = 0; k < nc; k++) conns[k].signal(); /* after the writes on every connection */
    }
    SU_CK(mscclppBootstrapBarrier(su_comm));
    if (me != w) {
      for (int k = 0; k < nc; k++)
        if (conns[k].remoteRank == w) su_wait(&conns[k], 20000, "the writer's signal");
      for (int i = 0; i < 2; i++) {
        std::vector<char> s(SRC);
        su_fill(s.data(), SRC, wSeed(w, i));
        char* got = alloc[i] + GUARD + wDstOff(w, i);
        SU_CHECK(memcmp(got, s.data() + wSrcOff(w, i), wSize(w, i)) == 0,
                 "writer %d, %s registration: %zu bytes at dstOffset %u (srcOffset %u) differ", w,
                 i ? "malloc" : "HostAlloc", wSize(w, i), wDstOff(w, i), wSrcOff(w, i));
      }
    }
    SU_CK(mscclppBootstrapBarrier(su_comm));
  }
  /* the whole image */
  for (int i = 0; i < 2; i++) {
    std::vector<uint8_t> want(S + 2 * GUARD, 0xEE);
    for (int w = 0; w < n; w++) {
      if (w == me) continue;
      std::vector<char> s(SRC);
      su_fill(s.data(), SRC, wSeed(w, i));
      memcpy(want.data() + GUARD + wDstOff(w, i), s.data() + wSrcOff(w, i), wSize(w, i));
    }
    size_t wrong = 0, first = 0;
    for (size_t k = 0; k < want.size(); k++)
      if ((uint8_t)alloc[i][k] != want[k]) {
        if (!wrong) first = k;
        wrong++;
      }
    SU_CHECK(wrong == 0, "%s allocation: %zu bytes wrong, first at %zd of the registered buffer", i ? "malloc" : "HostAlloc",
             wrong, (ssize_t)first - (ssize_t)GUARD);
  }

  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  su_comm = nullptr;
  SU_CK(mscclppHostFree(alloc[0]));
  free(alloc[1]);
  SU_CK(mscclppHostFree(connBuf));
  return su_finish();
}
