/*
 * connections.c: connection bookkeeping (run with N = 2 and 3).
 *
 *  A. Every rank connects to every other rank over mscclppTransportSHM:
 *     (peer, tag 0) with a buffer from mscclppHostAlloc, (peer, tag 1)
 *     without a buffer, plus extra RegisterBufferForConnection calls. Checks
 *     handles (0 = signal slot, 1 = buffer, then 2, 3, ...), that
 *     GetAllDeviceConnections lists them in Connect order with remoteRank,
 *     tag, localBuff and fifo.connId (= index) filled, GetDeviceConnection by
 *     (remoteRank, tag) and InvalidArgument for an unknown pair, and, after
 *     ConnectionSetup, the pointers it fills (the peer's HostAlloc buffer is
 *     visible through remoteBuff with the peer's data in it).
 *     (mscclppTransportP2P without a GPU runs in host mode, carried like SHM:
 *     tests/c/transports/dropin.cc.)
 *  B. 64 connections on one communicator.
 *  C. A connection the peer never declared: ConnectionSetup fails (no hang)
 *     within the bootstrap timeout (set to 2 s), naming rank and tag.
 *
 * While the SHM transport is not implemented yet, Connect(SHM) must return
 * InvalidUsage with a message naming "SHM"; then A-C are skipped (noted) and
 * that error is what is checked.
 */
#define _GNU_SOURCE

#include "check.h"

enum { BUFSZ = 8192, TAG_BUF = 0, TAG_NOBUF = 1, UNMATCHED_TAG = 4242 };

static int rank, nranks;

static uint8_t pattern(int from, int to, size_t i)
{
  return (uint8_t)(from * 59 + to * 17 + (int)i * 7 + 1);
}

static int n_conns(mscclppComm_t comm, mscclppDevConn_t** all)
{
  mscclppDevConn_t* d = NULL;
  int n = -1;
  MCHECK_COMM(comm, mscclppGetAllDeviceConnections(comm, &d, &n));
  if (all)
    *all = d;
  return n;
}

/* What connection idx should look like on this rank in part A. */
struct expect
{
  int remoteRank;
  int tag;
  void* localBuff;
};

static void check_list(mscclppComm_t comm, const struct expect* ex, int n, const char* when)
{
  mscclppDevConn_t* all = NULL;
  int got = n_conns(comm, &all);
  if (!CHECK(got == n, "%s: GetAllDeviceConnections n = %d, expected %d", when, got, n))
    return;
  REQUIRE(all != NULL, "%s: GetAllDeviceConnections returned a NULL array for %d connections", when, n);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    bad += !CHECK(all[i].remoteRank == ex[i].remoteRank, "%s: conn %d remoteRank %d, expected %d", when, i,
                  all[i].remoteRank, ex[i].remoteRank);
    bad += !CHECK(all[i].tag == ex[i].tag, "%s: conn %d tag %d, expected %d", when, i, all[i].tag, ex[i].tag);
    bad += !CHECK(all[i].localBuff == ex[i].localBuff, "%s: conn %d localBuff %p, expected %p", when, i,
                  all[i].localBuff, ex[i].localBuff);
    bad += !CHECK(all[i].fifo.connId == i, "%s: conn %d fifo.connId %d, expected %d", when, i, all[i].fifo.connId, i);
  }
  if (!bad)
    printf("ok   %s: %d connections in Connect order, remoteRank/tag/localBuff/fifo.connId right\n", when, n);
}

