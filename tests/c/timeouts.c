/*
 * timeouts.c: every bootstrap wait is bounded and a dead peer is reported.
 *
 *   timeouts missing   (N = 3): rank 2 never calls init and exits 0 at once.
 *                      Ranks 0 and 1, with the timeout set to 2 s, must get
 *                      an error from mscclppCommInitRank within 2 + 3 s whose
 *                      last-error text names rank 2. Ranks 0 and 1 meet
 *                      (marker files) before they call init: the error
 *                      names rank 2 only for a rank that reached the root
 *                      before it gave up, and on a loaded machine one
 *                      process may start a timeout later than the other.
 *   timeouts missing-env  the same with the timeout from MSCCLPP_BOOTSTRAP_TIMEOUT
 *                      (no mscclppSetBootstrapConnTimeout call).
 *   timeouts killed    (N = 3, launch --expect-fail 2): a loop of AllGather
 *                      and Barrier; rank 2 kills itself (SIGKILL) in the
 *                      middle. With the timeout at 20 s, the survivors'
 *                      failing call must return mscclppRemoteError in < 10 s,
 *                      later calls must fail promptly too, and destroy must
 *                      not hang.
 *   timeouts killed-large  the same with gathers of 1 MiB + 3 bytes per rank
 *                      (on one node: many chunk rounds through the node
 *                      segment); the victim dies from a second thread while
 *                      its main thread is inside an AllGather (or just after
 *                      it), so the survivors may find it gone mid-gather.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>

#include "check.h"

static int missing(int rank, int nranks, int fromEnv)
{
  const char* env = getenv("MSCCLPP_BOOTSTRAP_TIMEOUT");
  const int timeout = fromEnv ? (env ? atoi(env) : 0) : 2;
  if (fromEnv) REQUIRE(timeout > 0, "run with MSCCLPP_BOOTSTRAP_TIMEOUT set");
  const int absent = nranks - 1;
  if (rank == absent) {
    printf("rank %d: not calling init, exiting at once\n", rank);
    return 0;
  }
  if (!fromEnv) MCHECK(mscclppSetBootstrapConnTimeout(timeout));
  /* every present rank is running (the library loaded) before any starts the timeout */
  char mark[32];
  snprintf(mark, sizeof mark, "started.%d", rank);
  REQUIRE(test_publish(mark, "", 0) == 0, "cannot publish %s in MSCCLPP_TEST_DIR", mark);
  for (int r = 0; r < absent; r++) {
    snprintf(mark, sizeof mark, "started.%d", r);
    REQUIRE(test_wait_file(mark, 15) == 0, "rank %d did not start within 15 s", r);
  }
  mscclppComm_t comm = NULL;
  double t0 = test_now();
  mscclppResult_t res = mscclppCommInitRank(&comm, nranks, test_addr(), rank);
  double dt = test_now() - t0;
  const char* msg = test_last_error(NULL);
  printf("mscclppCommInitRank without rank %d: %s after %.2f s: \"%s\"\n", absent, mscclppGetErrorString(res), dt, msg);
  CHECK(res != mscclppSuccess, "InitRank succeeded although rank %d never joined", absent);
  CHECK(dt <= timeout + 3, "InitRank took %.2f s, more than timeout %d s + 3 s", dt, timeout);
  CHECK(test_mentions_rank(msg, absent), "the last error does not name rank %d: \"%s\"", absent, msg);
  if (res == mscclppSuccess)
    mscclppCommDestroy(comm);
  return test_finish();
}

static uint8_t pattern(int r, int i, int it)
{
  return (uint8_t)(r * 31 + i * 3 + it * 7);
}

/* The victim's killer thread: SIGKILL as soon as it runs (its main thread is entering a gather). */
static void* kill_self(void* arg)
{
  (void)arg;
  raise(SIGKILL);
  return NULL;
}

