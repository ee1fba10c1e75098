/*
 * tracer.c: an example tool. Writes one line per API call that passes
 * through its layer, once the call returns:
 *
 *   mscclpp-trace <pid>:<tid> <function>(<arguments>) -> <result> <microseconds> us
 *
 * <result> is the result code's name ("mscclppSuccess"), a quoted string,
 * or "void". Out-parameters are shown with the value they received, as
 * "rank=0x7ffc...->1". Lines go to stderr, or to the file named by
 * MSCCLPP_TRACER_FILE (appended; "%p" in the name becomes the pid); each line
 * is one write(), so lines from several threads never mix.
 *
 *   cc -shared -fPIC tracer.c -o libmscclpp_tracer.so $(pkg-config --cflags --libs mscclpp)
 *   MSCCLPP_TOOLS=./libmscclpp_tracer.so ./app
 *
 * In C because a tool is a shared library the library dlopens.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp_tools.h"

static int traceFd = STDERR_FILENO;

static double nowUs(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void (*nextOf(int layer, mscclppToolFunction fn, int* below))(void)
{
  void (*next)(void) = NULL;
  if (mscclppToolGetNext(layer, fn, &next, below) != mscclppSuccess) {
    fprintf(stderr, "mscclpp-trace: mscclppToolGetNext(%d, %d) failed\n", layer, (int)fn);
    abort();
  }
  return next;
}

static const char* resultName(mscclppResult_t r)
{
  static const char* const names[] = {"mscclppSuccess",        "mscclppUnhandledCudaError", "mscclppSystemError",
                                      "mscclppInternalError",  "mscclppInvalidArgument",    "mscclppInvalidUsage",
                                      "mscclppRemoteError",    "mscclppInProgress"};
  return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "mscclppUnknownResult";
}

/* s quoted and shortened, newlines escaped, into buf; "NULL" for NULL. */
static const char* quote(char* buf, size_t n, const char* s)
{
  if (s == NULL) return "NULL";
  size_t o = 0;
  buf[o++] = '"';
  for (; *s != '\0' && o + 6 < n; s++) {
    if (*s == '\n') {
      buf[o++] = '\\';
      buf[o++] = 'n';
    } else if (*s == '"' || *s == '\\') {
      buf[o++] = '\\';
      buf[o++] = *s;
    } else {
      buf[o++] = *s;
    }
  }
  if (*s != '\0') {
    memcpy(buf + o, "...", 3);
    o += 3;
  }
  buf[o++] = '"';
  buf[o] = '\0';
  return buf;
}

static void emit(mscclppToolFunction fn, const char* args, const char* result, double us)
{
  char line[1024];
  int n = snprintf(line, sizeof(line), "mscclpp-trace %d:%ld %s(%s) -> %s %.3f us\n", (int)getpid(),
                   (long)syscall(SYS_gettid), mscclppToolFunctionName(fn), args, result, us);
  if (n >= (int)sizeof(line)) {
    n = (int)sizeof(line) - 1;
    line[n - 1] = '\n';
  }
  if (write(traceFd, line, (size_t)n) < 0) { /* nowhere to report it */
  }
}

static char* fmt(char* buf, size_t n, const char* f, ...) __attribute__((format(printf, 3, 4)));
static char* fmt(char* buf, size_t n, const char* f, ...)
{
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, n, f, ap);
  va_end(ap);
  return buf;
}

/* TRACE_R(Name, (params), (args), (format and values after the call)):
 * an interceptor of a function that returns mscclppResult_t. */
