/*
 * linkfault.cc: a lost link or a stopped peer during Ethernet transfers across
 * simulated nodes (run by run_multinode.sh through cluster.sh).
 *
 *   linkfault FAULT [--at K] [--rounds N] [--by R] [--victim R] [--host LIST]
 *             [--bounded LIST] [--small LIST] [--pause MS] [--timeout S]
 *
 * Every rank connects to every other over mscclppTransportEthernet (or the
 * transport MSCCLPP_TEST_TRANSPORT names, e.g. ib over the IB double) and runs
 * rounds: it puts its chunk (16 MiB, 4 KiB for the ranks of --small) with a
 * signal into every peer's buffer -- on the calling thread for the ranks of
 * --host (mscclppDevConnPutWithSignal), else pushed into the FIFO for the
 * proxy -- then waits for every peer's signal -- mscclppDevConnWaitTimeout
 * (30 s) for the ranks of --bounded, else the C++ wait() with no deadline --
 * and checks every byte. After round K (default 2) rank R (--by) injects
 * FAULT:
 *   link      `ip link set eth0 down` in R's node (default R: the last rank)
 *   stop      SIGSTOP to --victim (default the last rank; R defaults to 0)
 *   stopcont  SIGSTOP, then SIGCONT after --pause ms (default 1000)
 *   flap      link down, then up after --pause ms
 *   none      nothing
 * For link and stop every rank (but the victim) must fail with
 * mscclppRemoteError and a message naming a rank it can no longer reach, or
 * a survivor that failed and destroyed before it (a remote error is sticky
 * per connection: a wait on a live peer ends when that peer goes), within
 * the bootstrap timeout (--timeout, default 2 s) plus 1.5 s of the fault,
 * and mscclppCommDestroy, called at once, must return within 1 s. For stopcont, flap
 * and none every round must complete with every byte right. The stopped
 * victim is SIGKILLed by R at the end (run it with --expect-fail VICTIM).
 * The ranks meet through files in MSCCLPP_TEST_DIR (every node sees it): also
 * before init and before the setup, so that the short bootstrap timeout,
 * meant for the fault, is not spent on a rank lagging behind on a loaded
 * machine.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../c/transports/suite_util.h"

#include <math.h>
#include <pthread.h>

#include <string>
#include <vector>

static const size_t kBig = 16u << 20, kSmall = 4096;

struct Opts {
  std::string fault;
  int at = 2, rounds = 6, by = -1, victim = -1, pauseMs = 1000, timeoutS = 2;
  std::vector<bool> host, bounded, small;
};

static std::vector<bool> rankSet(const char* list, int n)
{
  std::vector<bool> v(n, false);
  for (const char* p = list; *p;) {
    int r = atoi(p);
    if (r >= 0 && r < n) v[r] = true;
    p = strchr(p, ',');
    if (p == nullptr) break;
    p++;
  }
  return v;
}

static bool parse(int argc, char** argv, int n, Opts* o)
{
  if (argc < 2) return false;
  o->fault = argv[1];
  o->host = o->bounded = o->small = std::vector<bool>(n, false);
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--at") o->at = atoi(v);
    else if (k == "--rounds") o->rounds = atoi(v);
    else if (k == "--by") o->by = atoi(v);
    else if (k == "--victim") o->victim = atoi(v);
    else if (k == "--pause") o->pauseMs = atoi(v);
    else if (k == "--timeout") o->timeoutS = atoi(v);
    else if (k == "--host") o->host = rankSet(v, n);
    else if (k == "--bounded") o->bounded = rankSet(v, n);
    else if (k == "--small") o->small = rankSet(v, n);
    else return false;
  }
  bool stop = o->fault == "stop" || o->fault == "stopcont";
  if (o->victim < 0) o->victim = n - 1;
  if (o->by < 0) o->by = stop ? 0 : n - 1;
  return o->fault == "link" || o->fault == "flap" || o->fault == "none" || stop;
}

static std::string path(const char* what, int rank)
{
  const char* dir = getenv("MSCCLPP_TEST_DIR");
  return std::string(dir ? dir : "/tmp") + "/linkfault." + what + "." + std::to_string(rank);
}

static void writeNum(const std::string& p, double v)
{
  std::string tmp = p + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  fprintf(f, "%.9f\n", v);
  fclose(f);
  rename(tmp.c_str(), p.c_str());
}

static bool readNum(const std::string& p, double* v)
{
  FILE* f = fopen(p.c_str(), "r");
  if (f == nullptr) return false;
  bool ok = fscanf(f, "%lf", v) == 1;
  fclose(f);
  return ok;
}

struct Later {
  int ms;
  std::string cmd;
  int pid;
};

/* SIGCONT or link up, pauseMs after the fault, from a thread of the injecting rank. */
static void* later(void* arg)
{
  Later* l = (Later*)arg;
  su_sleep_ms(l->ms);
  if (l->pid > 0) kill(l->pid, SIGCONT);
  if (!l->cmd.empty() && system(l->cmd.c_str()) != 0) printf("linkfault rank %d: '%s' failed\n", su_rank, l->cmd.c_str());
  return nullptr;
}

