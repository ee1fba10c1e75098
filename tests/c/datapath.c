/*
 * datapath.c: the SHM data path in host mode (run with N = 2 and 3);
 * `datapath eth`: the same over mscclppTransportEthernet (TCP), where a put
 * with a signal travels as one frame (rounds 1, 3 and the last trigger of 5).
 *
 * Every rank connects to every other rank twice over mscclppTransportSHM:
 * tag 0 with a mscclppHostAlloc buffer (node shared memory: a put is a
 * memcpy) and tag 1 with a malloc buffer (a put goes by process_vm_writev),
 * each with an extra malloc buffer registered as handle 2. Each buffer is
 * [0, H) source data and [H, 2H) where the peer's data lands. Rounds, each
 * followed by a wait on every connection and a byte-exact check:
 *
 *   1. mscclppDevConnPutWithSignal, 256 KiB
 *   2. mscclppDevConnPut twice + mscclppDevConnSignal
 *   3. mscclppDevConnPutWithSignalAndFlush, then the source is overwritten
 *      (after a flush the peer must still see the old data)
 *   4. mscclppConnPutHandle into handle 2 + signal
 *   5. through the proxy: mscclppProxyLaunch, 200 triggers per connection
 *      pushed with mscclppFifoPush (more than the 128 FIFO slots), the last
 *      one Data|Flag, mscclppFifoWaitServed, mscclppProxyStop
 *
 * and at the end the signal epochs count exactly the signals and waits.
 * While SHM is not implemented (Connect returns InvalidUsage naming SHM)
 * the program says so and passes.
 */
#define _GNU_SOURCE
#include "check.h"

enum { H = 512 * 1024, BUFSZ = 2 * H, EXTRA = 4096, NTRIG = 200, TRIG = 256, WAIT_MS = 10000 };

static int rank, nranks;

static uint8_t pattern(int from, int to, int tag, size_t i)
{
  return (uint8_t)(from * 89 + to * 23 + tag * 101 + (int)i * 7 + (int)(i >> 9) + 3);
}

struct conn_state
{
  int peer, tag;
  uint8_t* buf;
  uint8_t* extra;
  mscclppDevConn_t* dc;
};

static struct conn_state conns[32];
static int nconns;

/* Wait for one more signal on every connection. */
static void wait_all(const char* round)
{
  for (int i = 0; i < nconns; i++) {
    double t0 = test_now();
    mscclppResult_t r = mscclppDevConnWaitTimeout(conns[i].dc, WAIT_MS);
    if (r != mscclppSuccess) {
      test_report_res(__FILE__, __LINE__, "mscclppDevConnWaitTimeout", r, mscclppSuccess, NULL, 0);
      printf("  in %s on connection %d (peer %d tag %d) after %.2f s: waitEpochId %llu, proxy epoch %llu\n", round, i,
             conns[i].peer, conns[i].tag, test_now() - t0, (unsigned long long)*conns[i].dc->waitEpochId,
             (unsigned long long)conns[i].dc->localSignalEpochId->proxy);
      test_abort();
    }
  }
}

/* Bytes [off, off+len) of my landing zone must be the peer's source bytes
 * [srcOff, srcOff+len). */
static int check_landed(struct conn_state* c, size_t off, size_t srcOff, size_t len, const char* round)
{
  size_t wrong = 0, first = 0;
  for (size_t k = 0; k < len; k++) {
    if (c->buf[H + off + k] != pattern(c->peer, rank, c->tag, srcOff + k)) {
      if (!wrong)
        first = k;
      wrong++;
    }
  }
  return CHECK(wrong == 0, "%s: peer %d tag %d: %zu of %zu bytes wrong, the first at landing offset %zu", round,
               c->peer, c->tag, wrong, len, H + off + first);
}