/* Part A. Returns 0 when SHM is not implemented (and that was checked). */
static int part_a(mscclppComm_t comm)
{
  mscclppDevConn_t* dc = NULL;

  CHECK(n_conns(comm, NULL) == 0, "a new communicator has connections");
  EXPECT_RES_COMM(comm, mscclppGetDeviceConnection(comm, (rank + 1) % nranks, TAG_BUF, &dc), mscclppInvalidArgument);

  int npeers = nranks - 1;
  void* bufs[16] = {0};
  void* extra[16][3];
  struct expect ex[32];
  int idx = 0;
  for (int p = 0; p < nranks; p++) {
    if (p == rank)
      continue;
    void* b = NULL;
    MCHECK(mscclppHostAlloc(&b, BUFSZ));
    REQUIRE(b != NULL, "mscclppHostAlloc gave NULL");
    for (size_t i = 0; i < BUFSZ; i++)
      ((uint8_t*)b)[i] = pattern(rank, p, i);
    bufs[p] = b;
    for (int k = 0; k < 3; k++) {
      extra[p][k] = malloc(256);
      memset(extra[p][k], k, 256);
    }

    mscclppResult_t res = mscclppConnect(comm, p, TAG_BUF, b, BUFSZ, mscclppTransportSHM, NULL);
    if (idx == 0 && res == mscclppInvalidUsage) {
      const char* msg = test_last_error(comm);
      printf("SKIP-NOTE: Connect(SHM) returned invalid usage: \"%s\" -- SHM transport not implemented yet; "
             "checking that error instead of the bookkeeping\n",
             msg);
      CHECK(test_stristr(msg, "SHM") != NULL, "the InvalidUsage message of Connect(SHM) does not name SHM: \"%s\"",
            msg);
      CHECK(test_stristr(test_last_error(NULL), "SHM") != NULL,
            "mscclppGetLastError(NULL) after Connect(SHM) does not name SHM: \"%s\"", test_last_error(NULL));
      EXPECT_RES_COMM(comm, mscclppConnectWithoutBuffer(comm, p, TAG_NOBUF, mscclppTransportSHM, NULL),
                      mscclppInvalidUsage);
      CHECK(test_stristr(test_last_error(comm), "SHM") != NULL,
            "the message of ConnectWithoutBuffer(SHM) does not name SHM: \"%s\"", test_last_error(comm));
      CHECK(n_conns(comm, NULL) == 0, "a failed SHM Connect left a connection behind");
      for (int q = 0; q < nranks; q++) {
        if (bufs[q])
          mscclppHostFree(bufs[q]);
        if (q != rank && bufs[q])
          for (int k = 0; k < 3; k++)
            free(extra[q][k]);
      }
      /* the collective still works with no connections */
      MCHECK_COMM(comm, mscclppConnectionSetup(comm));
      printf("ok   ConnectionSetup with no connections\n");
      return 0;
    }
    if (res != mscclppSuccess) {
      test_report_res(__FILE__, __LINE__, "mscclppConnect(SHM)", res, mscclppSuccess, comm, 1);
      test_abort();
    }
    ex[idx].remoteRank = p;
    ex[idx].tag = TAG_BUF;
    ex[idx].localBuff = b;
    int bufIdx = idx++;
    MCHECK_COMM(comm, mscclppConnectWithoutBuffer(comm, p, TAG_NOBUF, mscclppTransportSHM, NULL));
    ex[idx].remoteRank = p;
    ex[idx].tag = TAG_NOBUF;
    ex[idx].localBuff = NULL;
    int noBufIdx = idx++;

    mscclppBufferHandle_t h = 12345;
    MCHECK_COMM(comm, mscclppRegisterBufferForConnection(comm, bufIdx, extra[p][0], 256, &h));
    CHECK(h == 2, "first extra buffer of a Connect connection got handle %u, expected 2", (unsigned)h);
    MCHECK_COMM(comm, mscclppRegisterBufferForConnection(comm, bufIdx, extra[p][1], 256, &h));
    CHECK(h == 3, "second extra buffer of a Connect connection got handle %u, expected 3", (unsigned)h);
    MCHECK_COMM(comm, mscclppRegisterBufferForConnection(comm, noBufIdx, extra[p][2], 256, &h));
    CHECK(h == 1, "first buffer of a ConnectWithoutBuffer connection got handle %u, expected 1", (unsigned)h);
    MCHECK_COMM(comm, mscclppRegisterBufferForConnection(comm, noBufIdx, extra[p][0], 256, &h));
    CHECK(h == 2, "second buffer of a ConnectWithoutBuffer connection got handle %u, expected 2", (unsigned)h);
  }
  printf("ok   %d connections declared; buffer handles 2,3 (with buffer) and 1,2 (without)\n", idx);
  int n = 2 * npeers;
  mscclppBufferHandle_t h;
  EXPECT_RES_COMM(comm, mscclppRegisterBufferForConnection(comm, n, extra[(rank + 1) % nranks][0], 256, &h),
                  mscclppInvalidArgument);
  EXPECT_RES_COMM(comm, mscclppRegisterBufferForConnection(comm, -1, extra[(rank + 1) % nranks][0], 256, &h),
                  mscclppInvalidArgument);
  check_list(comm, ex, n, "before ConnectionSetup");
  {
    /* a trigger pushed before setup would be served by the first proxy after it: refused */
    mscclppDevConn_t* early = NULL;
    n_conns(comm, &early);
    uint64_t seq = mscclppFifoPush(&early[0].fifo, mscclppFlag, 0, 0, 1);
    const char* why = mscclppGetLastError(NULL);
    CHECK(seq == MSCCLPP_FIFO_PUSH_FAILED && why != NULL && strstr(why, "mscclppConnectionSetup") != NULL,
          "mscclppFifoPush before ConnectionSetup returned %llu (last error \"%s\"), expected a refusal naming "
          "mscclppConnectionSetup",
          (unsigned long long)seq, why ? why : "(NULL)");
  }

  double t0 = test_now();
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  printf("ok   ConnectionSetup (%.3f s)\n", test_now() - t0);
  check_list(comm, ex, n, "after ConnectionSetup");

  mscclppDevConn_t* all = NULL;
  n_conns(comm, &all);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    mscclppDevConn_t* c = &all[i];
    int p = c->remoteRank;
    bad += !CHECK(c->localSignalEpochId != NULL, "conn %d: localSignalEpochId NULL", i);
    bad += !CHECK(c->waitEpochId != NULL, "conn %d: waitEpochId NULL", i);
    if (c->localSignalEpochId) {
      bad += !CHECK(c->localSignalEpochId->device == 0 && c->localSignalEpochId->proxy == 0,
                    "conn %d: epochs start at %llu/%llu, expected 0/0", i,
                    (unsigned long long)c->localSignalEpochId->device,
                    (unsigned long long)c->localSignalEpochId->proxy);
    }
    if (c->waitEpochId)
      bad += !CHECK(*c->waitEpochId == 0, "conn %d: *waitEpochId starts at %llu", i,
                    (unsigned long long)*c->waitEpochId);
    bad += !CHECK(c->fifo.triggerFifo != NULL && c->fifo.triggerFifoHead != NULL && c->fifo.triggerFifoTail != NULL,
                  "conn %d: fifo pointers %p/%p/%p", i, (void*)c->fifo.triggerFifo, (void*)c->fifo.triggerFifoHead,
                  (void*)c->fifo.triggerFifoTail);
    bad += !CHECK(c->remoteSignalEpochId != NULL,
                  "conn %d: remoteSignalEpochId NULL for a node-local SHM peer (spec: set when directly reachable)", i);
    if (c->tag == TAG_BUF) {
      /* the peer's buffer came from mscclppHostAlloc: it must be mapped */
      if (CHECK(c->remoteBuff != NULL, "conn %d (peer %d): remoteBuff NULL for a mscclppHostAlloc buffer", i, p)) {
        size_t wrong = 0;
        for (size_t k = 0; k < BUFSZ; k++)
          if (((volatile uint8_t*)c->remoteBuff)[k] != pattern(p, rank, k))
            wrong++;
        bad += !CHECK(wrong == 0, "conn %d: %zu bytes of the peer's buffer through remoteBuff differ", i, wrong);
      } else {
        bad++;
      }
    } else {
      bad += !CHECK(c->remoteBuff == NULL, "conn %d (no buffer on either side): remoteBuff %p, expected NULL", i,
                    c->remoteBuff);
    }

    mscclppDevConn_t* one = NULL;
    MCHECK_COMM(comm, mscclppGetDeviceConnection(comm, p, c->tag, &one));
    bad += !CHECK(one == c, "GetDeviceConnection(%d, %d) = %p, expected &all[%d] = %p", p, c->tag, (void*)one, i,
                  (void*)c);
  }
  if (!bad)
    printf("ok   after setup: epochs, fifo, remote pointers and the peers' HostAlloc data are right\n");
  EXPECT_RES_COMM(comm, mscclppGetDeviceConnection(comm, (rank + 1) % nranks, 2, &dc), mscclppInvalidArgument);
  EXPECT_RES_COMM(comm, mscclppGetDeviceConnection(comm, nranks + 3, TAG_BUF, &dc), mscclppInvalidArgument);
  EXPECT_RES_COMM(comm, mscclppGetDeviceConnection(comm, rank, TAG_BUF, &dc), mscclppInvalidArgument);

  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm)); /* nobody frees while a peer may still read */
  return 1;
}