static void inject(const Opts& o, const std::vector<int>& pids, pthread_t* th, Later* l)
{
  writeNum(path("fault", 0), su_now());
  if (o.fault == "link" || o.fault == "flap") {
    SU_REQUIRE(system("ip link set eth0 down") == 0, "ip link set eth0 down failed");
    if (o.fault == "flap") *l = {o.pauseMs, "ip link set eth0 up", 0};
  } else {
    SU_REQUIRE(kill(pids[o.victim], SIGSTOP) == 0, "SIGSTOP to rank %d: %s", o.victim, strerror(errno));
    if (o.fault == "stopcont") *l = {o.pauseMs, "", pids[o.victim]};
  }
  printf("linkfault rank %d: %s injected after round %d\n", su_rank, o.fault.c_str(), o.at);
  if (o.fault == "flap" || o.fault == "stopcont") SU_REQUIRE(pthread_create(th, nullptr, later, l) == 0, "thread");
}

/* One round: put my chunk with a signal to every peer, wait for every peer's, check the bytes.
 * Returns mscclppSuccess or the first failure's code. */
static mscclppResult_t exchange(const Opts& o, int it, char* buf, std::vector<mscclppDevConn_t*>& conn)
{
  int n = su_nranks, me = su_rank;
  size_t half = (size_t)n * kBig, mine = o.small[me] ? kSmall : kBig;
  size_t off = (size_t)(it & 1) * half + (size_t)me * kBig;
  su_fill(buf + off, mine, su_seed(it, me, 7));
  for (int k = 1; k < n; k++) {
    mscclppDevConn_t* c = conn[(me + k) % n];
    if (o.host[me]) {
      mscclppResult_t r = mscclppDevConnPutWithSignal(c, off, off, mine);
      if (r != mscclppSuccess) return r;
    } else if (c->fifo.push(mscclppData | mscclppFlag, off, off, mine) == MSCCLPP_FIFO_PUSH_FAILED) {
      return mscclppInternalError;
    }
  }
  for (int k = 1; k < n; k++) {
    mscclppDevConn_t* c = conn[(me + n - k) % n];
    if (o.bounded[me]) {
      mscclppResult_t r = mscclppDevConnWaitTimeout(c, 30000);
      if (r != mscclppSuccess) return r;
    } else {
      c->wait();
      if (c->localSignalEpochId->proxy < *c->waitEpochId) {
        mscclppResult_t a = mscclppSuccess;
        mscclppCommGetAsyncError(su_comm, &a);
        return a == mscclppSuccess ? mscclppInternalError : a;
      }
    }
  }
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    size_t b = (size_t)(it & 1) * half + (size_t)p * kBig;
    su_verify(buf + b, o.small[p] ? kSmall : kBig, su_seed(it, p, 7), "round");
  }
  return mscclppSuccess;
}

