/*
 * stranger.c: connections to the root's port that are not ranks (run with
 * N = 2 and MSCCLPP_DEBUG=WARN).
 *
 * While rank 0 is in mscclppCommInitRank, a thread of rank 0 connects to
 * MSCCLPP_TEST_ADDR several times: closes at once, sends an HTTP request,
 * sends 128 random bytes (a wrong secret), sends a huge length prefix and
 * keeps the connection open, sends 1 MiB of garbage, and connects and stays
 * silent. Only then does rank 1 start its init (it waits for a marker file).
 * The communicator must still form quickly and AllGather must work, and
 * the log handler of rank 0 must have seen a WARN line about a dropped
 * connection.
 *
 *   stranger         the root is MSCCLPP_TEST_ADDR (mscclppCommInitRank)
 *   stranger commid  MSCCLPP_COMM_ID=<ADDR port+4> is set for every rank:
 *                    rank 0's mscclppGetUniqueId must put the root there
 *                    (the strangers dial that port), and the ranks use
 *                    mscclppCommInitRankFromId; a wrong secret is now one
 *                    that does not match the id's.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include "check.h"

#define MAX_LINES 4096
static pthread_mutex_t logMu = PTHREAD_MUTEX_INITIALIZER;
static char* lines[MAX_LINES];
static int nlines;

static void handler(const char* msg)
{
  pthread_mutex_lock(&logMu);
  if (nlines < MAX_LINES)
    lines[nlines++] = strdup(msg ? msg : "(NULL)");
  pthread_mutex_unlock(&logMu);
}

/* WARN lines that speak of a connection (the dropped strangers). */
static int count_warn(void)
{
  int n = 0;
  pthread_mutex_lock(&logMu);
  for (int i = 0; i < nlines; i++)
    if (strstr(lines[i], "MSCCLPP WARN") != NULL && test_stristr(lines[i], "connection") != NULL)
      n++;
  pthread_mutex_unlock(&logMu);
  return n;
}

static int rootPort;

/* Connect to the root, retrying while it is not listening yet (10 s). */
static int dial(void) { return test_dial_local(rootPort, 10, 2); }

/* Send what we can: the root closing on us, or 2 s without progress, is fine. */
static void send_some(int s, const void* p, size_t n) { (void)test_send_all(s, p, n); }

/* After sending: does the root close the connection within sec seconds? */
static const char* closed_within(int s, double sec)
{
  double deadline = test_now() + sec;
  char tmp[4096];
  while (test_now() < deadline) {
    struct pollfd p = {s, POLLIN, 0};
    int n = poll(&p, 1, 50);
    if (n > 0) {
      ssize_t r = recv(s, tmp, sizeof tmp, 0);
      if (r == 0)
        return "closed by the root";
      if (r < 0)
        return "reset by the root";
      /* data: ignore, keep reading */
    }
  }
  return "still open";
}

static int held[4];
static int nheld;
static int strangerFailures;

static void* stranger(void* unused)
{
  (void)unused;
  unsigned seed = (unsigned)getpid();
  int s;

  if ((s = dial()) < 0) {
    printf("stranger: could not connect to the root's port at all\n");
    strangerFailures++;
    return NULL;
  }
  close(s);
  printf("stranger 1: connected and closed at once\n");

  if ((s = dial()) >= 0) {
    const char* http = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
    send_some(s, http, strlen(http));
    printf("stranger 2: sent an HTTP request: %s\n", closed_within(s, 1));
    close(s);
  }

  if ((s = dial()) >= 0) {
    uint8_t junk[128];
    for (size_t i = 0; i < sizeof junk; i++)
      junk[i] = (uint8_t)(rand_r(&seed) >> 7);
    send_some(s, junk, sizeof junk);
    printf("stranger 3: sent 128 random bytes (a wrong secret): %s\n", closed_within(s, 2));
    close(s);
  }

  if ((s = dial()) >= 0) {
    uint8_t big[16];
    memset(big, 0xff, sizeof big);
    send_some(s, big, sizeof big);
    printf("stranger 4: sent a huge length prefix and keeps the connection open\n");
    held[nheld++] = s;
  }

  if ((s = dial()) >= 0) {
    size_t n = 1 << 20;
    uint8_t* junk = (uint8_t*)malloc(n);
    for (size_t i = 0; i < n; i++)
      junk[i] = (uint8_t)(i * 131 + 7);
    send_some(s, junk, n);
    free(junk);
    close(s);
    printf("stranger 5: sent 1 MiB of garbage and closed\n");
  }

  if ((s = dial()) >= 0) {
    printf("stranger 6: connected and stays silent\n");
    held[nheld++] = s;
  }

  if (test_publish("strangers.done", "", 0) != 0) {
    printf("stranger: cannot publish the marker\n");
    strangerFailures++;
  }
  return NULL;
}

