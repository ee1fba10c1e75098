/*
 * fork.c: the library in a forked child (N = 1).
 *
 * After a successful init + AllGather + destroy the process forks. The
 * child (with alarm(10), so a hang is a failure, not a stuck test) calls
 * mscclppCommInitRank, or mscclppGetUniqueId, and must get
 * mscclppInvalidUsage promptly, with a last-error message that mentions
 * fork. Two children, one starting with each call. The parent still works
 * afterwards.
 *
 *   fork datapath (N = 2): after setting up an SHM connection (proxy
 *   running) each rank forks; in the child every data-path entry point
 *   (mscclppConnOp, mscclppConnPutHandle, mscclppConnWait,
 *   mscclppConnWaitNext, mscclppConnEpochIncrement, mscclppFifoPush,
 *   mscclppFifoWaitServed) must fail at once (InvalidUsage,
 *   MSCCLPP_FIFO_PUSH_FAILED) with a message that mentions fork, and write
 *   nothing into the peer; the parents' connection still works afterwards.
 *
 *   fork exec (N = 2): with connections over SHM (a malloc buffer and an
 *   mscclppHostAlloc one) and Ethernet set up and the proxies running, each
 *   rank forks and execs `ls -l /proc/self/fd/`, which lists the child's
 *   descriptors: every one the library opened must be close-on-exec,
 *   so the child may hold only what the process held before its first
 *   library call.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "mscclppfifo.h"

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

enum { DP_SZ = 4096, DP_LAND = 2048, DP_PUT = 64 };

/* One data-path call's result in the child: want, promptly, with a message about fork. */
static int child_expect(const char* what, long long got, long long want, double dt)
{
  const char* msg = test_last_error(NULL);
  printf("child: %s -> %lld after %.3f s: \"%s\"\n", what, got, dt, msg);
  int bad = 0;
  if (got != want) printf("child: FAILED: %s returned %lld, want %lld\n", what, got, want), bad++;
  if (dt > 2.0) printf("child: FAILED: %s took %.2f s\n", what, dt), bad++;
  if (test_stristr(msg, "fork") == NULL) printf("child: FAILED: %s's last error does not mention fork\n", what), bad++;
  return bad;
}

#define CHILD_CALL(call, want)                                                    \
  do {                                                                            \
    (void)mscclppSetBootstrapConnTimeout(-1); /* a message that is not about fork */ \
    double t0_ = test_now();                                                      \
    long long got_ = (long long)(call);                                           \
    bad += child_expect(#call, got_, (long long)(want), test_now() - t0_);        \
  } while (0)

static int datapath_child(mscclppDevConn_t* dc)
{
  alarm(10);
  int bad = 0;
  uint64_t epoch = dc->localSignalEpochId->device;
  CHILD_CALL(mscclppConnOp(dc, mscclppData | mscclppFlag, DP_LAND, 0, DP_PUT), mscclppInvalidUsage);
  CHILD_CALL(mscclppConnPutHandle(dc, 1, DP_LAND, 1, 0, DP_PUT), mscclppInvalidUsage);
  CHILD_CALL(mscclppConnWait(dc, 0), mscclppInvalidUsage);
  CHILD_CALL(mscclppConnWaitNext(dc, -1), mscclppInvalidUsage);
  CHILD_CALL(mscclppFifoPush(&dc->fifo, mscclppData | mscclppFlag, DP_LAND, 0, DP_PUT), MSCCLPP_FIFO_PUSH_FAILED);
  CHILD_CALL(mscclppFifoWaitServed(&dc->fifo, 0), mscclppInvalidUsage);
  (void)mscclppSetBootstrapConnTimeout(-1);
  mscclppConnEpochIncrement(dc);
  bad += child_expect("mscclppConnEpochIncrement(dc) [epoch changes: 0 = none]",
                      (long long)(dc->localSignalEpochId->device - epoch), 0, 0);
  fflush(stdout);
  return bad ? 1 : 0;
}

static int datapath(void)
{
  const int rank = test_rank(), peer = 1 - rank;
  uint8_t* buf = (uint8_t*)calloc(1, DP_SZ);
  memset(buf, 0x3c, DP_LAND);
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, 2, test_addr(), rank));
  MCHECK_COMM(comm, mscclppConnect(comm, peer, 0, buf, DP_SZ, mscclppTransportSHM, NULL));
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  MCHECK_COMM(comm, mscclppProxyLaunch(comm));
  mscclppDevConn_t* dc = NULL;
  MCHECK_COMM(comm, mscclppGetDeviceConnection(comm, peer, 0, &dc));
  /* a push served in the parent, so that seq 0 is a real one in the child */
  uint64_t seq = mscclppFifoPush(&dc->fifo, mscclppSync, 0, 0, 1);
  REQUIRE(seq == 0, "the parent's first push returned %llu", (unsigned long long)seq);
  MCHECK((mscclppResult_t)mscclppFifoWaitServed(&dc->fifo, seq));
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) _exit(datapath_child(dc));
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
  if (WIFSIGNALED(st))
    CHECK(0, "the forked child died of signal %d%s", WTERMSIG(st), WTERMSIG(st) == SIGALRM ? " (a call hung)" : "");
  else if (CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked child failed (exit %d)", WEXITSTATUS(st)))
    printf("ok   forked child: every data-path call InvalidUsage / MSCCLPP_FIFO_PUSH_FAILED, promptly, about fork\n");
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  int clean = 1;
  for (int i = 0; i < DP_PUT; i++) clean &= buf[DP_LAND + i] == 0;
  CHECK(clean, "the peer's forked child wrote into this rank's buffer");
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm)); /* both have looked before the next put */
  /* the parents still work */
  MCHECK(mscclppConnOp(dc, mscclppData | mscclppFlag, DP_LAND, 0, DP_PUT));
  MCHECK(mscclppConnWaitNext(dc, 10000));
  CHECK(buf[DP_LAND] == 0x3c && buf[DP_LAND + DP_PUT - 1] == 0x3c, "the parent's put did not arrive");
  MCHECK_COMM(comm, mscclppProxyStop(comm));
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppCommDestroy(comm));
  free(buf);
  return test_finish();
}