/* The node of every rank (MSCCLPP_TEST_PLACEMENT, from cluster.sh; else all on node 0). */
static std::vector<int> placement(int n)
{
  std::vector<int> node(n, 0);
  const char* p = getenv("MSCCLPP_TEST_PLACEMENT");
  for (int r = 0; p != nullptr && *p && r < n; r++) {
    node[r] = atoi(p);
    p = strchr(p, ',');
    if (p != nullptr) p++;
  }
  return node;
}

/* Whether msg names "rank X" for an X in want (not followed by another digit). */
static bool namesRank(const char* msg, const std::vector<bool>& want)
{
  for (const char* p = msg; (p = strstr(p, "rank ")) != nullptr; p += 5) {
    char* end;
    long r = strtol(p + 5, &end, 10);
    if (end != p + 5 && r >= 0 && r < (long)want.size() && want[r]) return true;
  }
  return false;
}

/* Waits (bounded) until every rank of who wrote its file what; false on timeout. */
static bool meet(const char* what, const std::vector<bool>& who, double seconds)
{
  double end = su_now() + seconds, v;
  for (size_t r = 0; r < who.size(); r++)
    while (who[r] && !readNum(path(what, (int)r), &v)) {
      if (su_now() > end) return false;
      su_sleep_ms(10);
    }
  return true;
}

/* Writes this rank's what file and waits (60 s at most) until every rank of who wrote its own. */
static void meetAll(const char* what, const std::vector<bool>& who)
{
  writeNum(path(what, su_rank), su_now());
  SU_REQUIRE(meet(what, who, 60), "not every rank reached '%s' within 60 s", what);
}

/* When the fault was injected (CLOCK_MONOTONIC, the same on every simulated node), or NAN
 * when none was: a round failed before it, a false alarm. */
static double faultTime(void)
{
  double t = 0;
  if (readNum(path("fault", 0), &t)) return t;
  SU_CHECK(false, "a round failed before the fault was injected: a live peer was taken for lost");
  return NAN;
}

/* The failure of round it after a lost link or peer: mscclppRemoteError (the round's result r,
 * or the async error a behind a refused push), a message naming an unreachable rank, within
 * bound seconds of the fault. */
static void checkFailure(const Opts& o, mscclppResult_t r, mscclppResult_t a, int it, double dt, double bound,
                         const std::string& msg, const std::vector<bool>& lost)
{
  printf("linkfault rank %d: %s after %.2f s from the %s (bound %.1f s), async %s: \"%s\"\n", su_rank,
         mscclppGetErrorString(r), dt, o.fault.c_str(), bound, mscclppGetErrorString(a), msg.c_str());
  SU_CHECK(r == mscclppRemoteError || (r == mscclppInternalError && a == mscclppRemoteError),
           "round %d returned %s, want remote error", it, mscclppGetErrorString(r));
  SU_CHECK(a == mscclppRemoteError, "async error %s, want remote error", mscclppGetErrorString(a));
  SU_CHECK(namesRank(msg.c_str(), lost), "the message names no unreachable rank: \"%s\"", msg.c_str());
  SU_CHECK(isnan(dt) || dt <= bound, "the failure took %.2f s, bound %.1f s", dt, bound); /* nan: no fault (checked) */
}