/* large: SZ = 1 MiB + 3 and the victim dies from a thread started just before AllGather killAt + 1 */
static int killed(int rank, int nranks, int large)
{
  const int timeout = 20;
  const int victim = nranks - 1;
  const int killAt = 10;
  MCHECK(mscclppSetBootstrapConnTimeout(timeout));
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, nranks, test_addr(), rank));
  const int SZ = large ? (1 << 20) + 3 : 64;
  uint8_t* buf = (uint8_t*)malloc((size_t)nranks * SZ);
  int failedAt = -1;
  const char* failedIn = "";
  mscclppResult_t res = mscclppSuccess;
  double dt = 0;
  for (int it = 0; it < 1000 && failedAt < 0; it++) {
    memset(buf, 0, (size_t)nranks * SZ);
    for (int i = 0; i < SZ; i++)
      buf[rank * SZ + i] = pattern(rank, i, it);
    if (large && rank == victim && it == killAt + 1) {
      printf("rank %d: killing myself from a thread while in AllGather %d\n", rank, it);
      fflush(stdout);
      pthread_t th;
      REQUIRE(pthread_create(&th, NULL, kill_self, NULL) == 0, "pthread_create");
    }
    double t0 = test_now();
    res = mscclppBootstrapAllGather(comm, buf, SZ);
    dt = test_now() - t0;
    if (res != mscclppSuccess) {
      failedAt = it;
      failedIn = "AllGather";
      break;
    }
    int wrong = 0;
    for (int s = 0; s < nranks; s++)
      for (int i = 0; i < SZ; i++)
        wrong += buf[s * SZ + i] != pattern(s, i, it);
    CHECK(wrong == 0, "iteration %d: %d wrong bytes", it, wrong);
    if (!large && rank == victim && it == killAt) {
      printf("rank %d: killing myself after AllGather %d\n", rank, it);
      fflush(stdout);
      raise(SIGKILL);
    }
    t0 = test_now();
    res = mscclppBootstrapBarrier(comm);
    dt = test_now() - t0;
    if (res != mscclppSuccess) {
      failedAt = it;
      failedIn = "Barrier";
      break;
    }
  }
  REQUIRE(rank != victim, "the victim survived its own SIGKILL");
  const char* msg = test_last_error(comm);
  printf("survivor: %s %d failed with %s after %.2f s: \"%s\"\n", failedIn, failedAt, mscclppGetErrorString(res), dt,
         msg);
  CHECK(failedAt >= 0, "no call failed in 1000 rounds although rank %d was killed", victim);
  CHECK(failedAt <= killAt + 1 + large, "the first failure came at round %d, rank %d died at round %d", failedAt, victim,
        killAt);
  CHECK(res == mscclppRemoteError, "the failing call returned %d (%s), expected mscclppRemoteError", (int)res,
        mscclppGetErrorString(res));
  CHECK(dt < 10.0, "the failing call took %.2f s (timeout %d s): a dead peer must be noticed well before it", dt,
        timeout);
  CHECK(msg[0] != '\0', "no last-error text for the failed call");

  /* later calls fail promptly as well */
  double t0 = test_now();
  res = mscclppBootstrapAllGather(comm, buf, SZ);
  double dt2 = test_now() - t0;
  printf("survivor: next AllGather: %s after %.2f s: \"%s\"\n", mscclppGetErrorString(res), dt2,
         test_last_error(comm));
  CHECK(res != mscclppSuccess, "an AllGather with a dead rank succeeded");
  CHECK(dt2 < 10.0, "the next AllGather took %.2f s", dt2);

  mscclppResult_t ae = mscclppSuccess;
  res = mscclppCommGetAsyncError(comm, &ae);
  printf("survivor: mscclppCommGetAsyncError -> %s, async error %s\n", mscclppGetErrorString(res),
         mscclppGetErrorString(ae));

  t0 = test_now();
  res = mscclppCommDestroy(comm);
  double dt3 = test_now() - t0;
  printf("survivor: CommDestroy: %s after %.2f s\n", mscclppGetErrorString(res), dt3);
  CHECK(dt3 < 10.0, "CommDestroy with a dead peer took %.2f s", dt3);
  free(buf);
  return test_finish();
}

int main(int argc, char** argv)
{
  test_init("timeouts");
  int rank = test_rank(), nranks = test_nranks();
  REQUIRE(argc == 2, "usage: timeouts missing|missing-env|killed|killed-large");
  REQUIRE(nranks >= 3, "run with N >= 3");
  if (strcmp(argv[1], "missing") == 0)
    return missing(rank, nranks, 0);
  if (strcmp(argv[1], "missing-env") == 0)
    return missing(rank, nranks, 1);
  if (strcmp(argv[1], "killed") == 0)
    return killed(rank, nranks, 0);
  if (strcmp(argv[1], "killed-large") == 0)
    return killed(rank, nranks, 1);
  REQUIRE(0, "unknown mode %s", argv[1]);
  return 1;
}