enum { MAX_FDS = 4096 };

/* Marks in open[] the descriptors this process holds now. */
static void held_fds(char* open)
{
  memset(open, 0, MAX_FDS);
  DIR* d = opendir("/proc/self/fd");
  REQUIRE(d != NULL, "opendir /proc/self/fd: %s", strerror(errno));
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] != '.' && fd != dirfd(d) && fd < MAX_FDS) open[fd] = 1;
  }
  closedir(d);
}

static int exec_check(void)
{
  const int rank = test_rank(), peer = 1 - rank;
  static char before[MAX_FDS];
  held_fds(before);
  enum { SZ = 1 << 16 };
  void* raw = calloc(1, SZ);
  void* shared = NULL;
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, 2, test_addr(), rank));
  MCHECK(mscclppHostAlloc(&shared, SZ));
  MCHECK_COMM(comm, mscclppConnect(comm, peer, 0, raw, SZ, mscclppTransportSHM, NULL));
  MCHECK_COMM(comm, mscclppConnect(comm, peer, 1, shared, SZ, mscclppTransportSHM, NULL));
  MCHECK_COMM(comm, mscclppConnect(comm, peer, 2, raw, SZ, mscclppTransportEthernet, NULL));
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  MCHECK_COMM(comm, mscclppProxyLaunch(comm));
  mscclppDevConn_t* all = NULL;
  int n = 0;
  MCHECK_COMM(comm, mscclppGetAllDeviceConnections(comm, &all, &n));
  for (int i = 0; i < n; i++) { /* a put and a wait on each: every lazy descriptor is open */
    MCHECK(mscclppConnOp(&all[i], mscclppData | mscclppFlag, 0, 0, 64));
    MCHECK(mscclppConnWaitNext(&all[i], 10000));
  }
  fflush(stdout);
  int pipefd[2];
  REQUIRE(pipe2(pipefd, O_CLOEXEC) == 0, "pipe2: %s", strerror(errno));
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    dup2(pipefd[1], 1);
    /* ls, not a program that loads the library (whose own descriptors would be listed) */
    execl("/bin/ls", "ls", "-l", "/proc/self/fd/", (char*)NULL);
    _exit(127);
  }
  close(pipefd[1]);
  FILE* in = fdopen(pipefd[0], "r");
  char line[700];
  int held = 0, leaked = 0;
  while (fgets(line, sizeof line, in) != NULL) { /* "lrwx------ 1 u g 64 date N -> target" */
    char* arrow = strstr(line, " -> ");
    if (arrow == NULL) continue; /* "total 0" */
    char* num = arrow;
    while (num > line && num[-1] != ' ') num--;
    int fd = atoi(num);
    const char* target = arrow + 4;
    if (strncmp(target, "/proc/", 6) == 0 && strstr(target, "/fd\n") != NULL) continue; /* ls's own directory */
    held++;
    if (fd > 2 && (fd >= MAX_FDS || !before[fd])) {
      leaked++;
      printf("leaked into the exec'd child: fd %d -> %s", fd, target);
    }
  }
  fclose(in);
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the exec'd child failed (status %d)", st);
  if (CHECK(held >= 3 && leaked == 0, "the exec'd child holds %d descriptor(s) the library opened (%d listed)", leaked, held))
    printf("ok   exec'd child after SHM and Ethernet connections: %d descriptors, none of the library's\n", held);
  MCHECK_COMM(comm, mscclppProxyStop(comm));
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppCommDestroy(comm));
  MCHECK(mscclppHostFree(shared));
  free(raw);
  return test_finish();
}

int main(int argc, char** argv)
{
  test_init("fork");
  if (argc > 1 && strcmp(argv[1], "exec") == 0) {
    REQUIRE(test_nranks() == 2, "run with N = 2");
    return exec_check();
  }
  if (argc > 1 && strcmp(argv[1], "datapath") == 0) {
    REQUIRE(test_nranks() == 2, "run with N = 2");
    return datapath();
  }
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
