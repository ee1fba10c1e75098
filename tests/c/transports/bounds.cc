/*
 * bounds.cc: out-of-range triggers are rejected (2 ranks).
 *
 *   bounds [--malloc]
 *
 * Rank 1 registers S bytes in the middle of a larger allocation filled with a
 * canary. Rank 0, on its connection to rank 1:
 *  1. pushes through the FIFO a Data trigger whose dst offset + size runs past
 *     rank 1's buffer, and one whose src runs past its own: the proxy must
 *     reject both, record mscclppInvalidArgument as the async error with a
 *     message, and go on serving;
 *  2. calls the direct C functions with dst past the end, dst exactly at the
 *     end, a dst offset that wraps around 2^64, src past the end, unknown dst
 *     and src handles: each returns mscclppInvalidArgument;
 *  3. then a valid put + signal: rank 1 receives it.
 * Rank 1 checks that nothing but the valid put changed any byte of its
 * allocation, and that its own async error is still clear.
 *  4. Rank 1 then signals rank 0 after 100 ms: rank 0's wait on that healthy
 *     connection must return success (an earlier invalid argument of its own
 *     does not make the peer remote-failed).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <string>

static const size_t S = 64 * 1024;
static const size_t GUARD = 8192;

int main(int argc, char** argv)
{
  su_init("bounds");
  bool useMalloc = argc > 1 && !strcmp(argv[1], "--malloc");
  int me = su_rank, peer = 1 - me;
  SU_REQUIRE(su_nranks == 2, "needs 2 ranks");
  su_comm_init();
  size_t total = S + 2 * GUARD;
  char* alloc = nullptr;
  if (useMalloc) {
    alloc = (char*)malloc(total);
    SU_REQUIRE(alloc != nullptr, "malloc");
  } else {
    SU_CK(mscclppHostAlloc((void**)&alloc, total));
  }
  memset(alloc, 0xEE, total);
  char* buf = alloc + GUARD;
  su_fill(buf + S / 2, S / 2, su_seed(3, me, 0)); /* the source half: [S/2, S) */
  SU_CK(mscclppConnect(su_comm, peer, 0, buf, S, su_transport(), su_ibdev()));
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  mscclppDevConn_t* cp = nullptr;
  SU_CK(mscclppGetDeviceConnection(su_comm, peer, 0, &cp));
  mscclppDevConn_t& c = *cp;

  if (me == 0) {
    mscclppResult_t a = mscclppSuccess;
    SU_CK(mscclppCommGetAsyncError(su_comm, &a));
    SU_CHECK(a == mscclppSuccess, "async error before any bad trigger: %d", (int)a);
    /* 1. through the FIFO */
    uint64_t h = c.fifo.push(mscclppData, S - 4, S / 2, 8);
    c.fifo.sync(h);
    SU_CK(mscclppCommGetAsyncError(su_comm, &a));
    SU_CHECK(a == mscclppInvalidArgument, "after a FIFO trigger writing 8 bytes at %zu of %zu: async error %d (%s)",
             S - 4, S, (int)a, mscclppGetErrorString(a));
    const char* msg = su_lasterr(su_comm);
    printf("bounds rank 0: FIFO out-of-range: async %s, message: \"%s\"\n", mscclppGetErrorString(a), msg);
    SU_CHECK(msg[0] != '\0', "no message for the async error");
    SU_CHECK(strstr(msg, std::to_string(S - 4).c_str()) != nullptr, "message does not name the offset %zu: \"%s\"",
             S - 4, msg);
    h = c.fifo.push(mscclppData, 0, S - 2, 4); /* src past my end */
    c.fifo.sync(h);
    /* the proxy goes on: a good trigger after the bad ones is served */
    h = c.fifo.push(mscclppData, 0, S / 2, 16);
    c.fifo.sync(h);

    /* 2. direct */
    struct Bad
    {
      const char* what;
      uint64_t dst, src, size;
    } bad[] = {
      {"dst + size past the end", S - 4, S / 2, 8},
      {"dst at the end", S, S / 2, 1},
      {"dst wrapping around 2^64", UINT64_MAX - 3, S / 2, 8},
      {"size wrapping around 2^64", 16, S / 2, UINT64_MAX - 8},
      {"src + size past the end", 0, S - 2, 4},
      {"size larger than the buffer", 0, 0, S + 1},
    };
    for (const Bad& b : bad) {
      mscclppResult_t r = mscclppDevConnPut(&c, b.dst, b.src, b.size);
      SU_CHECK(r == mscclppInvalidArgument, "direct put, %s: %d (%s), want invalid argument", b.what, (int)r,
               mscclppGetErrorString(r));
      printf("bounds rank 0: direct put, %s -> %s\n", b.what, mscclppGetErrorString(r));
    }
    mscclppResult_t r = mscclppConnPutHandle(&c, 2, 0, 1, S / 2, 8);
    SU_CHECK(r == mscclppInvalidArgument, "put to the peer's handle 2 (it has 0 and 1): %s", mscclppGetErrorString(r));
    r = mscclppConnPutHandle(&c, 1, 0, 7, 0, 8);
    SU_CHECK(r == mscclppInvalidArgument, "put from my handle 7: %s", mscclppGetErrorString(r));
    SU_CK(mscclppCommGetAsyncError(su_comm, &a));
    SU_CHECK(a == mscclppInvalidArgument, "async error after the direct bad puts: %d", (int)a);

    /* 3. valid put + signal */
    SU_CK(mscclppDevConnPutWithSignal(&c, 64, S / 2 + 64, 64));
  } else {
    /* the victim: one valid signal arrives, then check the whole allocation */
    su_wait(&c, 30000, "the valid put after the bad ones");
    const uint8_t* b = (const uint8_t*)alloc;
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < total; i++) {
      size_t off = i - GUARD; /* offset in the registered buffer (wraps below) */
      uint8_t want = 0xEE;
      if (i >= GUARD && off < S / 2) {
        if (off < 16) want = su_byte(su_seed(3, peer, 0), off);                       /* the good FIFO put */
        else if (off >= 64 && off < 128) want = su_byte(su_seed(3, peer, 0), off); /* the valid direct put */
      } else if (i >= GUARD && off < S) {
        want = su_byte(su_seed(3, me, 0), off - S / 2); /* my source half */
      }
      if (b[i] != want) {
        if (!wrong) first = i;
        wrong++;
      }
    }
    SU_CHECK(wrong == 0, "%zu bytes of my allocation wrong, first at %zd from the registered buffer: 0x%02x, want "
             "canary/pattern", wrong, (ssize_t)first - (ssize_t)GUARD, b[first]);
    mscclppResult_t a = mscclppSuccess;
    SU_CK(mscclppCommGetAsyncError(su_comm, &a));
    SU_CHECK(a == mscclppSuccess, "the victim's async error is %s: \"%s\"", mscclppGetErrorString(a),
             su_lasterr(su_comm));
  }

  /* 4. rank 1 signals rank 0 after a pause; rank 0 has an async error of its own */
  if (me == 1) {
    su_sleep_ms(100);
    SU_CK(mscclppDevConnSignal(&c));
  } else {
    double t0 = su_now();
    mscclppResult_t r = mscclppDevConnWaitTimeout(&c, 10000);
    SU_CHECK(r == mscclppSuccess, "wait for a live peer's signal after an earlier invalid argument of my own "
             "returned %s after %.0f ms (signal %s)", mscclppGetErrorString(r), (su_now() - t0) * 1e3,
             c.localSignalEpochId->proxy >= *c.waitEpochId ? "arrived later" : "not there");
    if (r != mscclppSuccess) /* keep going: wait for the signal by hand */
      while (c.localSignalEpochId->proxy < *c.waitEpochId && su_now() - t0 < 10) su_sleep_ms(1);
  }
  SU_CK(mscclppBootstrapBarrier(su_comm));
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  su_comm = nullptr;
  if (useMalloc)
    free(alloc);
  else
    SU_CK(mscclppHostFree(alloc));
  return su_finish();
}