#define TRACE_R(Name, Params, Args, Summary)                                          \
  static mscclppResult_t trace##Name(int layer, MSCCLPP_TOOL_UNPAREN Params)          \
  {                                                                                   \
    int below;                                                                        \
    void (*next)(void) = nextOf(layer, mscclppToolFn##Name, &below);                  \
    double t0 = nowUs();                                                              \
    mscclppResult_t r = ((mscclppTool##Name##_t)next)(below, MSCCLPP_TOOL_UNPAREN Args); \
    double t1 = nowUs();                                                              \
    char a[512], q[128];                                                              \
    (void)q;                                                                          \
    fmt(a, sizeof(a), MSCCLPP_TOOL_UNPAREN Summary);                                  \
    emit(mscclppToolFn##Name, a, resultName(r), t1 - t0);                             \
    return r;                                                                         \
  }

/* values of out-parameters, read only when the pointer is not NULL */
#define OUTI(p) ((p) != NULL ? (long)*(p) : -1L)
#define OUTP(p) ((p) != NULL ? (void*)*(p) : NULL)

TRACE_R(GetUniqueId, (mscclppUniqueId * uniqueId), (uniqueId), ("uniqueId=%p", (void*)uniqueId))
TRACE_R(CommInitRank, (mscclppComm_t * comm, int nranks, const char* ipPortPair, int rank),
        (comm, nranks, ipPortPair, rank),
        ("comm=%p->%p, nranks=%d, ipPortPair=%s, rank=%d", (void*)comm, OUTP(comm), nranks,
         quote(q, sizeof(q), ipPortPair), rank))
TRACE_R(CommInitRankFromId, (mscclppComm_t * comm, int nranks, mscclppUniqueId id, int rank), (comm, nranks, id, rank),
        ("comm=%p->%p, nranks=%d, id=..., rank=%d", (void*)comm, OUTP(comm), nranks, rank))
TRACE_R(BootstrapAllGather, (mscclppComm_t comm, void* data, int size), (comm, data, size),
        ("comm=%p, data=%p, size=%d", (void*)comm, data, size))
TRACE_R(BootstrapBarrier, (mscclppComm_t comm), (comm), ("comm=%p", (void*)comm))
TRACE_R(CommDestroy, (mscclppComm_t comm), (comm), ("comm=%p", (void*)comm))
TRACE_R(Connect,
        (mscclppComm_t comm, int remoteRank, int tag, void* localBuff, uint64_t buffSize,
         mscclppTransport_t transportType, const char* ibDev),
        (comm, remoteRank, tag, localBuff, buffSize, transportType, ibDev),
        ("comm=%p, remoteRank=%d, tag=%d, localBuff=%p, buffSize=%llu, transport=%d, ibDev=%s", (void*)comm, remoteRank,
         tag, localBuff, (unsigned long long)buffSize, (int)transportType, quote(q, sizeof(q), ibDev)))
TRACE_R(ConnectWithoutBuffer,
        (mscclppComm_t comm, int remoteRank, int tag, mscclppTransport_t transportType, const char* ibDev),
        (comm, remoteRank, tag, transportType, ibDev),
        ("comm=%p, remoteRank=%d, tag=%d, transport=%d, ibDev=%s", (void*)comm, remoteRank, tag, (int)transportType,
         quote(q, sizeof(q), ibDev)))
TRACE_R(RegisterBufferForConnection,
        (mscclppComm_t comm, int connIdx, void* localBuff, uint64_t buffSize, mscclppBufferHandle_t* handle),
        (comm, connIdx, localBuff, buffSize, handle),
        ("comm=%p, connIdx=%d, localBuff=%p, buffSize=%llu, handle=%p->%ld", (void*)comm, connIdx, localBuff,
         (unsigned long long)buffSize, (void*)handle, OUTI(handle)))
TRACE_R(ConnectionSetup, (mscclppComm_t comm), (comm), ("comm=%p", (void*)comm))
TRACE_R(GetAllDeviceConnections, (mscclppComm_t comm, mscclppDevConn_t * *devConns, int* nConns),
        (comm, devConns, nConns),
        ("comm=%p, devConns=%p->%p, nConns=%p->%ld", (void*)comm, (void*)devConns, OUTP(devConns), (void*)nConns,
         OUTI(nConns)))
TRACE_R(GetDeviceConnection, (mscclppComm_t comm, int remoteRank, int tag, mscclppDevConn_t** devConn),
        (comm, remoteRank, tag, devConn),
        ("comm=%p, remoteRank=%d, tag=%d, devConn=%p->%p", (void*)comm, remoteRank, tag, (void*)devConn,
         OUTP(devConn)))
TRACE_R(ProxyLaunch, (mscclppComm_t comm), (comm), ("comm=%p", (void*)comm))
TRACE_R(ProxyStop, (mscclppComm_t comm), (comm), ("comm=%p", (void*)comm))
TRACE_R(CommRank, (mscclppComm_t comm, int* rank), (comm, rank),
        ("comm=%p, rank=%p->%ld", (void*)comm, (void*)rank, OUTI(rank)))
TRACE_R(CommSize, (mscclppComm_t comm, int* size), (comm, size),
        ("comm=%p, size=%p->%ld", (void*)comm, (void*)size, OUTI(size)))
TRACE_R(SetBootstrapConnTimeout, (int timeout), (timeout), ("timeout=%d", timeout))
TRACE_R(SetLogHandler, (mscclppLogHandler_t handler), (handler), ("handler=%s", handler != NULL ? "set" : "NULL"))
TRACE_R(RegisterBuffer, (mscclppComm_t comm, void* local_memory, size_t size, struct mscclppRegisteredMemory* regMem),
        (comm, local_memory, size, regMem),
        ("comm=%p, local_memory=%p, size=%zu, regMem=%p", (void*)comm, local_memory, size, (void*)regMem))
TRACE_R(RegisteredBufferWrite,
        (mscclppComm_t comm, struct mscclppRegisteredMemory* regMem, void* srcBuff, size_t size, uint32_t srcOffset,
         uint32_t dstOffset, int64_t stream),
        (comm, regMem, srcBuff, size, srcOffset, dstOffset, stream),
        ("comm=%p, regMem=%p, srcBuff=%p, size=%zu, srcOffset=%u, dstOffset=%u, stream=%lld", (void*)comm,
         (void*)regMem, srcBuff, size, srcOffset, dstOffset, (long long)stream))
TRACE_R(GetVersion, (int* version), (version), ("version=%p->%ld", (void*)version, OUTI(version)))
TRACE_R(CommGetAsyncError, (mscclppComm_t comm, mscclppResult_t * asyncError), (comm, asyncError),
        ("comm=%p, asyncError=%p->%ld", (void*)comm, (void*)asyncError, OUTI(asyncError)))
TRACE_R(HostAlloc, (void** ptr, size_t size), (ptr, size), ("ptr=%p->%p, size=%zu", (void*)ptr, OUTP(ptr), size))
TRACE_R(HostFree, (void* ptr), (ptr), ("ptr=%p", ptr))

static const char* traceGetErrorString(int layer, mscclppResult_t result)
{
  int below;
  void (*next)(void) = nextOf(layer, mscclppToolFnGetErrorString, &below);
  double t0 = nowUs();
  const char* s = ((mscclppToolGetErrorString_t)next)(below, result);
  double t1 = nowUs();
  char a[64], q[128];
  emit(mscclppToolFnGetErrorString, fmt(a, sizeof(a), "result=%d", (int)result), quote(q, sizeof(q), s), t1 - t0);
  return s;
}

static const char* traceGetLastError(int layer, mscclppComm_t comm)
{
  int below;
  void (*next)(void) = nextOf(layer, mscclppToolFnGetLastError, &below);
  double t0 = nowUs();
  const char* s = ((mscclppToolGetLastError_t)next)(below, comm);
  double t1 = nowUs();
  char a[64], q[128];
  emit(mscclppToolFnGetLastError, fmt(a, sizeof(a), "comm=%p", (void*)comm), quote(q, sizeof(q), s), t1 - t0);
  return s;
}

static void traceDefaultLogHandler(int layer, const char* msg)
{
  int below;
  void (*next)(void) = nextOf(layer, mscclppToolFnDefaultLogHandler, &below);
  double t0 = nowUs();
  ((mscclppToolDefaultLogHandler_t)next)(below, msg);
  double t1 = nowUs();
  char a[160], q[128];
  emit(mscclppToolFnDefaultLogHandler, fmt(a, sizeof(a), "msg=%s", quote(q, sizeof(q), msg)), "void", t1 - t0);
}

static void openTraceFile(void)
{
  const char* name = getenv("MSCCLPP_TRACER_FILE");
  if (name == NULL || *name == '\0') return;
  char path[4096];
  size_t o = 0;
  for (const char* s = name; *s != '\0' && o + 24 < sizeof(path); s++) {
    if (s[0] == '%' && s[1] == 'p') {
      o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
      s++;
    } else {
      path[o++] = *s;
    }
  }
  path[o] = '\0';
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "mscclpp-trace: cannot open %s; tracing to stderr\n", path);
    return;
  }
  traceFd = fd;
}

__attribute__((constructor)) static void tracerInit(void)
{
  int layer;
  if (mscclppToolRegisterName("tracer", &layer) != mscclppSuccess) {
    fprintf(stderr, "mscclpp-trace: not registered: %s\n", mscclppGetLastError(NULL));
    return;
  }
  openTraceFile();
#define REGISTER(Name, Ret, Params, Args)                                       \
  {                                                                             \
    mscclppTool##Name##_t f = trace##Name;                                      \
    mscclppToolRegisterFunction(layer, mscclppToolFn##Name, (void (*)(void))f); \
  }
  MSCCLPP_TOOL_FUNCTIONS(REGISTER)
  MSCCLPP_TOOL_VOID_FUNCTIONS(REGISTER)
}
