/*
 * hardening.c: misuse of the data path gets an error code and a message,
 * never a crash, a hang or a write into someone else's memory (N = 2, SHM).
 *
 *   hardening stale     a mscclppDevConn_t of a destroyed communicator, used
 *                       after a new communicator was set up, is
 *                       mscclppInvalidUsage and writes nothing into the peer
 *                       (its array was handed to the next communicator)
 *   hardening wait      mscclppConnWaitNext with INT64_MAX and 2e13 ms waits
 *                       for the peer's signal (it returned InProgress at once:
 *                       the deadline overflowed)
 *   hardening hostfree  mscclppHostFree of a buffer registered on a live
 *                       connection is mscclppInvalidUsage naming the
 *                       connection; puts still work; after destroy it frees
 *   hardening push      mscclppFifoPush on a connection not set up yet is
 *                       MSCCLPP_FIFO_PUSH_FAILED saying so; after setup it works
 *   hardening signal    mscclppCommDestroy from a SIGALRM handler that interrupted
 *                       mscclppConnWait on the same thread is mscclppInvalidUsage
 *                       within 1 s (it waited for the wait, i.e. for itself, for
 *                       ever); the wait then ends with the peer's signal and the
 *                       communicator is destroyed normally
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "check.h"
#include "mscclppfifo.h"

enum { SZ = 4096, LAND = 2048, PUT = 64 };

static int rank, peer;

static void on_alarm(int sig)
{
  (void)sig;
  static const char m[] = "hardening: ALARM: a call hung for 25 s\n";
  if (write(1, m, sizeof m - 1) < 0) {
  }
  _exit(3);
}

/* A communicator at addr with one SHM connection to the peer (tag 0) over buf. */
static mscclppComm_t connected(const char* addr, void* buf, mscclppDevConn_t** dc, int setup)
{
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, 2, addr, rank));
  MCHECK_COMM(comm, mscclppConnect(comm, peer, 0, buf, SZ, mscclppTransportSHM, NULL));
  if (setup) MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  int n = 0;
  MCHECK_COMM(comm, mscclppGetAllDeviceConnections(comm, dc, &n));
  REQUIRE(n == 1, "%d connections, want 1", n);
  return comm;
}

/* Whether my landing zone [LAND, LAND+PUT) of buf is still all zero. */
static int landing_clean(const uint8_t* buf)
{
  for (int i = 0; i < PUT; i++)
    if (buf[LAND + i] != 0) return 0;
  return 1;
}

static void stale(void)
{
  uint8_t* buf = (uint8_t*)calloc(1, SZ);
  memset(buf, 0xab, LAND);
  mscclppDevConn_t* old = NULL;
  mscclppComm_t a = connected(test_addr(), buf, &old, 1);
  MCHECK_COMM(a, mscclppBootstrapBarrier(a));
  MCHECK(mscclppCommDestroy(a));
  mscclppDevConn_t* cur = NULL;
  mscclppComm_t b = connected(test_addr_plus(1), buf, &cur, 1);
  printf("the destroyed communicator's connection was at %p, the new one's is at %p\n", (void*)old, (void*)cur);
  CHECK(old != cur, "the new communicator's connection array is at the address of the destroyed one's");
  MCHECK_COMM(b, mscclppBootstrapBarrier(b));
  EXPECT_RES(mscclppConnOp(old, mscclppData | mscclppFlag, LAND, 0, PUT), mscclppInvalidUsage);
  CHECK(test_stristr(test_last_error(NULL), "destroyed") != NULL, "the message does not say the communicator was destroyed");
  EXPECT_RES(mscclppConnPutHandle(old, 1, LAND, 1, 0, PUT), mscclppInvalidUsage);
  EXPECT_RES(mscclppConnWait(old, 0), mscclppInvalidUsage);
  CHECK(mscclppFifoPush(&old->fifo, mscclppData, LAND, 0, PUT) == MSCCLPP_FIFO_PUSH_FAILED, "a push on the stale connection was accepted");
  MCHECK_COMM(b, mscclppBootstrapBarrier(b));
  CHECK(landing_clean(buf), "a call through the destroyed communicator's connection wrote into this rank's buffer");
  MCHECK_COMM(b, mscclppBootstrapBarrier(b)); /* both have looked before the next put */
  /* the new communicator works */
  MCHECK(mscclppConnOp(cur, mscclppData | mscclppFlag, LAND, 0, PUT));
  MCHECK(mscclppConnWaitNext(cur, 10000));
  CHECK(buf[LAND] == 0xab && buf[LAND + PUT - 1] == 0xab, "the new communicator's put did not arrive");
  MCHECK(mscclppCommDestroy(b));
  free(buf);
}

