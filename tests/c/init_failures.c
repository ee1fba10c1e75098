/*
 * init_failures.c: mscclppCommInitRank fails fast, and alike on every rank.
 *
 *   init_failures mismatch  (N = 3): ranks 0 and 1 say nranks=3, rank 2 says
 *                           nranks=4. Every rank's init must return
 *                           mscclppInvalidUsage within 3 s (the timeout is
 *                           20 s), and mscclppGetLastError(NULL) must name
 *                           both values.
 *   init_failures mismatch-root (N = 3): the same with rank 0, whose process
 *                           hosts the root, saying nranks=4.
 *   init_failures ifname-root (N = 3): rank 0 sets MSCCLPP_SOCKET_IFNAME to
 *                           an interface that does not exist (setenv before
 *                           its init), so it cannot join. Every rank's init
 *                           must return mscclppInvalidUsage within 3 s
 *                           naming MSCCLPP_SOCKET_IFNAME: the root tells the
 *                           others why rank 0 could not join.
 *   init_failures ifname-rank (N = 3): the same with rank 2, whose process
 *                           does not host the root: it tells the root why
 *                           it cannot join, and every rank fails at once
 *                           with its reason (not "rank 2 never connected"
 *                           at the timeout).
 *   init_failures secret    (N = 3, MSCCLPP_BOOTSTRAP_SECRET set by the
 *                           runner): rank 2 sets another secret (setenv
 *                           before its init). Rank 2 gets
 *                           mscclppInvalidUsage within 3 s saying that the
 *                           root refused its secret; ranks 0 and 1 get
 *                           mscclppInvalidUsage at their 2 s timeout naming
 *                           rank 2, the refused connection and the fix.
 *   init_failures dying     (N = 3, launch --expect-fail 2): rank 0 starts;
 *                           rank 2 registers with the root and is killed
 *                           (SIGKILL) before rank 1 arrives. Ranks 0 and 1
 *                           must get mscclppRemoteError within 3 s (timeout
 *                           20 s) naming rank 2; rank 1, coming after the
 *                           death, hears it from the root at once.
 *
 * Rank 0's process hosts the root: it waits until the others report before
 * it exits, so that late ranks still get the root's answer. Both modes run
 * with HOME set to the launcher's fresh directory, so the ranks also create
 * the bootstrap cookie there concurrently.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>

#include "check.h"

static const double kMaxInit = 3.0;
static const int kTimeout = 20;

static void report(const char* name)
{
  char marker[64];
  snprintf(marker, sizeof marker, "%s.%d", name, test_rank());
  if (test_publish(marker, "", 0) != 0)
    printf("cannot publish %s\n", marker);
}

static void wait_reports(const char* name, int nranks)
{
  for (int r = 1; r < nranks; r++) {
    char marker[64];
    snprintf(marker, sizeof marker, "%s.%d", name, r);
    if (test_wait_file(marker, 10) != 0)
      printf("note: no %s from rank %d\n", marker, r);
  }
}

static int cookie_ok(void)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/.mscclpp_cookie", test_dir());
  struct stat st;
  if (stat(path, &st) != 0)
    return 0;
  return (st.st_mode & 0777) == 0600 && st.st_size == 65;
}

/* Init as rank of nranks, expecting want; *dt: how long it took, *msg: the last error. */
static mscclppResult_t timed_init(int rank, int nranks, mscclppResult_t want, double* dt, const char** msg)
{
  mscclppComm_t comm = NULL;
  double t0 = test_now();
  mscclppResult_t res = mscclppCommInitRank(&comm, nranks, test_addr(), rank);
  *dt = test_now() - t0;
  *msg = test_last_error(NULL);
  printf("rank %d with nranks=%d: %s after %.3f s: \"%s\"\n", rank, nranks, mscclppGetErrorString(res), *dt, *msg);
  CHECK(res == want, "init returned %s, want %s", mscclppGetErrorString(res), mscclppGetErrorString(want));
  if (res == mscclppSuccess)
    mscclppCommDestroy(comm);
  return res;
}

static int mismatch(int rank, int nranks, int odd)
{
  int mine = rank == odd ? nranks + 1 : nranks;
  double dt;
  const char* msg;
  timed_init(rank, mine, mscclppInvalidUsage, &dt, &msg);
  char a[32], b[32];
  snprintf(a, sizeof a, "nranks=%d", nranks);
  snprintf(b, sizeof b, "nranks=%d", nranks + 1);
  CHECK(strstr(msg, a) && strstr(msg, b), "the message does not name both %s and %s", a, b);
  CHECK(dt < kMaxInit, "init took %.2f s (timeout %d s): a mismatch must fail at once", dt, kTimeout);
  CHECK(cookie_ok(), "no 0600 cookie of 65 bytes in HOME=%s", test_dir());
  if (rank == 0)
    wait_reports("mismatch", nranks);
  else
    report("mismatch");
  return test_finish();
}

/* Rank bad cannot pick an address; the others learn why from the root. */
static int ifname_bad(int rank, int nranks, int bad)
{
  if (rank == bad)
    REQUIRE(setenv("MSCCLPP_SOCKET_IFNAME", "=no-such-interface0", 1) == 0, "setenv");
  double dt;
  const char* msg;
  timed_init(rank, nranks, mscclppInvalidUsage, &dt, &msg);
  CHECK(strstr(msg, "MSCCLPP_SOCKET_IFNAME") && strstr(msg, "no-such-interface0"),
        "the message does not say that rank %d's MSCCLPP_SOCKET_IFNAME matches no interface", bad);
  if (rank != bad)
    CHECK(test_mentions_rank(msg, bad), "the message does not name rank %d", bad);
  CHECK(dt < kMaxInit, "init took %.2f s (timeout %d s): the reason must reach every rank at once", dt, kTimeout);
  if (rank == 0)
    wait_reports("ifname", nranks);
  else
    report("ifname");
  return test_finish();
}

