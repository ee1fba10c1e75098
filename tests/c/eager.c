/*
 * eager.c: the SHM eager path between two processes: puts of up to
 * MSCCLPP_EAGER_BYTES (default 4096) into memory the peer allocated with
 * malloc are queued in a ring in shared memory and landed by the receiver's
 * side, with no process_vm_writev per put.
 *
 *   eager visible  (N = 2): rank 0 puts 8 bytes (no signal) into rank 1's
 *                  malloc buffer; rank 1 makes no library call and must see
 *                  them within 5 s (its lander thread lands them). Then
 *                  putWithSignal / wait rounds of sizes around the threshold,
 *                  each checked byte for byte.
 *   eager killed   (N = 2, launch --expect-fail 1): rank 1 stops itself
 *                  (SIGSTOP), so nothing lands; rank 0 puts 4 KiB until its
 *                  ring is full while a thread of it kills rank 1 after
 *                  0.5 s. A put that waits for room must then return
 *                  mscclppRemoteError within 10 s of the kill, with a last
 *                  error naming rank 1, and destroy must not hang.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

enum { BUFSZ = 1 << 20 };

static mscclppComm_t comm;
static mscclppDevConn_t* conn;
static uint8_t* buf;

static void setup(int rank)
{
  MCHECK(mscclppCommInitRank(&comm, 2, test_addr(), rank));
  buf = (uint8_t*)calloc(1, BUFSZ);
  REQUIRE(buf != NULL, "malloc");
  MCHECK_COMM(comm, mscclppConnect(comm, 1 - rank, 0, buf, BUFSZ, mscclppTransportSHM, NULL));
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  int n = 0;
  MCHECK_COMM(comm, mscclppGetAllDeviceConnections(comm, &conn, &n));
  REQUIRE(n == 1 && conn[0].remoteBuff == NULL, "one connection to a malloc buffer the peer cannot map");
}

static uint8_t pattern(size_t i, int round) { return (uint8_t)(i * 7 + (size_t)round * 131 + 1); }

static int visible(int rank)
{
  setup(rank);
  const uint64_t want = 0x1122334455667788ull;
  if (rank == 0) {
    memcpy(buf, &want, 8);
    MCHECK_COMM(comm, mscclppDevConnPut(conn, 4096, 0, 8));
  } else {
    volatile uint64_t* p = (volatile uint64_t*)(buf + 4096);
    double t0 = test_now();
    while (*p != want && test_now() - t0 < 5.0) usleep(50);
    CHECK(*p == want, "8 bytes put without a signal never landed while this rank made no call: %#llx",
          (unsigned long long)*p);
  }
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  static const size_t sizes[] = {1, 8, 31, 32, 33, 64, 4064, 4095, 4096, 4097, 65536};
  for (int r = 0; r < (int)(sizeof(sizes) / sizeof(sizes[0])); r++) {
    size_t s = sizes[r];
    if (rank == 0) {
      for (size_t i = 0; i < s; i++) buf[BUFSZ / 2 + i] = pattern(i, r);
      MCHECK_COMM(comm, mscclppDevConnPutWithSignal(conn, 100, BUFSZ / 2, s));
      MCHECK_COMM(comm, mscclppDevConnWait(conn)); /* rank 1 checked */
      continue;
    }
    MCHECK_COMM(comm, mscclppDevConnWait(conn));
    size_t bad = 0;
    for (size_t i = 0; i < s; i++) bad += buf[100 + i] != pattern(i, r);
    CHECK(bad == 0, "a put of %zu bytes arrived with %zu wrong bytes", s, bad);
    MCHECK_COMM(comm, mscclppDevConnSignal(conn));
  }
  MCHECK(mscclppCommDestroy(comm));
  free(buf);
  return test_finish();
}

static pid_t victimPid;
static double killedAt;

static void* killer(void* arg)
{
  (void)arg;
  struct timespec ts = {0, 500 * 1000 * 1000};
  nanosleep(&ts, NULL);
  killedAt = test_now(); /* read after pthread_join */
  kill(victimPid, SIGKILL);
  return NULL;
}

static int killed(int rank)
{
  setup(rank);
  int64_t pids[2] = {0, 0};
  pids[rank] = getpid();
  MCHECK_COMM(comm, mscclppBootstrapAllGather(comm, pids, sizeof(int64_t)));
  if (rank == 1) {
    printf("rank 1: stopping myself: nothing I am sent lands from here on\n");
    fflush(stdout);
    raise(SIGSTOP);
    REQUIRE(0, "rank 1 was continued, not killed");
  }
  victimPid = (pid_t)pids[1];
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, killer, NULL) == 0, "pthread_create");
  mscclppResult_t res = mscclppSuccess;
  int puts = 0;
  for (; puts < 100000 && res == mscclppSuccess; puts++) res = mscclppDevConnPut(conn, 0, 0, 4096);
  double end = test_now();
  pthread_join(t, NULL);
  double dt = end - killedAt;
  const char* msg = test_last_error(comm);
  printf("rank 0: put %d returned %s %.2f s after the kill: \"%s\"\n", puts, mscclppGetErrorString(res), dt, msg);
  CHECK(res == mscclppRemoteError, "the put returned %s, expected mscclppRemoteError", mscclppGetErrorString(res));
  CHECK(dt < 10.0, "the put noticed the dead peer %.2f s after the kill", dt);
  CHECK(test_mentions_rank(msg, 1), "the last error does not name rank 1: \"%s\"", msg);
  double t0 = test_now();
  mscclppCommDestroy(comm);
  CHECK(test_now() - t0 < 10.0, "destroy took %.2f s", test_now() - t0);
  free(buf);
  return test_finish();
}

int main(int argc, char** argv)
{
  test_init("eager");
  int rank = test_rank();
  REQUIRE(test_nranks() == 2, "run with 2 ranks");
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "visible")) return visible(rank);
  if (!strcmp(mode, "killed")) return killed(rank);
  REQUIRE(0, "usage: eager visible|killed");
  return 1;
}
