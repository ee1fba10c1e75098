/*
 * fault_rank.c: one rank of a fault-injection run (tests/faults), started by
 * tests/c/launch.c, locally or through tests/multinode/cluster.sh.
 *
 *   fault_rank PHASE ACTION VICTIM DELAY_US HOLD_MS [ROUNDS CHUNK WAIT_MS]
 *
 * Every rank: mscclppCommInitRank ("init"), connect to every other rank over
 * MSCCLPP_TEST_TRANSPORT, mscclppConnectionSetup and mscclppProxyLaunch
 * ("setup"), ROUNDS all-to-all rounds of putWithSignal + a wait (WAIT_MS, default
 * 3000; -1: a wait without deadline, which must still end when a peer is
 * lost), the
 * data checked after each ("puts"), then mscclppProxyStop and
 * mscclppCommDestroy ("destroy").
 *
 * Rank VICTIM (ACTION kill|stop|flap) starts a timer thread as it enters
 * PHASE; DELAY_US later the thread
 *   kill: SIGKILLs its own process;
 *   stop: forks a warden, then SIGSTOPs the process; the warden SIGKILLs it
 *         once every other rank has written its done file (so a survivor
 *         that waits for the stopped rank for ever is a hang for the driver);
 *   flap: the same, but the warden sends SIGCONT after HOLD_MS.
 *   destroy: (PHASE puts) the victim calls mscclppCommDestroy itself at round
 *         DELAY_US % ROUNDS of the puts, while its peers are still sending
 *         to it; the destroy must return within DESTROY_BOUND_MS whatever
 *         they do (else a wrong result), and the peers see mscclppRemoteError
 *         (or a bounded wait's mscclppInProgress), never a crash.
 * ACTION none: no rank is hurt (the driver may take a link down instead).
 * The driver's self-test (controls that must be caught) uses two more:
 *   segv: the timer SIGSEGVs the victim (a crash);
 *   corrupt: the victim sends wrong bytes in the middle round of the puts.
 *
 * A survivor must succeed or fail with mscclppRemoteError (a bounded wait
 * may also end with mscclppInProgress), then still destroy its communicator.
 * Exit status: 0 as expected, 3 wrong bytes in a completed round, 4 a wrong
 * result code. Each rank prints "FAULT rank R: ..." lines the driver reads,
 * and writes $MSCCLPP_TEST_DIR/done.R at the end.
 */
#define _GNU_SOURCE
#include "../c/transports/suite_util.h"

#include <pthread.h>
#include <sys/wait.h>

static const char* phaseName = "none";
static const char* action = "none";
static int victim = -1;
static long delayUs, holdMs;
static int wrongCode, wrongBytes, errors;
static double phaseStart[5];
static int nphase;

/* The warden: a child that ends the stop of its parent: SIGCONT after holdMs
 * (flap), else SIGKILL once every survivor's done file exists. It makes only
 * async-signal-safe calls (the parent is multi-threaded): paths are made
 * before the fork. */
static char donePath[64][512];

static void warden(pid_t parent, int flap)
{
  for (long waited = 0;; waited += 10) {
    su_sleep_ms(10);
    if (flap && waited >= holdMs) {
      kill(parent, SIGCONT);
      _exit(0);
    }
    if (flap) continue;
    int done = 1;
    for (int r = 0; r < su_nranks && r < 64 && done; r++)
      if (r != su_rank) done = access(donePath[r], F_OK) == 0;
    if (done) {
      kill(parent, SIGKILL);
      _exit(0);
    }
  }
}

