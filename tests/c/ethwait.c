/*
 * ethwait.c: Ethernet waits that read the socket themselves (2 ranks). A
 * host-mode wait takes the reader's token from the receive thread and reads
 * the frames itself; the receive thread reads whatever comes while no one
 * waits. `ethwait rounds`:
 *
 *   1. ping-pong: 300 rounds of putWithSignal there and back, sizes from
 *      1 B to 300 KiB, a pattern of its own each round, checked byte for
 *      byte after every wait (the data a signal covers has landed);
 *   2. put, put, signal: both puts have landed when the wait returns;
 *   3. a put with no signal and no wait on the receiver: it lands anyway
 *      (the receive thread takes the socket back), checked by polling the
 *      buffer until a deadline;
 *   4. a wait with nothing coming ends in progress near its timeout and
 *      consumes nothing: the same timed wait called again sees the signal
 *      sent afterwards; ten short ones take far less than ten liveness
 *      ticks, and one signal then ends the next wait;
 *   5. a wait that lasts many of its 1 ms reading periods gets its data;
 *   6. waits with timeout 0 in a loop get the put and its signal (they
 *      read nothing themselves: the receive thread must take over);
 *   7. two threads waiting for one signal both return (one reads it, the
 *      other sleeps and is woken).
 *
 * `ethwait deadpeer`: rank 0 exits without destroying its communicator
 * while rank 1 waits (reading the socket): the wait ends with
 * mscclppRemoteError naming rank 0 well before its timeout.
 */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <unistd.h>

enum { H = 512 * 1024, BUFSZ = 2 * H, WAIT_MS = 20000 };

static uint8_t pattern(int from, int round, size_t i)
{
  return (uint8_t)(from * 131 + round * 29 + (int)i * 7 + (int)(i >> 8) + 1);
}

static void fill(uint8_t* p, int from, int round, size_t n)
{
  for (size_t i = 0; i < n; i++)
    p[i] = pattern(from, round, i);
}

/* Bytes of landing zone at off must be the peer's pattern of round; 1 when they are. */
static int landed(const uint8_t* p, int from, int round, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != pattern(from, round, i))
      return CHECK(0, "round %d: byte %zu of %zu is %u, expected %u", round, i, n, p[i], pattern(from, round, i));
  return 1;
}

static void waitOne(mscclppComm_t comm, mscclppDevConn_t* dc, const char* what)
{
  mscclppResult_t r = mscclppDevConnWaitTimeout(dc, WAIT_MS);
  if (r != mscclppSuccess) {
    test_report_res(__FILE__, __LINE__, what, r, mscclppSuccess, comm, 1);
    test_abort();
  }
}

struct waiter {
  mscclppDevConn_t* dc;
  mscclppResult_t r;
};

static void* waitThread(void* arg)
{
  struct waiter* w = (struct waiter*)arg;
  w->r = mscclppConnWait(w->dc, WAIT_MS);
  return NULL;
}