static void allgather_check(mscclppComm_t comm, int rank, int nranks)
{
  enum { SZ = 1000 };
  uint8_t* buf = (uint8_t*)calloc((size_t)nranks, SZ);
  for (int i = 0; i < SZ; i++)
    buf[rank * SZ + i] = (uint8_t)(rank * 77 + i);
  MCHECK_COMM(comm, mscclppBootstrapAllGather(comm, buf, SZ));
  int wrong = 0;
  for (int r = 0; r < nranks; r++)
    for (int i = 0; i < SZ; i++)
      wrong += buf[r * SZ + i] != (uint8_t)(r * 77 + i);
  if (CHECK(wrong == 0, "AllGather: %d wrong bytes", wrong))
    printf("ok   AllGather after the strangers\n");
  free(buf);
}

int main(int argc, char** argv)
{
  test_init("stranger");
  int commId = argc > 1 && strcmp(argv[1], "commid") == 0;
  rootPort = test_port();
  if (commId) {
    const char* cid = getenv("MSCCLPP_COMM_ID");
    REQUIRE(cid != NULL && strrchr(cid, ':') != NULL, "run with MSCCLPP_COMM_ID=127.0.0.1:PORT");
    rootPort = atoi(strrchr(cid, ':') + 1);
    printf("MSCCLPP_COMM_ID=%s: the strangers dial port %d\n", cid, rootPort);
  }
  signal(SIGPIPE, SIG_IGN);
  int rank = test_rank(), nranks = test_nranks();
  REQUIRE(nranks >= 2, "run with N >= 2");
  const char* dbg = getenv("MSCCLPP_DEBUG");
  REQUIRE(dbg != NULL && test_stristr(dbg, "WARN") == dbg, "run with MSCCLPP_DEBUG=WARN (it is %s)",
          dbg ? dbg : "unset");
  MCHECK(mscclppSetBootstrapConnTimeout(20));

  mscclppComm_t comm = NULL;
  mscclppUniqueId id;
  memset(&id, 0, sizeof id);
  double t0 = test_now();
  if (rank == 0) {
    MCHECK(mscclppSetLogHandler(handler));
    if (commId) {
      MCHECK(mscclppGetUniqueId(&id));
      REQUIRE(test_publish_id("uid", &id) == 0, "publish the id");
    }
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, stranger, NULL) == 0, "pthread_create");
    if (commId)
      MCHECK(mscclppCommInitRankFromId(&comm, nranks, id, rank));
    else
      MCHECK(mscclppCommInitRank(&comm, nranks, test_addr(), rank));
    pthread_join(th, NULL);
    CHECK(strangerFailures == 0, "the stranger thread failed");
  } else {
    REQUIRE(test_wait_file("strangers.done", 20) == 0, "rank 0's strangers did not finish in 20 s");
    if (commId)
      REQUIRE(test_fetch_id("uid", &id, 5) == 0, "no id from rank 0");
    t0 = test_now();
    if (commId)
      MCHECK(mscclppCommInitRankFromId(&comm, nranks, id, rank));
    else
      MCHECK(mscclppCommInitRank(&comm, nranks, test_addr(), rank));
  }
  double dt = test_now() - t0;
  printf("ok   communicator formed (%.2f s since %s)\n", dt, rank == 0 ? "rank 0's init" : "the strangers finished");
  CHECK(dt < 10, "init took %.2f s: strangers must not hold the root up", dt);
  allgather_check(comm, rank, nranks);
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));

  if (rank == 0) {
    double deadline = test_now() + 5;
    while (count_warn() == 0 && test_now() < deadline)
      test_pause_ms(10);
    int warns = count_warn();
    pthread_mutex_lock(&logMu);
    for (int i = 0; i < nlines; i++) {
      size_t len = strlen(lines[i]);
      printf("log: %s%s", lines[i], len && lines[i][len - 1] == '\n' ? "" : "\n");
      CHECK(len > 0 && lines[i][len - 1] == '\n', "log line %d does not end in a newline", i);
    }
    pthread_mutex_unlock(&logMu);
    CHECK(warns > 0, "no \"MSCCLPP WARN\" line about a (dropped) connection reached the log handler");
    if (warns)
      printf("ok   %d WARN line(s) seen by the log handler\n", warns);
    for (int i = 0; i < nheld; i++)
      close(held[i]);
    MCHECK(mscclppSetLogHandler(NULL));
  }
  MCHECK(mscclppCommDestroy(comm));
  return test_finish();
}