/* Part B: 64 connections, spread evenly over the peers. */
static void part_b(void)
{
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, nranks, test_addr_plus(1), rank));
  int per = 64 / (nranks - 1);
  int total = per * (nranks - 1);
  static uint8_t bufs[64][64];
  int idx = 0;
  for (int j = 0; j < per; j++) {
    for (int p = 0; p < nranks; p++) {
      if (p == rank)
        continue;
      MCHECK_COMM(comm, mscclppConnect(comm, p, 100 + j, bufs[idx], sizeof bufs[idx], mscclppTransportSHM, NULL));
      idx++;
    }
  }
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  mscclppDevConn_t* all = NULL;
  int n = n_conns(comm, &all);
  CHECK(n == total, "%d connections listed, expected %d", n, total);
  int bad = 0;
  idx = 0;
  for (int j = 0; j < per && n == total; j++) {
    for (int p = 0; p < nranks; p++) {
      if (p == rank)
        continue;
      bad += !CHECK(all[idx].remoteRank == p && all[idx].tag == 100 + j && all[idx].fifo.connId == idx &&
                      all[idx].localBuff == bufs[idx],
                    "conn %d: remoteRank %d tag %d connId %d localBuff %p, expected %d/%d/%d/%p", idx,
                    all[idx].remoteRank, all[idx].tag, all[idx].fifo.connId, all[idx].localBuff, p, 100 + j, idx,
                    (void*)bufs[idx]);
      mscclppDevConn_t* one = NULL;
      MCHECK_COMM(comm, mscclppGetDeviceConnection(comm, p, 100 + j, &one));
      bad += !CHECK(one == &all[idx], "GetDeviceConnection(%d, %d) is not &all[%d]", p, 100 + j, idx);
      idx++;
    }
  }
  if (n == total && !bad)
    printf("ok   %d connections on one communicator, set up, listed and found\n", total);
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppCommDestroy(comm));
}

