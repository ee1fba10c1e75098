/*
 * fork.c: the library in a forked child (N = 1).
 *
 * After a successful init + AllGather + destroy the process forks. The
 * child (with alarm(10), so a hang is a failure, not a stuck test) calls
 * mscclppCommInitRank, or mscclppGetUniqueId, and must get
 * mscclppInvalidUsage promptly, with a last-error message that mentions
 * fork. Two children, one starting with each call. The parent still works
 * afterwards.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>

#include "check.h"

static void one_rank_round(const char* addr, const char* what)
{
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, 1, addr, 0));
  uint64_t x = 0x1122334455667788ull;
  MCHECK_COMM(comm, mscclppBootstrapAllGather(comm, &x, sizeof x));
  CHECK(x == 0x1122334455667788ull, "AllGather of one rank changed the data");
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppCommDestroy(comm));
  printf("ok   %s: init + AllGather + Barrier + destroy at %s\n", what, addr);
}

/* In the child: returns the exit status. */
static int child(int initFirst)
{
  alarm(10);
  int bad = 0;
  for (int step = 0; step < 2; step++) {
    int doInit = (step == 0) == initFirst;
    double t0 = test_now();
    mscclppResult_t res;
    const char* what;
    if (doInit) {
      mscclppComm_t comm = NULL;
      res = mscclppCommInitRank(&comm, 1, test_addr_plus(3), 0);
      what = "mscclppCommInitRank";
    } else {
      mscclppUniqueId id;
      res = mscclppGetUniqueId(&id);
      what = "mscclppGetUniqueId";
    }
    double dt = test_now() - t0;
    const char* msg = test_last_error(NULL);
    printf("child: %s -> %s after %.2f s: \"%s\"\n", what, mscclppGetErrorString(res), dt, msg);
    if (res != mscclppInvalidUsage) {
      printf("child: FAILED: %s returned %s, expected invalid usage\n", what, mscclppGetErrorString(res));
      bad++;
    }
    if (dt > 2.0) {
      printf("child: FAILED: %s took %.2f s\n", what, dt);
      bad++;
    }
    if (test_stristr(msg, "fork") == NULL) {
      printf("child: FAILED: the last error does not mention fork: \"%s\"\n", msg);
      bad++;
    }
  }
  fflush(stdout);
  return bad ? 1 : 0;
}

static void run_child(int initFirst)
{
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0)
    _exit(child(initFirst));
  int st = 0;
  double deadline = test_now() + 15;
  pid_t w;
  while ((w = waitpid(pid, &st, WNOHANG)) == 0 && test_now() < deadline)
    test_pause_ms(10);
  if (w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    CHECK(0, "the forked child did not finish in 15 s");
    return;
  }
  if (WIFSIGNALED(st))
    CHECK(0, "the forked child died of signal %d%s", WTERMSIG(st),
          WTERMSIG(st) == SIGALRM ? " (SIGALRM: a library call hung in the child)" : "");
  else if (CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked child failed (exit %d)", WEXITSTATUS(st)))
    printf("ok   forked child (%s first): InvalidUsage promptly, message mentions fork\n",
           initFirst ? "CommInitRank" : "GetUniqueId");
}

int main(void)
{
  test_init("fork");
  REQUIRE(test_nranks() == 1, "run with N = 1");
  one_rank_round(test_addr(), "before fork");
  run_child(1);
  run_child(0);
  one_rank_round(test_addr_plus(1), "parent after fork");
  mscclppUniqueId id;
  MCHECK(mscclppGetUniqueId(&id));
  printf("ok   parent after fork: mscclppGetUniqueId\n");
  one_rank_round(test_addr_plus(2), "parent again");
  return test_finish();
}
