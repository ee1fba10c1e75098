/*
 * trace.c: the trace tool (libmscclpp_trace.so). Load it with
 *
 *   MSCCLPP_TOOLS=/path/to/lib/mscclpp/libmscclpp_trace.so ./app
 *
 * It records every intercepted call (function, start, duration, thread,
 * communicator, peer, tag, bytes, result) in memory, and at normal process
 * exit writes them as one Chrome trace-event JSON file per process (rank):
 * MSCCLPP_TRACE_FILE, default "mscclpp-trace.%r.json" in the current
 * directory, "%r" the rank, "%p" the pid. Events are complete events ("ph":
 * "X"), "pid" is the rank, "tid" the kernel thread id, "ts" and "dur" are
 * microseconds of CLOCK_MONOTONIC. The file opens in Perfetto's UI or
 * chrome://tracing as it is; mscclpp-trace-merge (merge.c) joins the ranks'
 * files into one, using the clock anchor in "otherData".
 *
 * The file's layout is part of what merge.c reads: "otherData" on the first
 * line, then one event per line. MSCCLPP_TRACE_MAX_EVENTS (default 1000000)
 * bounds the memory; calls past it are counted as "dropped" and a line on
 * stderr says so at exit. Recording takes no lock: an atomic index into
 * chunks allocated on first use. In C because a tool is a shared library
 * the library dlopens.
 */
#define TOOL_NAME "mscclpp-trace"
#include "../common/intercept.h"
#include "../common/outfile.h"

#include <errno.h>
#include <inttypes.h>

struct event
{
  uint64_t t0, t1;
  void* comm;
  uint64_t bytes;
  int32_t peer, tag, tid;
  int8_t result;
  uint8_t hasBytes;
  uint8_t fn1; /* fn + 1, stored last (release): 0 while the event is being written */
};

#define CHUNK 65536
/* the most MSCCLPP_TRACE_MAX_EVENTS may say: 2^40 events, 2^24 chunk pointers (128 MiB) */
#define MAX_EVENTS_LIMIT (1ULL << 40)
static uint64_t maxEvents = 1000000;
static struct event** chunks;
static uint64_t nextEvent, dropped;

