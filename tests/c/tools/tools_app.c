/*
 * tools_app.c: the application side of the tool cases (run_tools.sh). It
 * links only -lmscclpp and includes mscclpp_tools.h; argv[1] picks a case:
 *
 *   api      the registration interface: bad input, names, GetNext, two
 *            layers the program registers itself (order, replacement),
 *            contexts, the layer limit (run with no MSCCLPP_TOOLS)
 *   calls    a few plain calls whose results must be the library's
 *            (mscclppGetVersion, mscclppCommRank(NULL), mscclppGetErrorString)
 *   short    mscclppCommRank(NULL, &r) answers success and 42 (testtool short)
 *   change   changed arguments and results (testtool change)
 *   badpath  the library works and the last error names MSCCLPP_TOOLS
 *   threads  8 threads call the API while main registers one more layer
 *   comm     a real communicator: init, rank, size, allgather, barrier, the
 *            on-demand report (mscclppCommReport), destroy
 *   fork     a forked child's calls fail before any tool sees them
 *
 * With TOOLS_APP_CTOR=1 a constructor of this program registers a layer
 * "app" that logs mscclppGetVersion like testtool's log mode, so it sits
 * below the MSCCLPP_TOOLS layers. Results are checked here; the lines the
 * tools print are checked by run_tools.sh.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/wait.h>

#include "check.h"
#include "mscclpp_tools.h"

#define NTHREADS 8
#define NITERS 2000

/* ---- a layer registered from this program's constructor ---- */

static mscclppResult_t appGetVersion(int layer, int* version)
{
  void (*next)(void);
  int below;
  if (mscclppToolGetNext(layer, mscclppToolFnGetVersion, &next, &below) != mscclppSuccess) return mscclppInternalError;
  fprintf(stderr, "app enter mscclppGetVersion layer=%d below=%d\n", layer, below);
  mscclppResult_t r = ((mscclppToolGetVersion_t)next)(below, version);
  fprintf(stderr, "app exit mscclppGetVersion\n");
  return r;
}

__attribute__((constructor)) static void appToolInit(void)
{
  const char* on = getenv("TOOLS_APP_CTOR");
  if (on == NULL || strcmp(on, "1") != 0) return;
  int layer;
  if (mscclppToolRegisterName("app", &layer) != mscclppSuccess ||
      mscclppToolRegisterFunction(layer, mscclppToolFnGetVersion, (void (*)(void))appGetVersion) != mscclppSuccess)
    fprintf(stderr, "app: registration failed: %s\n", mscclppGetLastError(NULL));
}

/* ---- api ---- */

static int outerLayer, innerLayer, innerFactor = 2;

static mscclppResult_t outerGetVersion(int layer, int* version)
{
  void (*next)(void);
  int below;
  if (mscclppToolGetNext(layer, mscclppToolFnGetVersion, &next, &below) != mscclppSuccess) return mscclppInternalError;
  mscclppResult_t r = ((mscclppToolGetVersion_t)next)(below, version);
  if (r == mscclppSuccess) *version += 1;
  return r;
}

static mscclppResult_t innerGetVersion(int layer, int* version)
{
  void (*next)(void);
  int below;
  if (mscclppToolGetNext(layer, mscclppToolFnGetVersion, &next, &below) != mscclppSuccess) return mscclppInternalError;
  mscclppResult_t r = ((mscclppToolGetVersion_t)next)(below, version);
  if (r == mscclppSuccess) *version *= innerFactor;
  return r;
}

static mscclppResult_t innerGetVersionTimes3(int layer, int* version)
{
  innerFactor = 3;
  return innerGetVersion(layer, version);
}

static void dummyFini(void* ctx) { (void)ctx; }

static int version(void)
{
  int v = -1;
  mscclppResult_t r = mscclppGetVersion(&v);
  CHECK(r == mscclppSuccess, "mscclppGetVersion: %d", (int)r);
  return v;
}

