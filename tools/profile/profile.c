/*
 * profile.c: the profile tool (libmscclpp_profile.so). Load it with
 *
 *   MSCCLPP_TOOLS=/path/to/lib/mscclpp/libmscclpp_profile.so ./app
 *
 * It intercepts every interceptable function and, at normal process exit,
 * prints one table for the process (one rank): per function called, the
 * number of calls, total / mean / max time spent below this layer, the bytes
 * the calls moved, registered or allocated (where the function has a size),
 * and for the functions that name a peer (mscclppConnect,
 * mscclppConnectWithoutBuffer, mscclppGetDeviceConnection) one row per peer
 * too. Every line starts with "mscclpp-profile: ". The table goes to
 * stderr, or, when MSCCLPP_PROFILE_FILE is set, to that file (truncated)
 * with "%r" replaced by the rank, "%p" by the pid. A process that made no
 * call prints nothing. See docs/TOOLS.md.
 *
 * The counters are atomics: interceptors run concurrently on the
 * application's threads and take no lock. In C because a tool is a shared
 * library the library dlopens.
 */
#define TOOL_NAME "mscclpp-profile"
#include "../common/intercept.h"
#include "../common/outfile.h"

#include <errno.h>

struct stat_
{
  uint64_t count, totalNs, maxNs, bytes;
};

#define MAX_PEERS 4096
#define NPEERFN 3
static struct stat_ stats[mscclppToolNumFunctions];
static struct stat_ peerStats[NPEERFN][MAX_PEERS];

/* index into peerStats of a function that names a peer, -1 for the others */
static int peerSlot(mscclppToolFunction fn)
{
  switch (fn) {
  case mscclppToolFnConnect: return 0;
  case mscclppToolFnConnectWithoutBuffer: return 1;
  case mscclppToolFnGetDeviceConnection: return 2;
  default: return -1;
  }
}

static void add(struct stat_* s, uint64_t ns, uint64_t bytes)
{
  __atomic_fetch_add(&s->count, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->totalNs, ns, __ATOMIC_RELAXED);
  if (bytes != 0) __atomic_fetch_add(&s->bytes, bytes, __ATOMIC_RELAXED);
  uint64_t m = __atomic_load_n(&s->maxNs, __ATOMIC_RELAXED);
  while (ns > m && !__atomic_compare_exchange_n(&s->maxNs, &m, ns, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void toolAfter(const struct toolCall* c)
{
  uint64_t ns = c->t1 - c->t0;
  add(&stats[c->fn], ns, c->bytes);
  int slot = peerSlot(c->fn);
  if (slot >= 0 && c->peer >= 0 && c->peer < MAX_PEERS) add(&peerStats[slot][c->peer], ns, c->bytes);
}

struct row
{
  mscclppToolFunction fn;
  struct stat_ s;
};

static int byTotal(const void* a, const void* b)
{
  const struct row* x = a;
  const struct row* y = b;
  if (x->s.totalNs != y->s.totalNs) return x->s.totalNs < y->s.totalNs ? 1 : -1;
  return (int)x->fn - (int)y->fn;
}

static void line(FILE* f, const char* fn, const char* peer, const struct stat_* s, int hasBytes)
{
  char bytes[32] = "-";
  if (hasBytes) snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)s->bytes);
  fprintf(f, "mscclpp-profile: %-36s %5s %10llu %12.3f %12.3f %12.3f %16s\n", fn, peer, (unsigned long long)s->count,
          (double)s->totalNs / 1e6, (double)s->totalNs / 1e3 / (double)s->count, (double)s->maxNs / 1e3, bytes);
}

/* the functions whose calls carry a size (struct toolCall.hasBytes) */
static int hasBytes(mscclppToolFunction fn)
{
  switch (fn) {
  case mscclppToolFnBootstrapAllGather:
  case mscclppToolFnConnect:
  case mscclppToolFnRegisterBufferForConnection:
  case mscclppToolFnRegisterBuffer:
  case mscclppToolFnRegisteredBufferWrite:
  case mscclppToolFnHostAlloc: return 1;
  default: return 0;
  }
}

static void profileFini(void* ctx)
{
  (void)ctx;
  struct row rows[mscclppToolNumFunctions];
  int n = 0;
  uint64_t calls = 0, totalNs = 0;
  for (int fn = 0; fn < mscclppToolNumFunctions; fn++) {
    struct stat_ s;
    s.count = __atomic_load_n(&stats[fn].count, __ATOMIC_ACQUIRE);
    s.totalNs = __atomic_load_n(&stats[fn].totalNs, __ATOMIC_RELAXED);
    s.maxNs = __atomic_load_n(&stats[fn].maxNs, __ATOMIC_RELAXED);
    s.bytes = __atomic_load_n(&stats[fn].bytes, __ATOMIC_RELAXED);
    if (s.count == 0) continue;
    rows[n].fn = (mscclppToolFunction)fn;
    rows[n].s = s;
    n++;
    calls += s.count;
    totalNs += s.totalNs;
  }
  if (n == 0) return;
  qsort(rows, (size_t)n, sizeof(rows[0]), byTotal);

  FILE* f = stderr;
  char path[4096] = "";
  const char* pattern = getenv("MSCCLPP_PROFILE_FILE");
  if (pattern != NULL && *pattern != '\0') {
    toolExpandPath(pattern, path, sizeof(path));
    f = outCreate(TOOL_NAME, path);
    if (f == NULL) {
      fprintf(stderr, "%s: the profile goes to stderr\n", TOOL_NAME);
      f = stderr;
    }
  }
  int rank = toolProcessRank();
  char who[48];
  if (rank >= 0)
    snprintf(who, sizeof(who), "rank %d of %d", rank, toolNranks);
  else
    snprintf(who, sizeof(who), "no communicator");
  flockfile(f);
  fprintf(f, "mscclpp-profile: %s, pid %d: %llu calls of %d functions, %.3f ms in the library\n", who, (int)getpid(),
          (unsigned long long)calls, n, (double)totalNs / 1e6);
  fprintf(f, "mscclpp-profile: %-36s %5s %10s %12s %12s %12s %16s\n", "function", "peer", "calls", "total ms", "mean us",
          "max us", "bytes");
  for (int i = 0; i < n; i++) {
    int slot = peerSlot(rows[i].fn);
    const char* name = mscclppToolFunctionName(rows[i].fn);
    line(f, name, slot >= 0 ? "all" : "-", &rows[i].s, hasBytes(rows[i].fn));
    if (slot < 0) continue;
    for (int p = 0; p < MAX_PEERS; p++) {
      if (peerStats[slot][p].count == 0) continue;
      char peer[16];
      snprintf(peer, sizeof(peer), "%d", p);
      line(f, name, peer, &peerStats[slot][p], hasBytes(rows[i].fn));
    }
  }
  funlockfile(f);
  if (f != stderr && outClose(TOOL_NAME, f, path) != 0) toolFailExit();
}

__attribute__((constructor)) static void profileInit(void)
{
  toolRegisterAll("mscclpp-profile", NULL, profileFini);
}
