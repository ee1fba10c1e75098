/*
 * sizes.cc: puts of 1 byte and of BIG bytes between 2 ranks.
 *
 *   sizes [--malloc] [--big BYTES]
 *
 * BIG defaults to 16 MiB + 4099 bytes. That is above MSCCLPP_STREAM_COPY_BYTES
 * (8 MiB) and below MSCCLPP_STREAM_COPY_MAX_BYTES (128 MiB), so into
 * mscclppHostAlloc memory the library times both of its large copies there:
 * the direct put goes through memcpy and the FIFO put through the
 * non-temporal stores (copy.c probes memcpy first, then the other way), each
 * checked byte for byte. The odd size from an odd source address (the source
 * area starts at BIG) gives those stores an unaligned source and a tail. Puts
 * at or above the 128 MiB bound are memcpy as below 8 MiB, so nothing larger
 * reaches other code; 16 MiB is also many times a socket's buffer, so over
 * Ethernet one put spans many sends and receives.
 *
 * Each rank registers one buffer: [0, BIG) receive area, [BIG, 2 BIG) source,
 * then a 4 KiB pad whose last byte is the last byte of the registration.
 *  1. 1-byte puts (direct put, putWithSignal, FIFO push) at the ends of the
 *     areas and at odd places; every other byte of the receive area and of
 *     the pad must keep its canary.
 *  2. one BIG-byte put with putWithSignal (the host direct path).
 *  3. one BIG-byte Data|Flag trigger through the FIFO, fifo.sync.
 * Every byte is checked each time.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

#include <vector>

int main(int argc, char** argv)
{
  su_init("sizes");
  bool useMalloc = false;
  size_t BIG = ((size_t)16 << 20) + 4099;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--malloc")) useMalloc = true;
    else if (!strcmp(argv[i], "--big") && i + 1 < argc) BIG = (size_t)atoll(argv[++i]);
  }
  int me = su_rank, peer = 1 - me;
  SU_REQUIRE(su_nranks == 2, "needs 2 ranks");
  const size_t PAD = 4096;
  size_t S = 2 * BIG + PAD;
  su_comm_init();
  char* buf = nullptr;
  if (useMalloc) {
    buf = (char*)malloc(S);
    SU_REQUIRE(buf != nullptr, "malloc");
  } else {
    SU_CK(mscclppHostAlloc((void**)&buf, S));
  }
  char* src = buf + BIG;
  char* pad = buf + 2 * BIG;
  memset(buf, 0xEE, BIG);
  memset(pad, 0xEE, PAD);
  SU_CK(mscclppConnect(su_comm, peer, 0, buf, S, su_transport(), su_ibdev()));
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  mscclppDevConn_t* cp = nullptr;
  SU_CK(mscclppGetDeviceConnection(su_comm, peer, 0, &cp));
  mscclppDevConn_t& c = *cp;

  /* 1. single bytes */
  su_fill(src, BIG, su_seed(1, me, 0));
  struct One
  {
    size_t dst, src;
  };
  std::vector<One> ones = {{0, 0}, {1, 1}, {7, BIG - 1}, {4095, 12345}, {4096, 4096}, {BIG - 1, 3}, {BIG / 2 + 1, 77}};
  const size_t lastByte = S - 1; /* in the pad: the registration's last byte */
  SU_CK(mscclppBootstrapBarrier(su_comm));
  for (size_t k = 0; k < ones.size(); k++) {
    if (k % 3 == 0)
      c.put(ones[k].dst, BIG + ones[k].src, 1);
    else if (k % 3 == 1)
      c.putWithSignal(ones[k].dst, BIG + ones[k].src, 1);
    else {
      uint64_t h = c.fifo.push(mscclppData, ones[k].dst, BIG + ones[k].src, 1);
      c.fifo.sync(h);
    }
  }
  SU_CK(mscclppDevConnPutWithSignalAndFlush(&c, lastByte, BIG + 5, 1));
  /* how many signals the peer sent: putWithSignal for k%3==1, plus the last one */
  int sig = 1;
  for (size_t k = 0; k < ones.size(); k++)
    if (k % 3 == 1) sig++;
  for (int i = 0; i < sig; i++) su_wait(&c, 30000, "1-byte signals");
  {
    size_t wrong = 0;
    std::vector<uint8_t> mark(BIG, 0);
    for (const One& o : ones) {
      uint8_t want = su_byte(su_seed(1, peer, 0), o.src);
      SU_CHECK((uint8_t)buf[o.dst] == want, "1-byte put to %zu from %zu: 0x%02x want 0x%02x", o.dst, o.src,
               (uint8_t)buf[o.dst], want);
      mark[o.dst] = 1;
    }
    for (size_t i = 0; i < BIG; i++)
      if (!mark[i] && (uint8_t)buf[i] != 0xEE) {
        if (wrong < 5) printf("sizes rank %d: byte %zu of the receive area changed to 0x%02x\n", me, i, (uint8_t)buf[i]);
        wrong++;
      }
    SU_CHECK(wrong == 0, "%zu bytes of the receive area changed by 1-byte puts elsewhere", wrong);
    SU_CHECK((uint8_t)buf[lastByte] == su_byte(su_seed(1, peer, 0), 5), "last byte of the registration: 0x%02x",
             (uint8_t)buf[lastByte]);
    su_verify_const(pad, PAD - 1, 0xEE, "pad before the last byte");
  }
  SU_CK(mscclppBootstrapBarrier(su_comm));

  /* 2. BIG bytes, direct */
  su_fill(src, BIG, su_seed(2, me, 0));
  SU_CK(mscclppBootstrapBarrier(su_comm));
  double t0 = su_now();
  c.putWithSignal(0, BIG, BIG);
  double tPut = su_now() - t0;
  su_wait(&c, 60000, "big direct put");
  double tWait = su_now() - t0;
  su_verify(buf, BIG, su_seed(2, peer, 0), "BIG direct put");
  su_verify_const(pad, PAD - 1, 0xEE, "pad after the big put");
  printf("sizes rank %d: %zu-byte %s put in %.3f s (%.2f GB/s), received after %.3f s\n", me, BIG,
         useMalloc ? "process_vm_writev" : "memcpy", tPut, (double)BIG / tPut / 1e9, tWait);
  SU_CK(mscclppBootstrapBarrier(su_comm));

  /* 3. BIG bytes through the FIFO */
  su_fill(src, BIG, su_seed(3, me, 0));
  SU_CK(mscclppBootstrapBarrier(su_comm));
  t0 = su_now();
  c.epochIncrement();
  uint64_t h = c.fifo.push(mscclppData | mscclppFlag, 0, BIG, BIG);
  c.fifo.sync(h);
  tPut = su_now() - t0;
  su_wait(&c, 60000, "big FIFO put");
  su_verify(buf, BIG, su_seed(3, peer, 0), "BIG FIFO put");
  su_verify_const(pad, PAD - 1, 0xEE, "pad after the big FIFO put");
  printf("sizes rank %d: %zu-byte FIFO trigger served in %.3f s\n", me, BIG, tPut);

  mscclppResult_t async = mscclppSuccess;
  SU_CK(mscclppCommGetAsyncError(su_comm, &async));
  SU_CHECK(async == mscclppSuccess, "async error %s: %s", mscclppGetErrorString(async), su_lasterr(su_comm));
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  su_comm = nullptr;
  if (useMalloc)
    free(buf);
  else
    SU_CK(mscclppHostFree(buf));
  return su_finish();
}