int main(int argc, char** argv)
{
  su_init("linkfault");
  Opts o;
  int n = su_nranks, me = su_rank;
  if (!parse(argc, argv, n, &o)) {
    printf("usage: linkfault link|stop|stopcont|flap|none [--at K] [--rounds N] [--by R] [--victim R] "
           "[--host LIST] [--bounded LIST] [--small LIST] [--pause MS] [--timeout S]\n");
    return 2;
  }
  bool expectFail = o.fault == "link" || o.fault == "stop";
  SU_CK(mscclppSetBootstrapConnTimeout(o.timeoutS));
  /* The short bootstrap timeout is for the fault; before it, the ranks meet through files
   * (no timeout of the library) wherever one may lag on a loaded machine: at the start (a
   * process started late) and before the setup (a slow 2 x n x 16 MiB memset). */
  std::vector<bool> all(n, true);
  meetAll("started", all);
  su_comm_init();
  std::vector<int> pids(n, 0);
  pids[me] = (int)getpid();
  SU_CK(mscclppBootstrapAllGather(su_comm, pids.data(), sizeof(int)));
  /* who can no longer be reached by whom: the other node's ranks (and, the link being
   * down, its own node's too), or the stopped victim */
  std::vector<bool> lost(n, false), survivors(n, true);
  std::vector<int> node = placement(n);
  if (o.fault == "link")
    for (int r = 0; r < n; r++) lost[r] = r != me && (node[me] == node[o.by] || node[r] == node[o.by]);
  if (o.fault == "stop") {
    lost[o.victim] = true;
    survivors[o.victim] = false;
  }

  /* Ethernet unless MSCCLPP_TEST_TRANSPORT names another (ib: the IB double, MSCCLPP_TEST_IB_DEV) */
  mscclppTransport_t transport = getenv("MSCCLPP_TEST_TRANSPORT") ? su_transport() : mscclppTransportEthernet;
  char* buf = (char*)malloc(2 * (size_t)n * kBig);
  SU_REQUIRE(buf != nullptr, "malloc");
  memset(buf, 0, 2 * (size_t)n * kBig);
  for (int p = 0; p < n; p++)
    if (p != me) SU_CK(mscclppConnect(su_comm, p, 0, buf, 2 * (size_t)n * kBig, transport, su_ibdev()));
  meetAll("connected", all);
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  std::vector<mscclppDevConn_t*> conn(n, nullptr);
  for (int p = 0; p < n; p++)
    if (p != me) SU_CK(mscclppGetDeviceConnection(su_comm, p, 0, &conn[p]));

  pthread_t th;
  Later l{0, "", 0};
  mscclppResult_t r = mscclppSuccess;
  int it = 0;
  for (; it < o.rounds && r == mscclppSuccess; it++) {
    r = exchange(o, it, buf, conn);
    if (r == mscclppSuccess && it == o.at && me == o.by) inject(o, pids, &th, &l);
  }
  double tErr = su_now();
  if (me == o.by && l.ms > 0) pthread_join(th, nullptr);
  mscclppResult_t a = mscclppSuccess;
  SU_CK(mscclppCommGetAsyncError(su_comm, &a));
  std::string msg = su_lasterr(su_comm);

  if (!expectFail) {
    SU_CHECK(r == mscclppSuccess, "round %d failed with %s: \"%s\"", it - 1, mscclppGetErrorString(r), msg.c_str());
    printf("linkfault rank %d: %d rounds after %s, every byte checked\n", me, it, o.fault.c_str());
    if (r == mscclppSuccess) SU_CK(mscclppProxyStop(su_comm));
    SU_CK(mscclppCommDestroy(su_comm));
    free(buf);
    return su_finish();
  }
  /* A remote error is sticky per connection: a survivor waiting on a live peer that itself
   * failed (and stopped its rounds) learns it when that peer destroys, which it does at once
   * (destroy waits for no peer); its message then names that peer, a survivor, not a lost
   * rank, one hop later. */
  double bound = o.timeoutS + 1.0;
  std::vector<bool> named = lost;
  for (int p = 0; p < n; p++) named[p] = named[p] || (survivors[p] && p != me);
  checkFailure(o, r, a, it - 1, tErr - faultTime(), bound + 0.5, msg, named);
  writeNum(path("failed", me), tErr);
  double t0 = su_now();
  mscclppResult_t d = mscclppCommDestroy(su_comm);
  double tDestroy = su_now() - t0;
  printf("linkfault rank %d: mscclppCommDestroy %s after %.3f s\n", me, mscclppGetErrorString(d), tDestroy);
  SU_CHECK(tDestroy <= 1.0, "mscclppCommDestroy took %.3f s", tDestroy);
  free(buf);
  writeNum(path("destroyed", me), su_now());
  SU_CHECK(meet("failed", survivors, bound + 5), "not every survivor failed");
  if (o.fault == "stop" && me == o.by) {
    SU_CHECK(meet("destroyed", survivors, 10), "not every survivor destroyed its communicator");
    kill(pids[o.victim], SIGKILL);
  }
  return su_finish();
}
