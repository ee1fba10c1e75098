/*
 * bad_input.c: every kind of bad input returns the documented code, leaves
 * a non-empty last error, returns promptly and does not crash. Run with
 * N = 2 (both ranks do the same; the live communicator has a real peer, so
 * that Connect's transport check is reached with a valid remote rank).
 *
 *   NULL out-pointer or bad value argument      -> mscclppInvalidArgument
 *   NULL connection                             -> mscclppInvalidArgument, naming the call
 *   NULL comm, destroyed comm, wrong call order -> mscclppInvalidUsage
 *   unknown transport                           -> mscclppInvalidUsage
 *   mscclppCommDestroy(NULL)                    -> mscclppSuccess
 *   mscclppSetBootstrapConnTimeout(<= 0)        -> mscclppInvalidArgument
 */
#define _GNU_SOURCE
#include <signal.h>

#include "check.h"

#define PROMPT(call, want)                                                                           \
  do {                                                                                             \
    double t0_ = test_now();                                                                       \
    EXPECT_RES(call, want);                                                                        \
    double dt_ = test_now() - t0_;                                                                 \
    CHECK(dt_ < 2.0, "%s took %.2f s; bad input must fail at once, without network waits", #call, dt_); \
  } while (0)

/* A call on a NULL connection: InvalidArgument at once, the last error "<name>: conn is NULL". */
#define NULL_CONN(call, name)                                                                        \
  do {                                                                                             \
    PROMPT(call, mscclppInvalidArgument);                                                          \
    const char* le_ = test_last_error(NULL);                                                       \
    CHECK(strcmp(le_, name ": conn is NULL") == 0, "%s: last error \"%s\", want \"%s\"", #call, le_, \
          name ": conn is NULL");                                                                  \
  } while (0)

/* The same for a call on the live communicator c: its own last error too. */
#define PROMPT_C(c, call, want)                                                                      \
  do {                                                                                             \
    double t0_ = test_now();                                                                       \
    EXPECT_RES_COMM(c, call, want);                                                                \
    double dt_ = test_now() - t0_;                                                                 \
    CHECK(dt_ < 2.0, "%s took %.2f s; bad input must fail at once, without network waits", #call, dt_); \
  } while (0)

static void on_alarm(int sig)
{
  (void)sig;
  static const char m[] = "bad_input: ALARM: a call hung for 60 s\n";
  if (write(1, m, sizeof m - 1) < 0) {
  }
  _exit(3);
}

int main(void)
{
  test_init("bad_input");
  signal(SIGALRM, on_alarm);
  alarm(60);
  REQUIRE(test_nranks() == 2, "run with N = 2");
  const int rank = test_rank(), peer = 1 - rank;
  const char* addr = test_addr();
  mscclppComm_t c = NULL;
  mscclppUniqueId id;
  int v = 0;
  uint8_t buf[256];
  mscclppBufferHandle_t h = 0;
  mscclppDevConn_t* dc = NULL;
  int n = 0;
  mscclppResult_t ae = mscclppSuccess;

  printf("-- process-wide calls\n");
  PROMPT(mscclppGetUniqueId(NULL), mscclppInvalidArgument);
  PROMPT(mscclppGetVersion(NULL), mscclppInvalidArgument);
  PROMPT(mscclppSetBootstrapConnTimeout(0), mscclppInvalidArgument);
  PROMPT(mscclppSetBootstrapConnTimeout(-5), mscclppInvalidArgument);
  PROMPT(mscclppSetBootstrapConnTimeout(30), mscclppSuccess);
  PROMPT(mscclppSetLogHandler(NULL), mscclppSuccess);
  PROMPT(mscclppCommDestroy(NULL), mscclppSuccess);
  PROMPT(mscclppHostAlloc(NULL, 64), mscclppInvalidArgument);
  /* a NULL connection is a NULL argument, and the text names the call the program made */
  NULL_CONN(mscclppDevConnPut(NULL, 0, 0, 1), "mscclppDevConnPut (mscclppConnOp)");
  NULL_CONN(mscclppDevConnPutWithSignal(NULL, 0, 0, 1), "mscclppDevConnPutWithSignal (mscclppConnSignalOp)");
  NULL_CONN(mscclppDevConnSignal(NULL), "mscclppDevConnSignal (mscclppConnSignalOp)");
  NULL_CONN(mscclppDevConnFlush(NULL), "mscclppDevConnFlush (mscclppConnOp)");
  NULL_CONN(mscclppDevConnWaitTimeout(NULL, 0), "mscclppDevConnWaitTimeout (mscclppConnWaitNext)");
  NULL_CONN(mscclppConnPutHandle(NULL, 1, 0, 1, 0, 1), "mscclppConnPutHandle");
  NULL_CONN(mscclppConnWait(NULL, 0), "mscclppConnWait");

  printf("-- mscclppCommInitRank\n");
  PROMPT(mscclppCommInitRank(NULL, 1, addr, 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 0, addr, 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, -1, addr, 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, addr, -1), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, addr, 1), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 2, addr, 5), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, NULL, 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, "", 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, "nocolon", 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, "1.2.3.4:99999", 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, "[::1", 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, "host:abc", 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, "127.0.0.1:", 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRank(&c, 1, "127.0.0.1:-1", 0), mscclppInvalidArgument);
  CHECK(c == NULL, "a failed InitRank stored a communicator %p", (void*)c);

  printf("-- mscclppCommInitRankFromId\n");
  MCHECK(mscclppGetUniqueId(&id));
  PROMPT(mscclppCommInitRankFromId(NULL, 1, id, 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRankFromId(&c, 0, id, 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRankFromId(&c, -3, id, 0), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRankFromId(&c, 1, id, 1), mscclppInvalidArgument);
  PROMPT(mscclppCommInitRankFromId(&c, 1, id, -1), mscclppInvalidArgument);

  printf("-- NULL communicator\n");
  PROMPT(mscclppBootstrapAllGather(NULL, buf, 4), mscclppInvalidUsage);
  PROMPT(mscclppBootstrapBarrier(NULL), mscclppInvalidUsage);
  PROMPT(mscclppCommRank(NULL, &v), mscclppInvalidUsage);
  PROMPT(mscclppCommSize(NULL, &v), mscclppInvalidUsage);
  PROMPT(mscclppConnect(NULL, 0, 0, buf, sizeof buf, mscclppTransportSHM, NULL), mscclppInvalidUsage);
  PROMPT(mscclppConnectWithoutBuffer(NULL, 0, 0, mscclppTransportSHM, NULL), mscclppInvalidUsage);
  PROMPT(mscclppRegisterBufferForConnection(NULL, 0, buf, sizeof buf, &h), mscclppInvalidUsage);
  PROMPT(mscclppConnectionSetup(NULL), mscclppInvalidUsage);
  PROMPT(mscclppGetAllDeviceConnections(NULL, &dc, &n), mscclppInvalidUsage);
  PROMPT(mscclppGetDeviceConnection(NULL, 0, 0, &dc), mscclppInvalidUsage);
  PROMPT(mscclppProxyLaunch(NULL), mscclppInvalidUsage);
  PROMPT(mscclppProxyStop(NULL), mscclppInvalidUsage);
  PROMPT(mscclppCommGetAsyncError(NULL, &ae), mscclppInvalidUsage);

  printf("-- a live communicator (2 ranks at %s)\n", addr);
  MCHECK(mscclppCommInitRank(&c, 2, addr, rank));
  REQUIRE(c != NULL, "InitRank gave NULL");
  PROMPT_C(c, mscclppCommRank(c, NULL), mscclppInvalidUsage);
  PROMPT_C(c, mscclppCommSize(c, NULL), mscclppInvalidUsage);
  PROMPT_C(c, mscclppBootstrapAllGather(c, NULL, 4), mscclppInvalidArgument);
  PROMPT_C(c, mscclppBootstrapAllGather(c, buf, 0), mscclppInvalidArgument);
  PROMPT_C(c, mscclppBootstrapAllGather(c, buf, -1), mscclppInvalidArgument);
  PROMPT_C(c, mscclppBootstrapAllGather(c, buf, -1000000), mscclppInvalidArgument);
  PROMPT_C(c, mscclppConnect(c, 2, 0, buf, sizeof buf, mscclppTransportSHM, NULL), mscclppInvalidArgument);
  PROMPT_C(c, mscclppConnect(c, -1, 0, buf, sizeof buf, mscclppTransportSHM, NULL), mscclppInvalidArgument);
  PROMPT_C(c, mscclppConnectWithoutBuffer(c, 7, 0, mscclppTransportSHM, NULL), mscclppInvalidArgument);
  PROMPT_C(c, mscclppConnect(c, peer, 0, buf, sizeof buf, (mscclppTransport_t)7, NULL), mscclppInvalidUsage);
  PROMPT_C(c, mscclppConnect(c, peer, 0, buf, sizeof buf, (mscclppTransport_t)-1, NULL), mscclppInvalidUsage);
  PROMPT_C(c, mscclppConnectWithoutBuffer(c, peer, 0, (mscclppTransport_t)7, NULL), mscclppInvalidUsage);
  PROMPT_C(c, mscclppConnectWithoutBuffer(c, peer, 0, (mscclppTransport_t)4, NULL), mscclppInvalidUsage);
  PROMPT_C(c, mscclppRegisterBufferForConnection(c, 0, buf, sizeof buf, &h), mscclppInvalidArgument);
  PROMPT_C(c, mscclppRegisterBufferForConnection(c, 0, buf, sizeof buf, NULL), mscclppInvalidArgument);
  PROMPT_C(c, mscclppRegisterBufferForConnection(c, -1, buf, sizeof buf, &h), mscclppInvalidArgument);
  PROMPT_C(c, mscclppRegisterBufferForConnection(c, 64, buf, sizeof buf, &h), mscclppInvalidArgument);
  PROMPT_C(c, mscclppGetAllDeviceConnections(c, NULL, &n), mscclppInvalidArgument);
  PROMPT_C(c, mscclppGetAllDeviceConnections(c, &dc, NULL), mscclppInvalidArgument);
  PROMPT_C(c, mscclppGetDeviceConnection(c, 0, 0, NULL), mscclppInvalidArgument);
  PROMPT_C(c, mscclppGetDeviceConnection(c, peer, 0, &dc), mscclppInvalidArgument);
  n = -1;
  MCHECK_COMM(c, mscclppGetAllDeviceConnections(c, &dc, &n));
  CHECK(n == 0, "the failed Connect calls left %d connections", n);
  PROMPT_C(c, mscclppCommGetAsyncError(c, NULL), mscclppInvalidArgument);
  ae = mscclppInternalError;
  PROMPT_C(c, mscclppCommGetAsyncError(c, &ae), mscclppSuccess);
  CHECK(ae == mscclppSuccess, "async error of a healthy communicator is %d", (int)ae);
  printf("-- call order\n");
  PROMPT_C(c, mscclppProxyStop(c), mscclppInvalidUsage); /* never launched */
  PROMPT_C(c, mscclppProxyLaunch(c), mscclppSuccess);     /* before ConnectionSetup, as upstream */
  PROMPT_C(c, mscclppProxyLaunch(c), mscclppInvalidUsage); /* launched already */
  PROMPT_C(c, mscclppProxyStop(c), mscclppSuccess);
  MCHECK_COMM(c, mscclppConnectionSetup(c));
  MCHECK_COMM(c, mscclppConnectionSetup(c)); /* again: nothing new, a barrier */
  PROMPT_C(c, mscclppProxyLaunch(c), mscclppSuccess);
  PROMPT_C(c, mscclppProxyStop(c), mscclppSuccess);
  PROMPT_C(c, mscclppProxyStop(c), mscclppInvalidUsage); /* stopped already */

  printf("-- the communicator still works after all that\n");
  {
    uint32_t x[2] = {0, 0};
    x[rank] = 0xC0FFEE00u + (uint32_t)rank;
    MCHECK_COMM(c, mscclppBootstrapAllGather(c, x, 4));
    CHECK(x[0] == 0xC0FFEE00u && x[1] == 0xC0FFEE01u, "AllGather gave %x %x", x[0], x[1]);
    MCHECK_COMM(c, mscclppBootstrapBarrier(c));
    v = -1;
    MCHECK_COMM(c, mscclppCommRank(c, &v));
    CHECK(v == rank, "CommRank %d, expected %d", v, rank);
  }

  printf("-- after destroy\n");
  MCHECK(mscclppCommDestroy(c));
  PROMPT(mscclppCommRank(c, &v), mscclppInvalidUsage);
  PROMPT(mscclppCommSize(c, &v), mscclppInvalidUsage);
  PROMPT(mscclppBootstrapAllGather(c, buf, 4), mscclppInvalidUsage);
  PROMPT(mscclppBootstrapBarrier(c), mscclppInvalidUsage);
  PROMPT(mscclppConnect(c, peer, 0, buf, sizeof buf, mscclppTransportSHM, NULL), mscclppInvalidUsage);
  PROMPT(mscclppConnectionSetup(c), mscclppInvalidUsage);
  PROMPT(mscclppGetAllDeviceConnections(c, &dc, &n), mscclppInvalidUsage);
  PROMPT(mscclppProxyLaunch(c), mscclppInvalidUsage);
  PROMPT(mscclppCommGetAsyncError(c, &ae), mscclppInvalidUsage);
  PROMPT(mscclppCommDestroy(c), mscclppInvalidUsage); /* double destroy */
  PROMPT(mscclppCommDestroy(c), mscclppInvalidUsage); /* and again */

  printf("-- a fresh communicator works after all that\n");
  MCHECK(mscclppCommInitRank(&c, 2, test_addr_plus(1), rank));
  MCHECK_COMM(c, mscclppBootstrapBarrier(c));
  MCHECK(mscclppCommDestroy(c));

  return test_finish();
}