static void* injector(void* arg)
{
  (void)arg;
  su_sleep_ms((int)(delayUs / 1000));
  struct timespec ts = {0, (delayUs % 1000) * 1000};
  nanosleep(&ts, NULL);
  printf("FAULT rank %d: %s now (phase %s + %ld us)\n", su_rank, action, phaseName, delayUs);
  fflush(stdout);
  if (strcmp(action, "kill") == 0) kill(getpid(), SIGKILL);
  if (strcmp(action, "segv") == 0) kill(getpid(), SIGSEGV);
  const char* dir = getenv("MSCCLPP_TEST_DIR");
  for (int r = 0; r < su_nranks && r < 64; r++)
    snprintf(donePath[r], sizeof donePath[r], "%s/done.%d", dir ? dir : "/nonexistent", r);
  pid_t parent = getpid();
  pid_t w = fork();
  if (w == 0) warden(parent, strcmp(action, "flap") == 0);
  if (w > 0) kill(parent, SIGSTOP);
  return NULL;
}

/* Entering phase p: the victim arms its fault. */
static void enter(const char* p)
{
  if (nphase < 4) phaseStart[nphase++] = su_now();
  printf("FAULT rank %d: enters %s\n", su_rank, p); /* where a hung rank was */
  if (su_rank != victim || strcmp(p, phaseName) != 0 || strcmp(action, "none") == 0 || strcmp(action, "corrupt") == 0 ||
      strcmp(action, "destroy") == 0)
    return;
  pthread_t t;
  if (pthread_create(&t, NULL, injector, NULL) == 0) pthread_detach(t);
}

/* A result of a call while a fault may be on: success, or an allowed error
 * (counted, printed); a wrong code is counted as such. Returns 1 on success. */
static int judge(mscclppResult_t r, const char* what, int waitCall)
{
  if (r == mscclppSuccess) return 1;
  const char* msg = su_lasterr(su_comm);
  if (su_comm == NULL || *msg == '\0') msg = su_lasterr(NULL);
  int ok = r == mscclppRemoteError || (waitCall && r == mscclppInProgress);
  /* a RemoteError should name the rank hurt (noted, not failed: in a job of
   * three, a survivor may rightly name the other survivor that gave up first) */
  char name[32];
  snprintf(name, sizeof name, "rank %d", victim);
  int unnamed = r == mscclppRemoteError && victim >= 0 && victim != su_rank && strstr(msg, name) == NULL;
  printf("FAULT rank %d: %s: %s%s%s: \"%s\"\n", su_rank, what, mscclppGetErrorString(r), ok ? "" : " WRONG-CODE",
         unnamed ? " UNNAMED" : "", msg);
  if (!ok) wrongCode++;
  errors++;
  return 0;
}

static void finish(void)
{
  const char* dir = getenv("MSCCLPP_TEST_DIR");
  if (dir != NULL) {
    char path[512];
    snprintf(path, sizeof path, "%s/done.%d", dir, su_rank);
    FILE* f = fopen(path, "w");
    if (f) fclose(f);
  }
  phaseStart[nphase] = su_now();
  printf("FAULT rank %d: end errors=%d wrongcode=%d wrongbytes=%d; ms in phases:", su_rank, errors, wrongCode, wrongBytes);
  for (int i = 0; i < nphase; i++) printf(" %.0f", (phaseStart[i + 1] - phaseStart[i]) * 1e3);
  printf("\n");
  fflush(stdout);
  exit(wrongBytes ? 3 : wrongCode ? 4 : 0);
}

/* A destroy waits for no peer: generous against load, far below the seconds of one that waits. */
#define DESTROY_BOUND_MS 1000.0

/* The victim of ACTION destroy destroys its communicator at round it of the puts, its peers
 * still sending to it; 1 when it did (the puts are over for it). */
static int destroy_now(int it, int rounds)
{
  if (su_rank != victim || strcmp(action, "destroy") != 0 || it != (int)(delayUs % rounds)) return 0;
  printf("FAULT rank %d: destroy now (phase puts + round %d)\n", su_rank, it);
  fflush(stdout);
  double t0 = su_now();
  judge(mscclppCommDestroy(su_comm), "mscclppCommDestroy mid-puts", 0);
  double ms = (su_now() - t0) * 1e3;
  su_comm = NULL;
  int slow = ms > DESTROY_BOUND_MS;
  printf("FAULT rank %d: destroy mid-puts took %.1f ms%s\n", su_rank, ms, slow ? " WRONG-CODE (it waited for a peer)" : "");
  if (slow) wrongCode++;
  return 1;
}