/* Part C: a connection the peer never declared. */
static void part_c(void)
{
  const int timeout = 2;
  MCHECK(mscclppSetBootstrapConnTimeout(timeout));
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, nranks, test_addr_plus(2), rank));
  int victim = nranks - 1;
  static uint8_t buf[64];
  if (rank == 0)
    MCHECK_COMM(comm, mscclppConnect(comm, victim, UNMATCHED_TAG, buf, sizeof buf, mscclppTransportSHM, NULL));
  double t0 = test_now();
  mscclppResult_t res = mscclppConnectionSetup(comm);
  double dt = test_now() - t0;
  const char* msg = test_last_error(comm);
  printf("ConnectionSetup with an unmatched connection: %s after %.2f s: \"%s\"\n", mscclppGetErrorString(res), dt,
         msg);
  CHECK(res != mscclppSuccess, "ConnectionSetup succeeded although rank 0's connection (%d, %d) was never declared",
        victim, UNMATCHED_TAG);
  if (rank == 0) {
    CHECK(dt <= timeout + 3, "rank 0's ConnectionSetup took %.2f s, more than timeout %d + 3 s", dt, timeout);
    CHECK(test_mentions_rank(msg, victim), "the message does not name rank %d: \"%s\"", victim, msg);
    CHECK(strstr(msg, "4242") != NULL, "the message does not name tag %d: \"%s\"", UNMATCHED_TAG, msg);
  } else {
    CHECK(dt <= 2 * timeout + 3, "rank %d's ConnectionSetup took %.2f s, more than 2 * timeout + 3 s", rank, dt);
    CHECK(msg[0] != '\0', "no last-error message after a failed ConnectionSetup");
  }
  t0 = test_now();
  MCHECK(mscclppCommDestroy(comm));
  CHECK(test_now() - t0 < timeout + 3, "CommDestroy after the failure took %.2f s", test_now() - t0);
  MCHECK(mscclppSetBootstrapConnTimeout(30));
}

int main(void)
{
  test_init("connections");
  rank = test_rank();
  nranks = test_nranks();
  REQUIRE(nranks >= 2 && nranks <= 16, "run with 2..16 ranks, not %d", nranks);

  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, nranks, test_addr(), rank));
  int shm = part_a(comm);
  MCHECK(mscclppCommDestroy(comm));
  if (shm) {
    part_b();
    part_c();
  } else {
    printf("SKIP-NOTE: parts B (64 connections) and C (unmatched connection) need the SHM transport\n");
  }
  return test_finish();
}