int main(int argc, char** argv)
{
  mscclppTransport_t tr = mscclppTransportSHM;
  const char* trName = "SHM";
  if (argc > 1 && strcmp(argv[1], "eth") == 0) {
    tr = mscclppTransportEthernet;
    trName = "Ethernet";
  }
  test_init("datapath");
  rank = test_rank();
  nranks = test_nranks();
  REQUIRE(nranks >= 2 && nranks <= 16, "run with 2..16 ranks");
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, nranks, test_addr(), rank));

  for (int p = 0; p < nranks; p++) {
    if (p == rank)
      continue;
    for (int tag = 0; tag < 2; tag++) {
      struct conn_state* c = &conns[nconns];
      c->peer = p;
      c->tag = tag;
      if (tag == 0) {
        void* b = NULL;
        MCHECK(mscclppHostAlloc(&b, BUFSZ));
        c->buf = (uint8_t*)b;
      } else {
        c->buf = (uint8_t*)malloc(BUFSZ);
      }
      c->extra = (uint8_t*)calloc(1, EXTRA);
      for (size_t k = 0; k < H; k++)
        c->buf[k] = pattern(rank, p, tag, k);
      memset(c->buf + H, 0, H);
      mscclppResult_t r = mscclppConnect(comm, p, tag, c->buf, BUFSZ, tr, NULL);
      if (nconns == 0 && r == mscclppInvalidUsage && tr == mscclppTransportSHM && test_stristr(test_last_error(comm), "SHM")) {
        printf("SKIP-NOTE: the SHM transport is not implemented yet (\"%s\"): no data path to test\n",
               test_last_error(comm));
        MCHECK(mscclppCommDestroy(comm));
        return test_finish();
      }
      if (r != mscclppSuccess) {
        test_report_res(__FILE__, __LINE__, tr == mscclppTransportSHM ? "mscclppConnect(SHM)" : "mscclppConnect(Ethernet)", r,
                        mscclppSuccess, comm, 1);
        test_abort();
      }
      mscclppBufferHandle_t h = 0;
      MCHECK_COMM(comm, mscclppRegisterBufferForConnection(comm, nconns, c->extra, EXTRA, &h));
      REQUIRE(h == 2, "extra buffer handle %u, expected 2", (unsigned)h);
      nconns++;
    }
  }
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  mscclppDevConn_t* all = NULL;
  int n = 0;
  MCHECK_COMM(comm, mscclppGetAllDeviceConnections(comm, &all, &n));
  REQUIRE(n == nconns, "%d connections, expected %d", n, nconns);
  for (int i = 0; i < nconns; i++) {
    conns[i].dc = &all[i];
    REQUIRE(all[i].remoteRank == conns[i].peer && all[i].tag == conns[i].tag, "connection %d is %d/%d", i,
            all[i].remoteRank, all[i].tag);
    REQUIRE(all[i].localSignalEpochId != NULL && all[i].waitEpochId != NULL, "connection %d has no epochs", i);
  }
  printf("ok   %d %s connections set up (remoteBuff: tag 0 %s, tag 1 %s)\n", nconns, trName,
         conns[0].dc->remoteBuff ? "mapped" : "NULL", conns[1].dc->remoteBuff ? "mapped" : "NULL");
  int ok;

  /* 1 */
  for (int i = 0; i < nconns; i++)
    MCHECK_COMM(comm, mscclppDevConnPutWithSignal(conns[i].dc, H + 0, 0, 256 * 1024));
  wait_all("round 1");
  ok = 1;
  for (int i = 0; i < nconns; i++)
    ok &= check_landed(&conns[i], 0, 0, 256 * 1024, "round 1 (putWithSignal 256 KiB)");
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  if (ok)
    printf("ok   round 1: putWithSignal of 256 KiB, wait, data right\n");

  /* 2 */
  for (int i = 0; i < nconns; i++) {
    MCHECK_COMM(comm, mscclppDevConnPut(conns[i].dc, H + 256 * 1024, 256 * 1024, 64 * 1024));
    MCHECK_COMM(comm, mscclppDevConnPut(conns[i].dc, H + 320 * 1024, 320 * 1024, 64 * 1024));
    MCHECK_COMM(comm, mscclppDevConnSignal(conns[i].dc));
  }
  wait_all("round 2");
  ok = 1;
  for (int i = 0; i < nconns; i++)
    ok &= check_landed(&conns[i], 256 * 1024, 256 * 1024, 128 * 1024, "round 2 (put, put, signal)");
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  if (ok)
    printf("ok   round 2: put + put + signal, wait, data right\n");

  /* 3 */
  for (int i = 0; i < nconns; i++) {
    MCHECK_COMM(comm, mscclppDevConnPutWithSignalAndFlush(conns[i].dc, H + 384 * 1024, 384 * 1024, 64 * 1024));
    memset(conns[i].buf + 384 * 1024, 0xEE, 64 * 1024); /* allowed once the flush returned */
  }
  wait_all("round 3");
  ok = 1;
  for (int i = 0; i < nconns; i++)
    ok &= check_landed(&conns[i], 384 * 1024, 384 * 1024, 64 * 1024, "round 3 (putWithSignalAndFlush)");
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  if (ok)
    printf("ok   round 3: putWithSignalAndFlush, source reused after it, peer saw the old data\n");

  /* 4: handle 2 to handle 2 */
  for (int i = 0; i < nconns; i++) {
    for (size_t k = 0; k < EXTRA / 2; k++)
      conns[i].extra[k] = pattern(rank, conns[i].peer, conns[i].tag + 7, k);
  }
  for (int i = 0; i < nconns; i++) {
    MCHECK_COMM(comm, mscclppConnPutHandle(conns[i].dc, 2, EXTRA / 2, 2, 0, EXTRA / 2));
    MCHECK_COMM(comm, mscclppDevConnSignal(conns[i].dc));
  }
  wait_all("round 4");
  ok = 1;
  for (int i = 0; i < nconns; i++) {
    size_t wrong = 0;
    for (size_t k = 0; k < EXTRA / 2; k++)
      wrong += conns[i].extra[EXTRA / 2 + k] != pattern(conns[i].peer, rank, conns[i].tag + 7, k);
    ok &= CHECK(wrong == 0, "round 4 (mscclppConnPutHandle 2 -> 2): peer %d tag %d: %zu bytes wrong", conns[i].peer,
                conns[i].tag, wrong);
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  if (ok)
    printf("ok   round 4: mscclppConnPutHandle between handle 2 buffers, data right\n");

  /* 5: through the proxy */
  MCHECK_COMM(comm, mscclppProxyLaunch(comm));
  double t0 = test_now();
  uint64_t last[32];
  for (int t = 0; t < NTRIG; t++) {
    for (int i = 0; i < nconns; i++) {
      uint64_t off = 448 * 1024 + (uint64_t)t * TRIG;
      uint64_t type = mscclppData;
      if (t == NTRIG - 1) {
        mscclppDevConnEpochIncrement(conns[i].dc);
        type |= mscclppFlag;
      }
      last[i] = mscclppFifoPush(&conns[i].dc->fifo, type, H + off, off, TRIG);
    }
  }
  for (int i = 0; i < nconns; i++)
    mscclppFifoWaitServed(&conns[i].dc->fifo, last[i]);
  wait_all("round 5");
  ok = 1;
  for (int i = 0; i < nconns; i++)
    ok &= check_landed(&conns[i], 448 * 1024, 448 * 1024, (size_t)NTRIG * TRIG, "round 5 (proxy FIFO)");
  mscclppResult_t ae = mscclppInternalError;
  MCHECK_COMM(comm, mscclppCommGetAsyncError(comm, &ae));
  CHECK(ae == mscclppSuccess, "async error after the proxy round: %s", mscclppGetErrorString(ae));
  MCHECK_COMM(comm, mscclppProxyStop(comm));
  if (ok)
    printf("ok   round 5: %d triggers per connection through the proxy FIFO (%.3f s), data right\n", NTRIG,
           test_now() - t0);

  /* epochs: 5 signals sent and 5 waited for on every connection */
  ok = 1;
  for (int i = 0; i < nconns; i++) {
    mscclppDevConn_t* d = conns[i].dc;
    ok &= CHECK(d->localSignalEpochId->device == 5, "connection %d: device epoch %llu, expected 5", i,
                (unsigned long long)d->localSignalEpochId->device);
    ok &= CHECK(*d->waitEpochId == 5, "connection %d: waitEpochId %llu, expected 5", i,
                (unsigned long long)*d->waitEpochId);
    ok &= CHECK(d->localSignalEpochId->proxy == 5, "connection %d: proxy epoch %llu, expected 5 (the peer's signals)",
                i, (unsigned long long)d->localSignalEpochId->proxy);
  }
  if (ok)
    printf("ok   epochs: 5 signals sent, 5 received, 5 waited for on every connection\n");

  /* a wait with nothing coming times out with InProgress */
  t0 = test_now();
  mscclppResult_t r = mscclppDevConnWaitTimeout(conns[0].dc, 200);
  double dt = test_now() - t0;
  CHECK(r == mscclppInProgress, "a wait for a signal that never comes returned %s, expected in progress",
        mscclppGetErrorString(r));
  CHECK(dt >= 0.15 && dt < 3.0, "a 200 ms wait took %.3f s", dt);
  if (r == mscclppInProgress)
    printf("ok   a 200 ms wait for a signal that never comes: in progress after %.3f s\n", dt);
  (*conns[0].dc->waitEpochId)--; /* undo the counted wait */

  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppCommDestroy(comm));
  for (int i = 0; i < nconns; i++) {
    if (conns[i].tag == 0)
      MCHECK(mscclppHostFree(conns[i].buf));
    else
      free(conns[i].buf);
    free(conns[i].extra);
  }
  return test_finish();
}