/* ROUNDS all-to-all rounds; 0 when a call failed (or this rank destroyed its communicator). */
static int puts_phase(mscclppDevConn_t** conn, char* buf, int rounds, size_t chunk, int64_t waitMs)
{
  int n = su_nranks, me = su_rank;
  for (int it = 0; it < rounds; it++) {
    if (destroy_now(it, rounds)) return 0;
    size_t base = (size_t)(it & 1) * n * chunk + (size_t)me * chunk;
    int corrupt = me == victim && it == rounds / 2 && strcmp(action, "corrupt") == 0;
    su_fill(buf + base, chunk, su_seed(it, me, 12) + (uint64_t)corrupt);
    for (int k = 1; k < n; k++)
      if (!judge(mscclppDevConnPutWithSignal(conn[(me + k) % n], base, base, chunk), "putWithSignal", 0)) return 0;
    for (int k = 1; k < n; k++)
      if (!judge(mscclppDevConnWaitTimeout(conn[(me + n - k) % n], waitMs), "wait", 1)) return 0;
    for (int p = 0; p < n; p++) {
      size_t b = (size_t)(it & 1) * n * chunk + (size_t)p * chunk;
      wrongBytes += su_verify(buf + b, chunk, su_seed(it, p, 12), "round") != 0;
    }
  }
  return 1;
}

int main(int argc, char** argv)
{
  su_init("fault");
  if (argc < 6) {
    printf("usage: fault_rank PHASE ACTION VICTIM DELAY_US HOLD_MS [ROUNDS CHUNK WAIT_MS]\n");
    return 2;
  }
  phaseName = argv[1];
  action = argv[2];
  victim = atoi(argv[3]);
  delayUs = atol(argv[4]);
  holdMs = atol(argv[5]);
  int rounds = argc > 6 ? atoi(argv[6]) : 20;
  size_t chunk = argc > 7 ? (size_t)atol(argv[7]) : 65536;
  int64_t waitMs = argc > 8 ? atoll(argv[8]) : 3000;
  int n = su_nranks, me = su_rank;
  printf("FAULT rank %d: pid %d\n", me, (int)getpid());
  SU_CK(mscclppSetBootstrapConnTimeout(3));

  enter("init");
  if (!judge(mscclppCommInitRank(&su_comm, n, su_addr, me), "mscclppCommInitRank", 0)) finish();

  enter("setup");
  size_t S = 2 * (size_t)n * chunk;
  char* buf = NULL;
  mscclppDevConn_t* conn[64] = {0};
  int launched = 0;
  SU_CK(mscclppHostAlloc((void**)&buf, S));
  memset(buf, 0, S);
  int ok = 1;
  for (int p = 0; p < n && ok; p++)
    if (p != me) ok = judge(mscclppConnect(su_comm, p, 0, buf, S, su_transport(), su_ibdev()), "mscclppConnect", 0);
  ok = ok && judge(mscclppConnectionSetup(su_comm), "mscclppConnectionSetup", 0);
  ok = ok && (launched = judge(mscclppProxyLaunch(su_comm), "mscclppProxyLaunch", 0));
  for (int p = 0; p < n && ok; p++)
    if (p != me) ok = judge(mscclppGetDeviceConnection(su_comm, p, 0, &conn[p]), "mscclppGetDeviceConnection", 0);

  if (ok) {
    enter("puts");
    ok = puts_phase(conn, buf, rounds, chunk, waitMs);
  }

  enter("destroy");
  if (su_comm != NULL) { /* else destroyed mid-puts (ACTION destroy) */
    if (launched) judge(mscclppProxyStop(su_comm), "mscclppProxyStop", 0);
    judge(mscclppCommDestroy(su_comm), "mscclppCommDestroy", 0);
    su_comm = NULL;
  }
  SU_CK(mscclppHostFree(buf));
  finish();
  return 0;
}