static void modeApi(void)
{
  void (*next)(void) = NULL;
  int below = -1, l = -1;
  void* ctx = NULL;

  CHECK(mscclppToolNumLayers() == 0, "%d layers before any registration", mscclppToolNumLayers());
  CHECK(strcmp(mscclppToolLayerName(MSCCLPP_TOOL_LAYER_LIBRARY), "libmscclpp") == 0, "layer 0 is \"%s\"",
        mscclppToolLayerName(0));
  CHECK(mscclppToolLayerName(1) == NULL && mscclppToolLayerName(-1) == NULL, "unknown layers have names");

  /* every function has its name, each distinct */
  for (int fn = 0; fn < mscclppToolNumFunctions; fn++) {
    const char* n = mscclppToolFunctionName((mscclppToolFunction)fn);
    if (!CHECK(n != NULL && strncmp(n, "mscclpp", 7) == 0, "function %d is named %s", fn, n ? n : "NULL")) continue;
    for (int k = 0; k < fn; k++)
      CHECK(strcmp(n, mscclppToolFunctionName((mscclppToolFunction)k)) != 0, "functions %d and %d share %s", k, fn, n);
  }
  CHECK(strcmp(mscclppToolFunctionName(mscclppToolFnCommInitRank), "mscclppCommInitRank") == 0, "CommInitRank name");
  CHECK(strcmp(mscclppToolFunctionName(mscclppToolFnDefaultLogHandler), "mscclppDefaultLogHandler") == 0, "name");
  CHECK(strcmp(mscclppToolFunctionName(mscclppToolFnHostFree), "mscclppHostFree") == 0, "HostFree name");
  CHECK(mscclppToolFunctionName(mscclppToolNumFunctions) == NULL, "a name past the last function");
  CHECK(mscclppToolFunctionName((mscclppToolFunction)-1) == NULL, "a name for -1");

  /* bad input */
  char longName[MSCCLPP_TOOL_MAX_NAME + 2];
  memset(longName, 'x', sizeof(longName) - 1);
  longName[sizeof(longName) - 1] = '\0';
  EXPECT_RES(mscclppToolRegisterName(NULL, &l), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolRegisterName("x", NULL), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolRegisterName("", &l), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolRegisterName(longName, &l), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolRegisterFunction(1, mscclppToolFnGetVersion, (void (*)(void))outerGetVersion),
             mscclppInvalidArgument);
  EXPECT_RES(mscclppToolGetNext(0, mscclppToolFnGetVersion, &next, &below), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolGetNext(1, mscclppToolFnGetVersion, &next, &below), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolSetContext(1, NULL, NULL), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolGetContext(0, &ctx), mscclppInvalidArgument);
  CHECK(mscclppToolNumLayers() == 0, "a failed registration left %d layers", mscclppToolNumLayers());

  /* two layers: the first registered is the outermost */
  MCHECK(mscclppToolRegisterName("outer", &outerLayer));
  MCHECK(mscclppToolRegisterName("inner", &innerLayer));
  CHECK(outerLayer == 1 && innerLayer == 2, "layers %d and %d, expected 1 and 2", outerLayer, innerLayer);
  EXPECT_RES(mscclppToolRegisterName("outer", &l), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(NULL), "outer") != NULL, "last error \"%s\" does not name the layer",
        mscclppGetLastError(NULL));
  CHECK(strcmp(mscclppToolLayerName(2), "inner") == 0, "layer 2 is \"%s\"", mscclppToolLayerName(2));
  EXPECT_RES(mscclppToolRegisterFunction(1, mscclppToolNumFunctions, (void (*)(void))outerGetVersion),
             mscclppInvalidArgument);
  EXPECT_RES(mscclppToolRegisterFunction(1, (mscclppToolFunction)-1, (void (*)(void))outerGetVersion),
             mscclppInvalidArgument);
  EXPECT_RES(mscclppToolRegisterFunction(1, mscclppToolFnGetVersion, NULL), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolRegisterFunction(3, mscclppToolFnGetVersion, (void (*)(void))outerGetVersion),
             mscclppInvalidArgument);
  EXPECT_RES(mscclppToolGetNext(1, mscclppToolNumFunctions, &next, &below), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolGetNext(1, mscclppToolFnGetVersion, NULL, &below), mscclppInvalidArgument);
  EXPECT_RES(mscclppToolGetNext(1, mscclppToolFnGetVersion, &next, NULL), mscclppInvalidArgument);

  /* nothing intercepted yet: the library answers, and GetNext leads to it */
  CHECK(version() == MSCCLPP_VERSION, "version with layers but no handlers");
  MCHECK(mscclppToolGetNext(1, mscclppToolFnGetVersion, &next, &below));
  CHECK(below == 0 && next != NULL, "below %d", below);
  int v = -1;
  CHECK(((mscclppToolGetVersion_t)next)(below, &v) == mscclppSuccess && v == MSCCLPP_VERSION, "library: %d", v);

  /* outer adds 1 to what inner (x2) returns: (100 * 2) + 1, not (100 + 1) * 2 */
  MCHECK(mscclppToolRegisterFunction(innerLayer, mscclppToolFnGetVersion, (void (*)(void))innerGetVersion));
  CHECK(version() == 2 * MSCCLPP_VERSION, "inner only");
  MCHECK(mscclppToolRegisterFunction(outerLayer, mscclppToolFnGetVersion, (void (*)(void))outerGetVersion));
  v = version();
  CHECK(v == 2 * MSCCLPP_VERSION + 1, "outer over inner gave %d, expected %d", v, 2 * MSCCLPP_VERSION + 1);
  MCHECK(mscclppToolGetNext(outerLayer, mscclppToolFnGetVersion, &next, &below));
  CHECK(below == innerLayer && next == (void (*)(void))innerGetVersion, "below outer: layer %d", below);
  MCHECK(mscclppToolGetNext(innerLayer, mscclppToolFnGetVersion, &next, &below));
  CHECK(below == 0, "below inner: layer %d", below);
  /* a function nobody intercepts: GetNext from any layer leads to the library */
  MCHECK(mscclppToolGetNext(outerLayer, mscclppToolFnCommRank, &next, &below));
  CHECK(below == 0, "CommRank below outer: layer %d", below);
  int rank = -1;
  CHECK(((mscclppToolCommRank_t)next)(below, NULL, &rank) == mscclppInvalidUsage, "library CommRank(NULL)");
  /* replacing inner's handler */
  MCHECK(mscclppToolRegisterFunction(innerLayer, mscclppToolFnGetVersion, (void (*)(void))innerGetVersionTimes3));
  v = version();
  CHECK(v == 3 * MSCCLPP_VERSION + 1, "after replacing inner: %d", v);

  /* contexts */
  int token = 7;
  MCHECK(mscclppToolGetContext(outerLayer, &ctx));
  CHECK(ctx == NULL, "a context before any was set");
  MCHECK(mscclppToolSetContext(outerLayer, &token, dummyFini));
  MCHECK(mscclppToolGetContext(outerLayer, &ctx));
  CHECK(ctx == &token, "context %p, expected %p", ctx, (void*)&token);
  MCHECK(mscclppToolGetContext(innerLayer, &ctx));
  CHECK(ctx == NULL, "inner's context was set by outer's");
  EXPECT_RES(mscclppToolGetContext(outerLayer, NULL), mscclppInvalidArgument);

  /* the layer limit */
  int added = 0;
  mscclppResult_t r = mscclppSuccess;
  for (int i = 0; i < 2 * MSCCLPP_TOOL_MAX_LAYERS && r == mscclppSuccess; i++) {
    char name[32];
    snprintf(name, sizeof(name), "filler %d", i);
    r = mscclppToolRegisterName(name, &l);
    if (r == mscclppSuccess) added++;
  }
  CHECK(r == mscclppInvalidUsage, "past the limit: %d", (int)r);
  CHECK(added == MSCCLPP_TOOL_MAX_LAYERS - 2 && mscclppToolNumLayers() == MSCCLPP_TOOL_MAX_LAYERS,
        "%d more layers, %d in all", added, mscclppToolNumLayers());
  CHECK(version() == 3 * MSCCLPP_VERSION + 1, "version with every layer taken");
}