/* One wait of timeoutMs for the peer's signal, which comes about 300 ms after a barrier. */
static void long_wait(mscclppComm_t comm, mscclppDevConn_t* dc, int64_t timeoutMs, const char* what)
{
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  if (rank == 1) {
    test_pause_ms(300);
    MCHECK(mscclppConnOp(dc, mscclppFlag, 0, 0, 1));
    return;
  }
  double t0 = test_now();
  mscclppResult_t res = mscclppConnWaitNext(dc, timeoutMs);
  double dt = test_now() - t0;
  printf("mscclppConnWaitNext(conn, %s) -> %s after %.3f s\n", what, mscclppGetErrorString(res), dt);
  CHECK(res == mscclppSuccess, "a wait of %s returned %s after %.3f s, before the peer's signal", what,
        mscclppGetErrorString(res), dt);
}

static void wait_overflow(void)
{
  uint8_t* buf = (uint8_t*)calloc(1, SZ);
  mscclppDevConn_t* dc = NULL;
  mscclppComm_t comm = connected(test_addr(), buf, &dc, 1);
  long_wait(comm, dc, INT64_MAX, "INT64_MAX ms");
  long_wait(comm, dc, 20000000000000ll, "2e13 ms");
  long_wait(comm, dc, INT64_MAX / 1000000 + 1, "INT64_MAX/1e6+1 ms");
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppCommDestroy(comm));
  free(buf);
}

static void hostfree(void)
{
  void* buf = NULL;
  void* other = NULL;
  MCHECK(mscclppHostAlloc(&buf, SZ));
  MCHECK(mscclppHostAlloc(&other, SZ));
  memset(buf, 0, SZ);
  memset(buf, 0x5a, LAND);
  mscclppDevConn_t* dc = NULL;
  mscclppComm_t comm = connected(test_addr(), buf, &dc, 1);
  mscclppResult_t res = mscclppHostFree(buf);
  const char* msg = test_last_error(NULL);
  printf("mscclppHostFree of the connection's buffer -> %s: \"%s\"\n", mscclppGetErrorString(res), msg);
  REQUIRE(res == mscclppInvalidUsage, "mscclppHostFree of a buffer registered on a live connection returned %s",
          mscclppGetErrorString(res));
  char want[64];
  snprintf(want, sizeof want, "connection 0 (rank %d, tag 0)", peer);
  CHECK(test_stristr(msg, want) != NULL, "the message does not name %s", want);
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppConnOp(dc, mscclppData | mscclppFlag, LAND, 0, PUT));
  MCHECK(mscclppConnWaitNext(dc, 10000));
  CHECK(((uint8_t*)buf)[LAND] == 0x5a, "the put after the refused free did not arrive");
  EXPECT_RES(mscclppHostFree(other), mscclppSuccess);
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppCommDestroy(comm));
  EXPECT_RES(mscclppHostFree(buf), mscclppSuccess);
}

static void push_before_setup(void)
{
  uint8_t* buf = (uint8_t*)calloc(1, SZ);
  mscclppDevConn_t* dc = NULL;
  mscclppComm_t comm = connected(test_addr(), buf, &dc, 0);
  test_prime(NULL, 0);
  uint64_t seq = mscclppFifoPush(&dc->fifo, mscclppData, LAND, 0, PUT);
  const char* msg = test_last_error(NULL);
  printf("mscclppFifoPush before mscclppConnectionSetup -> %llu: \"%s\"\n", (unsigned long long)seq, msg);
  CHECK(seq == MSCCLPP_FIFO_PUSH_FAILED, "a push before mscclppConnectionSetup was accepted (seq %llu)",
        (unsigned long long)seq);
  CHECK(test_stristr(msg, "mscclppConnectionSetup") != NULL, "the message does not say to call mscclppConnectionSetup");
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  MCHECK_COMM(comm, mscclppProxyLaunch(comm));
  seq = mscclppFifoPush(&dc->fifo, mscclppData | mscclppFlag, LAND, 0, PUT);
  CHECK(seq != MSCCLPP_FIFO_PUSH_FAILED, "a push after setup failed: \"%s\"", test_last_error(NULL));
  if (seq != MSCCLPP_FIFO_PUSH_FAILED) MCHECK((mscclppResult_t)mscclppFifoWaitServed(&dc->fifo, seq));
  MCHECK(mscclppConnWaitNext(dc, 10000));
  MCHECK_COMM(comm, mscclppProxyStop(comm));
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppCommDestroy(comm));
  free(buf);
}