static int rounds(mscclppComm_t comm, mscclppDevConn_t* dc, uint8_t* buf, int rank)
{
  static const size_t sizes[] = {1, 4096, 65536 + 13, 300 * 1024, 8, 200 * 1024 + 1};
  int ok = 1;
  /* 1: ping-pong; rank 0 starts, each rank answers what it received */
  for (int round = 0; round < 300 && ok; round++) {
    size_t n = sizes[round % 6];
    if (rank == 0) {
      fill(buf, 0, round, n);
      MCHECK_COMM(comm, mscclppDevConnPutWithSignal(dc, H, 0, n));
      waitOne(comm, dc, "ping-pong wait on rank 0");
      ok &= landed(buf + H, 1, round, n);
    } else {
      waitOne(comm, dc, "ping-pong wait on rank 1");
      ok &= landed(buf + H, 0, round, n);
      fill(buf, 1, round, n);
      MCHECK_COMM(comm, mscclppDevConnPutWithSignal(dc, H, 0, n));
    }
  }
  if (ok)
    printf("ok   300 ping-pong rounds of putWithSignal, 1 B .. 300 KiB, data right after every wait\n");
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));

  /* 2: put, put, signal */
  if (rank == 0) {
    fill(buf, 0, 1000, 2 * 65536);
    MCHECK_COMM(comm, mscclppDevConnPut(dc, H, 0, 65536));
    MCHECK_COMM(comm, mscclppDevConnPut(dc, H + 65536, 65536, 65536));
    MCHECK_COMM(comm, mscclppDevConnSignal(dc));
  } else {
    waitOne(comm, dc, "put, put, signal: wait");
    if (landed(buf + H, 0, 1000, 2 * 65536))
      printf("ok   put, put, signal: both puts landed when the wait returned\n");
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));

  /* 3: a put no wait reads (rank 1 waited last: the receive thread must take the socket back) */
  if (rank == 0) {
    fill(buf, 0, 2000, 4096);
    MCHECK_COMM(comm, mscclppDevConnPut(dc, H + 3 * 65536, 0, 4096));
  } else {
    volatile uint8_t* last = buf + H + 3 * 65536 + 4095;
    double t0 = test_now();
    while (*last != pattern(0, 2000, 4095) && test_now() - t0 < 10.0)
      test_pause_ms(1);
    double dt = test_now() - t0;
    if (CHECK(*last == pattern(0, 2000, 4095), "a put with no wait on the receiver had not landed after %.1f s", dt) &&
        landed(buf + H + 3 * 65536, 0, 2000, 4096))
      printf("ok   a put with no signal and no wait on the receiver landed (%.1f ms)\n", dt * 1e3);
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));

  /* 4: a wait that times out, then the signal */
  if (rank == 1) {
    double t0 = test_now();
    mscclppResult_t r = mscclppDevConnWaitTimeout(dc, 150);
    double dt = test_now() - t0;
    CHECK(r == mscclppInProgress, "a wait with nothing coming returned %s, expected in progress", mscclppGetErrorString(r));
    CHECK(dt >= 0.1 && dt < 3.0, "a 150 ms wait took %.3f s", dt);
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  if (rank == 0) {
    MCHECK_COMM(comm, mscclppDevConnSignal(dc));
  } else {
    mscclppResult_t r = mscclppDevConnWaitTimeout(dc, WAIT_MS); /* the same wait again: the timeout consumed nothing */
    if (CHECK(r == mscclppSuccess, "the wait after the timeout returned %s", mscclppGetErrorString(r)))
      printf("ok   a 150 ms wait with nothing coming: in progress; the signal sent after it was then seen\n");
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));

  /* 4b: short waits with nothing coming end near their timeouts (a reading wait blocks in the
   * socket's recv for one 1 ms reading period at most, SO_RCVTIMEO), and stay counted. The bound
   * is loose for a loaded machine: it catches a recv that blocks until the peer's next PING only
   * sometimes (about 730 ms in all measured that way), one that blocks for deadMs always. A timed-out
   * wait consumes nothing, so one signal afterwards ends the next wait */
  if (rank == 1) {
    double t0 = test_now();
    int inProgress = 0;
    for (int i = 0; i < 10; i++) inProgress += mscclppDevConnWaitTimeout(dc, 20) == mscclppInProgress;
    double dt = test_now() - t0;
    if (CHECK(inProgress == 10, "%d of ten 20 ms waits with nothing coming were in progress", inProgress) &&
        CHECK(dt >= 0.19 && dt < 2.5, "ten 20 ms waits with nothing coming took %.3f s", dt))
      printf("ok   ten 20 ms waits with nothing coming: in progress, %.0f ms in all\n", dt * 1e3);
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  if (rank == 0) {
    MCHECK_COMM(comm, mscclppDevConnSignal(dc));
  } else {
    MCHECK_COMM(comm, mscclppDevConnWaitTimeout(dc, WAIT_MS)); /* the ten timed-out waits counted nothing */
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));

  /* 5: a wait that spans many of its 1 ms reading periods still gets the put and its signal */
  if (rank == 0) {
    test_pause_ms(50); /* the wait below starts first (not needed for the outcome) */
    fill(buf, 0, 3000, 100000);
    MCHECK_COMM(comm, mscclppDevConnPutWithSignal(dc, H, 0, 100000));
  } else {
    double t0 = test_now();
    waitOne(comm, dc, "a long wait");
    if (landed(buf + H, 0, 3000, 100000))
      printf("ok   a wait of %.0f ms (many reading periods): the put and its signal arrived\n", (test_now() - t0) * 1e3);
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));

  /* 6: waits with timeout 0 in a loop (rank 1 waited last: the receive thread had handed the
   * socket to waits) still see the put and its signal: such a wait reads nothing itself, so the
   * receive thread must take the socket back */
  if (rank == 0) {
    fill(buf, 0, 4000, 8192);
    MCHECK_COMM(comm, mscclppDevConnPutWithSignal(dc, H, 0, 8192));
  } else {
    (*dc->waitEpochId)++;
    double t0 = test_now();
    mscclppResult_t r = mscclppInProgress;
    while (r == mscclppInProgress && test_now() - t0 < 10.0)
      r = mscclppConnWait(dc, 0);
    double dt = test_now() - t0;
    if (CHECK(r == mscclppSuccess, "waits with timeout 0 returned %s after %.1f s", mscclppGetErrorString(r), dt) &&
        landed(buf + H, 0, 4000, 8192))
      printf("ok   waits with timeout 0 in a loop saw the put and its signal (%.1f ms)\n", dt * 1e3);
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));

  /* 7: two threads wait for the same signal: one reads it, the other sleeps and must be woken */
  if (rank == 1) {
    (*dc->waitEpochId)++;
    struct waiter w[2] = {{dc, mscclppInternalError}, {dc, mscclppInternalError}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
      REQUIRE(pthread_create(&th[i], NULL, waitThread, &w[i]) == 0, "pthread_create");
    MCHECK_COMM(comm, mscclppBootstrapBarrier(comm)); /* both threads started */
    for (int i = 0; i < 2; i++)
      pthread_join(th[i], NULL);
    if (CHECK(w[0].r == mscclppSuccess && w[1].r == mscclppSuccess, "two waits on one signal returned %s and %s",
              mscclppGetErrorString(w[0].r), mscclppGetErrorString(w[1].r)) &&
        landed(buf + H, 0, 5000, 70000))
      printf("ok   two threads waiting for one putWithSignal both returned, data right\n");
  } else {
    MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
    test_pause_ms(20); /* the waits are most likely under way (not needed for the outcome) */
    fill(buf, 0, 5000, 70000);
    MCHECK_COMM(comm, mscclppDevConnPutWithSignal(dc, H, 0, 70000));
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  return ok;
}

static void deadPeer(mscclppComm_t comm, mscclppDevConn_t* dc, int rank)
{
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  if (rank == 0) {
    test_pause_ms(200); /* let rank 1 be inside its wait (not needed for the outcome) */
    _exit(3);
  }
  double t0 = test_now();
  mscclppResult_t r = mscclppDevConnWaitTimeout(dc, WAIT_MS);
  double dt = test_now() - t0;
  const char* last = test_last_error(comm);
  CHECK(r == mscclppRemoteError, "a wait on a peer that exited returned %s, expected a remote error",
        mscclppGetErrorString(r));
  CHECK(dt < 10.0, "the wait on a peer that exited took %.1f s", dt);
  CHECK(test_mentions_rank(last, 0), "the error does not name rank 0: \"%s\"", last);
  if (r == mscclppRemoteError)
    printf("ok   a wait on a peer that exited: remote error after %.2f s (\"%s\")\n", dt, last);
}

int main(int argc, char** argv)
{
  const char* mode = argc > 1 ? argv[1] : "rounds";
  test_init("ethwait");
  int rank = test_rank();
  REQUIRE(test_nranks() == 2, "run with 2 ranks");
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, 2, test_addr(), rank));
  uint8_t* buf = (uint8_t*)calloc(1, BUFSZ);
  REQUIRE(buf != NULL, "calloc");
  MCHECK_COMM(comm, mscclppConnect(comm, 1 - rank, 0, buf, BUFSZ, mscclppTransportEthernet, NULL));
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  mscclppDevConn_t* dc = NULL;
  MCHECK_COMM(comm, mscclppGetDeviceConnection(comm, 1 - rank, 0, &dc));
  if (strcmp(mode, "deadpeer") == 0) {
    deadPeer(comm, dc, rank);
  } else {
    rounds(comm, dc, buf, rank);
  }
  MCHECK(mscclppCommDestroy(comm));
  free(buf);
  return test_finish();
}