/* ---- calls, short, change, badpath ---- */

static void modeCalls(void)
{
  CHECK(version() == MSCCLPP_VERSION, "version");
  int rank = -1;
  EXPECT_RES(mscclppCommRank(NULL, &rank), mscclppInvalidUsage);
  CHECK(strcmp(mscclppGetErrorString(mscclppSuccess), "no error") == 0, "GetErrorString(success)");
}

static void modeShort(void)
{
  int rank = -1;
  mscclppResult_t r = mscclppCommRank(NULL, &rank);
  CHECK(r == mscclppSuccess && rank == 42, "mscclppCommRank(NULL) gave %d and rank %d, expected 0 and 42", (int)r,
        rank);
}

static void modeChange(void)
{
  const char* s = mscclppGetErrorString(mscclppSuccess);
  CHECK(strcmp(s, "invalid argument") == 0, "GetErrorString(success) with the argument changed: \"%s\"", s);
  s = mscclppGetErrorString(mscclppInvalidUsage);
  CHECK(strcmp(s, "invalid usage") == 0, "GetErrorString(invalid usage), unchanged: \"%s\"", s);
  int v = version();
  CHECK(v == MSCCLPP_VERSION + 1000, "version %d, expected %d", v, MSCCLPP_VERSION + 1000);
  int size = -1;
  mscclppResult_t r = mscclppCommSize(NULL, &size);
  CHECK(r == mscclppInProgress, "CommSize(NULL) gave %d, expected the changed result %d", (int)r, mscclppInProgress);
}

static void modeBadPath(void)
{
  const char* e = mscclppGetLastError(NULL);
  CHECK(strstr(e, "MSCCLPP_TOOLS") != NULL, "last error \"%s\" does not mention MSCCLPP_TOOLS", e);
  CHECK(version() == MSCCLPP_VERSION, "version");
  int want = test_env_int("TOOLS_APP_LAYERS", -1);
  CHECK(mscclppToolNumLayers() == want, "%d layers, expected %d", mscclppToolNumLayers(), want);
  int rank = -1;
  EXPECT_RES(mscclppCommRank(NULL, &rank), mscclppInvalidUsage);
}

/* ---- threads ---- */