static mscclppComm_t sigComm;
static volatile sig_atomic_t sigCalls;
static volatile mscclppResult_t sigRes = mscclppSuccess;
static volatile double sigTook = -1;
static char sigMsg[512];

/* The SIGALRM handler of "signal": the first one destroys the communicator whose wait it
 * interrupted (what the test is about); a later one is the watchdog. */
static void destroy_on_alarm(int sig)
{
  if (sigCalls++ > 0) on_alarm(sig);
  double t0 = test_now();
  sigRes = mscclppCommDestroy(sigComm);
  sigTook = test_now() - t0;
  snprintf(sigMsg, sizeof sigMsg, "%s", test_last_error(NULL));
}

static void* alarm_waiter(void* arg)
{
  test_pause_ms(300);
  pthread_kill(*(pthread_t*)arg, SIGALRM); /* to the waiting thread, not any thread of the process */
  return NULL;
}

static void destroy_in_handler(void)
{
  uint8_t* buf = (uint8_t*)calloc(1, SZ);
  mscclppDevConn_t* dc = NULL;
  sigComm = connected(test_addr(), buf, &dc, 1);
  MCHECK_COMM(sigComm, mscclppBootstrapBarrier(sigComm));
  if (rank == 1) {
    test_pause_ms(2000); /* the peer's handler has returned by then, or hangs */
    MCHECK(mscclppConnOp(dc, mscclppFlag, 0, 0, 1));
  } else {
    signal(SIGALRM, destroy_on_alarm);
    alarm(10); /* the watchdog: the second SIGALRM */
    pthread_t self = pthread_self(), th;
    REQUIRE(pthread_create(&th, NULL, alarm_waiter, &self) == 0, "pthread_create");
    mscclppResult_t res = mscclppConnWaitNext(dc, 20000);
    pthread_join(th, NULL);
    alarm(0);
    printf("mscclppCommDestroy in the SIGALRM handler during mscclppConnWaitNext -> %s after %.3f s: \"%s\"\n",
           mscclppGetErrorString(sigRes), sigTook, sigMsg);
    printf("the interrupted mscclppConnWaitNext -> %s\n", mscclppGetErrorString(res));
    CHECK(sigRes == mscclppInvalidUsage, "the destroy in the handler returned %s", mscclppGetErrorString(sigRes));
    CHECK(sigTook >= 0 && sigTook < 1.0, "the destroy in the handler took %.3f s", sigTook);
    CHECK(test_stristr(sigMsg, "signal handler") != NULL && test_stristr(sigMsg, "async-signal-safe") != NULL,
          "the message does not say why (signal handler, async-signal-safe)");
    CHECK(res == mscclppSuccess, "the interrupted wait returned %s", mscclppGetErrorString(res));
  }
  MCHECK_COMM(sigComm, mscclppBootstrapBarrier(sigComm));
  MCHECK(mscclppCommDestroy(sigComm));
  free(buf);
}

int main(int argc, char** argv)
{
  test_init("hardening");
  signal(SIGALRM, on_alarm);
  alarm(25);
  REQUIRE(test_nranks() == 2, "run with N = 2");
  REQUIRE(argc == 2, "usage: hardening stale|wait|hostfree|push|signal");
  rank = test_rank();
  peer = 1 - rank;
  if (strcmp(argv[1], "stale") == 0)
    stale();
  else if (strcmp(argv[1], "wait") == 0)
    wait_overflow();
  else if (strcmp(argv[1], "hostfree") == 0)
    hostfree();
  else if (strcmp(argv[1], "push") == 0)
    push_before_setup();
  else if (strcmp(argv[1], "signal") == 0)
    destroy_in_handler();
  else
    REQUIRE(0, "unknown mode %s", argv[1]);
  return test_finish();
}