static void toolAfter(const struct toolCall* c)
{
  uint64_t i = __atomic_fetch_add(&nextEvent, 1, __ATOMIC_RELAXED);
  if (i >= maxEvents || chunks == NULL) {
    __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  struct event* ch = __atomic_load_n(&chunks[i / CHUNK], __ATOMIC_ACQUIRE);
  if (ch == NULL) {
    struct event* fresh = calloc(CHUNK, sizeof(struct event));
    if (fresh == NULL) {
      __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
      return;
    }
    struct event* expected = NULL;
    if (__atomic_compare_exchange_n(&chunks[i / CHUNK], &expected, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      ch = fresh;
    } else {
      free(fresh);
      ch = expected;
    }
  }
  struct event* e = &ch[i % CHUNK];
  e->t0 = c->t0;
  e->t1 = c->t1;
  e->comm = c->comm;
  e->bytes = c->bytes;
  e->peer = c->peer;
  e->tag = c->tag;
  e->tid = (int32_t)toolTid();
  e->result = (int8_t)c->result;
  e->hasBytes = (uint8_t)c->hasBytes;
  __atomic_store_n(&e->fn1, (uint8_t)(c->fn + 1), __ATOMIC_RELEASE);
}

static int byStart(const void* a, const void* b)
{
  const struct event* x = *(const struct event* const*)a;
  const struct event* y = *(const struct event* const*)b;
  if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return x->t1 < y->t1 ? 1 : (x->t1 > y->t1 ? -1 : 0); /* the enclosing call first */
}

static int byInt(const void* a, const void* b)
{
  int32_t x = *(const int32_t*)a, y = *(const int32_t*)b;
  return x < y ? -1 : (x > y ? 1 : 0);
}

static void writeEvent(FILE* f, const struct event* e, int pid, const char* sep)
{
  fprintf(f, "{\"name\":\"%s\",\"cat\":\"mscclpp\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{",
          mscclppToolFunctionName((mscclppToolFunction)(e->fn1 - 1)), (double)e->t0 / 1e3,
          (double)(e->t1 - e->t0) / 1e3, pid, (int)e->tid);
  fprintf(f, "\"result\":\"%s\"", toolResultName(e->result));
  if (e->comm != NULL) fprintf(f, ",\"comm\":\"%p\"", e->comm);
  if (e->peer >= 0) fprintf(f, ",\"peer\":%d", (int)e->peer);
  if (e->tag >= 0) fprintf(f, ",\"tag\":%d", (int)e->tag);
  if (e->hasBytes) fprintf(f, ",\"bytes\":%" PRIu64, e->bytes);
  fprintf(f, "}}%s\n", sep);
}

static void traceFini(void* ctx)
{
  (void)ctx;
  uint64_t n = __atomic_load_n(&nextEvent, __ATOMIC_ACQUIRE);
  if (n > maxEvents) n = maxEvents;
  if (n == 0 || chunks == NULL) return;
  struct event** evs = malloc(n * sizeof(*evs));
  int32_t* tids = malloc(n * sizeof(*tids));
  if (evs == NULL || tids == NULL) {
    fprintf(stderr, "%s: out of memory writing %" PRIu64 " events\n", TOOL_NAME, n);
    free(evs);
    free(tids);
    return;
  }
  uint64_t k = 0;
  for (uint64_t i = 0; i < n; i++) {
    struct event* ch = __atomic_load_n(&chunks[i / CHUNK], __ATOMIC_ACQUIRE);
    if (ch == NULL || __atomic_load_n(&ch[i % CHUNK].fn1, __ATOMIC_ACQUIRE) == 0) continue; /* still being written */
    evs[k] = &ch[i % CHUNK];
    tids[k] = evs[k]->tid;
    k++;
  }
  qsort(evs, (size_t)k, sizeof(*evs), byStart);
  qsort(tids, (size_t)k, sizeof(*tids), byInt);

  toolAnchorClock(); /* no-op when an init call anchored it */
  int rank = toolProcessRank();
  int pid = rank >= 0 ? rank : (int)getpid();
  const char* pattern = getenv("MSCCLPP_TRACE_FILE");
  char path[4096];
  toolExpandPath(pattern != NULL && *pattern != '\0' ? pattern : "mscclpp-trace.%r.json", path, sizeof(path));
  FILE* f = outCreate(TOOL_NAME, path);
  if (f == NULL) {
    free(evs);
    free(tids);
    toolFailExit();
  }
  uint64_t lost = __atomic_load_n(&dropped, __ATOMIC_RELAXED);
  fprintf(f,
          "{\"otherData\":{\"tool\":\"mscclpp-trace\",\"format\":1,\"rank\":%d,\"nranks\":%d,\"pid\":%d,"
          "\"realtime_us\":%" PRId64 ",\"monotonic_us\":%" PRId64 ",\"events\":%" PRIu64 ",\"dropped\":%" PRIu64 "},\n",
          rank, toolNranks, (int)getpid(), toolAnchorRealUs, toolAnchorMonoUs, k, lost);
  fprintf(f, "\"displayTimeUnit\":\"ns\",\n\"traceEvents\":[\n");
  if (rank >= 0)
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d (pid %d)\"}},\n",
            pid, rank, (int)getpid());
  else
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"pid %d\"}},\n", pid,
            pid);
  fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n", pid,
          pid);
  for (uint64_t i = 0; i < k; i++) {
    if (i > 0 && tids[i] == tids[i - 1]) continue;
    if (tids[i] == (int32_t)getpid())
      fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"main\"}},\n", pid,
              (int)tids[i]);
    else
      fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"thread %d\"}},\n",
              pid, (int)tids[i], (int)tids[i]);
  }
  for (uint64_t i = 0; i < k; i++) writeEvent(f, evs[i], pid, i + 1 < k ? "," : "");
  fprintf(f, "]}\n");
  int failed = outClose(TOOL_NAME, f, path) != 0;
  if (lost > 0)
    fprintf(stderr, "%s: %" PRIu64 " calls not recorded past MSCCLPP_TRACE_MAX_EVENTS=%" PRIu64 "\n", TOOL_NAME, lost,
            maxEvents);
  free(evs);
  free(tids);
  if (failed) toolFailExit();
}

__attribute__((constructor)) static void traceInit(void)
{
  const char* m = getenv("MSCCLPP_TRACE_MAX_EVENTS");
  if (m != NULL && *m != '\0') {
    char* end;
    errno = 0;
    unsigned long long v = m[0] >= '0' && m[0] <= '9' ? strtoull(m, &end, 10) : 0;
    if (v > 0 && *end == '\0' && errno == 0 && v <= MAX_EVENTS_LIMIT)
      maxEvents = v;
    else
      fprintf(stderr, "%s: ignoring MSCCLPP_TRACE_MAX_EVENTS=\"%s\": not a whole number from 1 to %llu; the default %" PRIu64
              " is used\n", TOOL_NAME, m, (unsigned long long)MAX_EVENTS_LIMIT, maxEvents);
  }
  chunks = calloc(maxEvents / CHUNK + 1, sizeof(*chunks));
  if (chunks == NULL)
    fprintf(stderr, "%s: out of memory for MSCCLPP_TRACE_MAX_EVENTS=%" PRIu64 "; nothing will be recorded\n", TOOL_NAME,
            maxEvents);
  toolRegisterAll("mscclpp-trace", NULL, traceFini);
}