static int progress[NTHREADS];
static int lateRegistered;
static int wrong;

static mscclppResult_t lateGetVersion(int layer, int* version)
{
  void (*next)(void);
  int below;
  if (mscclppToolGetNext(layer, mscclppToolFnGetVersion, &next, &below) != mscclppSuccess) return mscclppInternalError;
  mscclppResult_t r = ((mscclppToolGetVersion_t)next)(below, version);
  if (r == mscclppSuccess) *version += 1;
  return r;
}

static void* worker(void* arg)
{
  int id = (int)(long)arg;
  for (int i = 0; i < NITERS; i++) {
    int registered = __atomic_load_n(&lateRegistered, __ATOMIC_ACQUIRE);
    int v = -1, rank = -1;
    mscclppResult_t r = mscclppGetVersion(&v);
    /* before the late layer: 100 or 101 (racing it); once it is registered: 101 */
    if (r != mscclppSuccess || (registered ? v != MSCCLPP_VERSION + 1 : (v != MSCCLPP_VERSION && v != MSCCLPP_VERSION + 1)))
      __atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
    if (mscclppCommRank(NULL, &rank) != mscclppInvalidUsage) __atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
    if (strcmp(mscclppGetErrorString(mscclppRemoteError), "remote process exited or there was a network error") != 0)
      __atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&progress[id], i + 1, __ATOMIC_RELEASE);
  }
  return NULL;
}

static void modeThreads(void)
{
  pthread_t t[NTHREADS];
  for (long i = 0; i < NTHREADS; i++) REQUIRE(pthread_create(&t[i], NULL, worker, (void*)i) == 0, "pthread_create");
  /* register once every thread is under way (and before any can be done) */
  for (int i = 0; i < NTHREADS; i++)
    while (__atomic_load_n(&progress[i], __ATOMIC_ACQUIRE) < 10) sched_yield();
  int layer;
  MCHECK(mscclppToolRegisterName("late", &layer));
  MCHECK(mscclppToolRegisterFunction(layer, mscclppToolFnGetVersion, (void (*)(void))lateGetVersion));
  __atomic_store_n(&lateRegistered, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  CHECK(wrong == 0, "%d wrong results from the threads", wrong);
  int v = -1;
  CHECK(mscclppGetVersion(&v) == mscclppSuccess && v == MSCCLPP_VERSION + 1, "version %d after the late layer", v);
  printf("threads: %d threads x %d iterations done\n", NTHREADS, NITERS);
}

/* ---- comm ---- */

static void modeComm(void)
{
  int n = test_nranks(), me = test_rank();
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, n, test_addr(), me));
  int rank = -1, size = -1;
  MCHECK(mscclppCommRank(comm, &rank));
  MCHECK(mscclppCommSize(comm, &size));
  CHECK(rank == me && size == n, "rank %d size %d", rank, size);
  int data[64] = {0};
  data[me] = 1000 + me;
  MCHECK(mscclppBootstrapAllGather(comm, data, sizeof(int)));
  for (int r = 0; r < n; r++) CHECK(data[r] == 1000 + r, "allgather slot %d: %d", r, data[r]);
  MCHECK(mscclppBootstrapBarrier(comm));
  /* the on-demand report (not intercepted: the tools see no call) */
  CHECK(mscclppCommReport(comm, NULL) == mscclppInvalidArgument, "mscclppCommReport(comm, NULL)");
  CHECK(strstr(mscclppGetLastError(comm), "f is NULL") != NULL, "last error %s", mscclppGetLastError(comm));
  fflush(stdout);
  MCHECK(mscclppCommReport(comm, stdout));
  MCHECK(mscclppCommDestroy(comm));
}

/* ---- fork ---- */

static void modeFork(void)
{
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    int v = -1;
    int bad = mscclppGetVersion(&v) != mscclppInvalidUsage;
    bad |= strcmp(mscclppGetErrorString(mscclppSuccess), "no error") != 0;
    exit(bad); /* exit(), not _exit(): atexit handlers run, and the tools' fini must not */
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's calls: status %d", status);
}

int main(int argc, char** argv)
{
  const char* mode = argc > 1 ? argv[1] : "calls";
  test_init("tools_app");
  if (strcmp(mode, "api") == 0) modeApi();
  else if (strcmp(mode, "calls") == 0) modeCalls();
  else if (strcmp(mode, "short") == 0) modeShort();
  else if (strcmp(mode, "change") == 0) modeChange();
  else if (strcmp(mode, "badpath") == 0) modeBadPath();
  else if (strcmp(mode, "threads") == 0) modeThreads();
  else if (strcmp(mode, "comm") == 0) modeComm();
  else if (strcmp(mode, "fork") == 0) modeFork();
  else REQUIRE(0, "unknown mode %s", mode);
  return test_finish();
}