/* Rank 2's secret differs: it fails at once, the others at the timeout with the reason. */
static int secret(int rank, int nranks)
{
  const int odd = nranks - 1;
  REQUIRE(getenv("MSCCLPP_BOOTSTRAP_SECRET") != NULL, "run with MSCCLPP_BOOTSTRAP_SECRET");
  if (rank == odd)
    REQUIRE(setenv("MSCCLPP_BOOTSTRAP_SECRET", "another job's secret", 1) == 0, "setenv");
  MCHECK(mscclppSetBootstrapConnTimeout(2));
  double dt;
  const char* msg;
  timed_init(rank, nranks, mscclppInvalidUsage, &dt, &msg);
  CHECK(strstr(msg, "MSCCLPP_BOOTSTRAP_SECRET") && strstr(msg, "mscclppGetUniqueId"),
        "the message does not say what to do");
  if (rank == odd) {
    CHECK(strstr(msg, "refused this rank's key") != NULL, "the message does not say that the root refused the key");
    CHECK(dt < kMaxInit, "init took %.2f s: a refused secret must fail at once", dt);
  } else {
    CHECK(test_mentions_rank(msg, odd), "the message does not name rank %d", odd);
    CHECK(strstr(msg, "1 connection from 127.0.0.1 refused: different job secret") != NULL,
          "the message does not name the refused connection");
    CHECK(dt < 2 + kMaxInit, "init took %.2f s (timeout 2 s)", dt);
  }
  return test_finish();
}

/* rank 0's log handler: tells rank 2 when the root has its registration */
static void handler(const char* msg)
{
  if (msg && strstr(msg, "rank 2 registered"))
    test_publish("r2.registered", "", 0);
}

static void* init_thread(void* arg)
{
  mscclppComm_t comm = NULL;
  mscclppCommInitRank(&comm, *(int*)arg, test_addr(), test_rank());
  return NULL;
}

static int dying(int rank, int nranks)
{
  const int victim = nranks - 1;
  if (rank == victim) {
    REQUIRE(test_wait_file("r0.started", 10) == 0, "rank 0 did not start");
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, init_thread, &nranks) == 0, "pthread_create");
    REQUIRE(test_wait_file("r2.registered", 10) == 0, "the root never saw rank %d register", rank);
    printf("rank %d: registered with the root; killing myself\n", rank);
    fflush(stdout);
    test_publish("r2.dead", "", 0);
    raise(SIGKILL);
  }
  mscclppComm_t comm = NULL;
  if (rank == 0) {
    MCHECK(mscclppSetLogHandler(handler));
    test_publish("r0.started", "", 0);
  } else {
    REQUIRE(test_wait_file("r2.dead", 10) == 0, "rank %d never died", victim);
    test_pause_ms(50);
  }
  double t0 = test_now();
  mscclppResult_t res = mscclppCommInitRank(&comm, nranks, test_addr(), rank);
  double dt = test_now() - t0;
  const char* msg = test_last_error(NULL);
  printf("rank %d: init %s after %.3f s: \"%s\"\n", rank, mscclppGetErrorString(res), dt, msg);
  CHECK(res == mscclppRemoteError, "init returned %s, want mscclppRemoteError", mscclppGetErrorString(res));
  CHECK(test_mentions_rank(msg, victim), "the message does not name rank %d", victim);
  CHECK(dt < kMaxInit, "init took %.2f s (timeout %d s): a dead rank must be noticed at once", dt, kTimeout);
  if (res == mscclppSuccess)
    mscclppCommDestroy(comm);
  if (rank == 0) {
    MCHECK(mscclppSetLogHandler(NULL));
    char marker[64];
    snprintf(marker, sizeof marker, "dying.%d", 1);
    if (test_wait_file(marker, 10) != 0)
      printf("note: no report from rank 1\n");
  } else {
    report("dying");
  }
  return test_finish();
}

int main(int argc, char** argv)
{
  test_init("init_failures");
  int rank = test_rank(), nranks = test_nranks();
  REQUIRE(argc == 2, "usage: init_failures mismatch|mismatch-root|ifname-root|ifname-rank|secret|dying");
  REQUIRE(nranks == 3, "run with N = 3");
  MCHECK(mscclppSetBootstrapConnTimeout(kTimeout));
  if (strcmp(argv[1], "mismatch") == 0)
    return mismatch(rank, nranks, nranks - 1);
  if (strcmp(argv[1], "mismatch-root") == 0)
    return mismatch(rank, nranks, 0);
  if (strcmp(argv[1], "secret") == 0)
    return secret(rank, nranks);
  if (strcmp(argv[1], "ifname-root") == 0)
    return ifname_bad(rank, nranks, 0);
  if (strcmp(argv[1], "ifname-rank") == 0)
    return ifname_bad(rank, nranks, nranks - 1);
  if (strcmp(argv[1], "dying") == 0)
    return dying(rank, nranks);
  REQUIRE(0, "unknown mode %s", argv[1]);
  return 1;
}
