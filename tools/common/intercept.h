/*
 * intercept.h: what the shipped tools (profile, trace) share. Included once
 * by each tool's .c file; everything here is static, so each tool library
 * has its own copy and the tools stack without seeing each other.
 *
 * It defines an interceptor for each of the mscclppToolNumFunctions
 * functions. Each one times the call to the next layer with CLOCK_MONOTONIC,
 * fills a struct toolCall (function, times, communicator, peer, tag, bytes,
 * result) and hands it to toolAfter(), which the including tool defines. It
 * also remembers each communicator's rank and size from the init calls
 * (the bytes of mscclppBootstrapAllGather need the size), the process's
 * rank (that of its first communicator), and a clock anchor: CLOCK_REALTIME
 * and CLOCK_MONOTONIC read together when the first init call enters, which
 * lets mscclpp-trace-merge put the ranks' monotonic times on one time line.
 *
 * In C because a tool is a shared library the library dlopens.
 */
#ifndef MSCCLPP_TOOLS_INTERCEPT_H_
#define MSCCLPP_TOOLS_INTERCEPT_H_

#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp_tools.h"

/* One intercepted call, as the tools see it once it returned. */
struct toolCall
{
  mscclppToolFunction fn;
  uint64_t t0, t1; /* CLOCK_MONOTONIC ns at entry and return */
  void* comm;      /* the communicator, NULL when the function has none */
  int peer;        /* remote rank, -1 when the function has none */
  int tag;         /* connection tag, -1 when the function has none */
  int hasBytes;    /* the function moves (or registers, allocates) bytes */
  uint64_t bytes;
  int result; /* mscclppResult_t, -1 for functions that return a string or nothing */
};

/* Defined by the tool: called once per intercepted call, on the caller's thread. */
static void toolAfter(const struct toolCall* c);

static inline uint64_t toolNowNs(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The caller's kernel thread id, cached per thread (gettid is a system call). */
static __thread long toolTidCache;
static inline long toolTid(void)
{
  if (toolTidCache == 0) toolTidCache = (long)syscall(SYS_gettid);
  return toolTidCache;
}

/* ---- communicators, rank, clock anchor ---- */

#define TOOL_MAX_COMMS 64
static pthread_mutex_t toolCommMu = PTHREAD_MUTEX_INITIALIZER;
static struct
{
  void* comm;
  int rank, nranks;
} toolComms[TOOL_MAX_COMMS];
static int toolRank = -1, toolNranks = 0; /* the first communicator's */
static int toolAnchored;
static int64_t toolAnchorRealUs, toolAnchorMonoUs;

static void toolAnchorClock(void)
{
  if (__atomic_exchange_n(&toolAnchored, 1, __ATOMIC_ACQ_REL)) return;
  struct timespec m0, r, m1;
  clock_gettime(CLOCK_MONOTONIC, &m0);
  clock_gettime(CLOCK_REALTIME, &r);
  clock_gettime(CLOCK_MONOTONIC, &m1);
  int64_t mono = ((int64_t)m0.tv_sec * 1000000000 + m0.tv_nsec + (int64_t)m1.tv_sec * 1000000000 + m1.tv_nsec) / 2;
  toolAnchorMonoUs = mono / 1000;
  toolAnchorRealUs = ((int64_t)r.tv_sec * 1000000000 + r.tv_nsec) / 1000;
}

static void toolCommAdd(void* comm, int rank, int nranks)
{
  pthread_mutex_lock(&toolCommMu);
  if (toolRank < 0) {
    toolRank = rank;
    toolNranks = nranks;
  }
  int free_ = -1;
  for (int i = 0; i < TOOL_MAX_COMMS; i++) {
    if (toolComms[i].comm == comm) free_ = i;
    if (free_ < 0 && toolComms[i].comm == NULL) free_ = i;
  }
  if (free_ >= 0) {
    toolComms[free_].comm = comm;
    toolComms[free_].rank = rank;
    toolComms[free_].nranks = nranks;
  }
  pthread_mutex_unlock(&toolCommMu);
}

static void toolCommRemove(void* comm)
{
  pthread_mutex_lock(&toolCommMu);
  for (int i = 0; i < TOOL_MAX_COMMS; i++)
    if (toolComms[i].comm == comm) toolComms[i].comm = NULL;
  pthread_mutex_unlock(&toolCommMu);
}

/* comm's size, 0 when not seen at init */
static int toolCommSize(void* comm)
{
  int n = 0;
  pthread_mutex_lock(&toolCommMu);
  for (int i = 0; i < TOOL_MAX_COMMS; i++)
    if (toolComms[i].comm == comm && comm != NULL) n = toolComms[i].nranks;
  pthread_mutex_unlock(&toolCommMu);
  return n;
}

static int toolProcessRank(void)
{
  pthread_mutex_lock(&toolCommMu);
  int r = toolRank;
  pthread_mutex_unlock(&toolCommMu);
  return r;
}

/* toolFailExit ends the process with status 1 when the tool could not write
 * its output at exit (it runs in the fini, from atexit): the program's own
 * status cannot say so, and a missing or partial file with status 0 would
 * pass for a success. stdio is flushed first; later atexit handlers and
 * other tools' fini do not run. */
static void toolFailExit(void)
{
  fprintf(stderr, "%s: exiting with status 1: the output could not be written\n", TOOL_NAME);
  fflush(NULL);
  _exit(EXIT_FAILURE);
}

/* pattern with "%r" replaced by the process's rank ("p<pid>" when it never
 * initialized a communicator), "%p" by the pid and "%%" by "%", into out. */
static void toolExpandPath(const char* pattern, char* out, size_t n)
{
  int rank = toolProcessRank();
  size_t o = 0;
  for (const char* s = pattern; *s != '\0' && o + 24 < n; s++) {
    if (s[0] == '%' && s[1] == 'r') {
      o += (size_t)(rank >= 0 ? snprintf(out + o, n - o, "%d", rank) : snprintf(out + o, n - o, "p%d", (int)getpid()));
      s++;
    } else if (s[0] == '%' && s[1] == 'p') {
      o += (size_t)snprintf(out + o, n - o, "%d", (int)getpid());
      s++;
    } else if (s[0] == '%' && s[1] == '%') {
      out[o++] = '%';
      s++;
    } else {
      out[o++] = *s;
    }
  }
  out[o] = '\0';
}

/* ---- the interceptors ---- */

static void (*toolNext(int layer, mscclppToolFunction fn, int* below))(void)
{
  void (*next)(void) = NULL;
  if (mscclppToolGetNext(layer, fn, &next, below) != mscclppSuccess) {
    fprintf(stderr, "%s: mscclppToolGetNext(%d, %s) failed: %s\n", TOOL_NAME, layer, mscclppToolFunctionName(fn),
            mscclppGetLastError(NULL));
    abort();
  }
  return next;
}

/* TOOL_R(Name, (params), (args), comm, peer, tag, hasBytes, bytes): the
 * interceptor of a function that returns mscclppResult_t; the last five are
 * expressions over the parameters, evaluated after the call. */
#define TOOL_R(Name, Params, Args, Comm, Peer, Tag, HasBytes, Bytes)                      \
  static mscclppResult_t icpt##Name(int layer, MSCCLPP_TOOL_UNPAREN Params)               \
  {                                                                                       \
    int below;                                                                            \
    void (*next)(void) = toolNext(layer, mscclppToolFn##Name, &below);                    \
    struct toolCall c;                                                                    \
    c.fn = mscclppToolFn##Name;                                                           \
    c.t0 = toolNowNs();                                                                   \
    mscclppResult_t r = ((mscclppTool##Name##_t)next)(below, MSCCLPP_TOOL_UNPAREN Args);  \
    c.t1 = toolNowNs();                                                                   \
    c.comm = (void*)(Comm);                                                               \
    c.peer = (Peer);                                                                      \
    c.tag = (Tag);                                                                        \
    c.hasBytes = (HasBytes);                                                              \
    c.bytes = (uint64_t)(Bytes);                                                          \
    c.result = (int)r;                                                                    \
    toolAfter(&c);                                                                        \
    return r;                                                                             \
  }
#define TOOL_PLAIN(Name, Params, Args, Comm) TOOL_R(Name, Params, Args, Comm, -1, -1, 0, 0)

TOOL_PLAIN(GetUniqueId, (mscclppUniqueId * uniqueId), (uniqueId), NULL)
TOOL_R(BootstrapAllGather, (mscclppComm_t comm, void* data, int size), (comm, data, size), comm, -1, -1, 1,
       size > 0 ? (uint64_t)size * (uint64_t)toolCommSize(comm) : 0)
TOOL_PLAIN(BootstrapBarrier, (mscclppComm_t comm), (comm), comm)
TOOL_R(Connect,
       (mscclppComm_t comm, int remoteRank, int tag, void* localBuff, uint64_t buffSize,
        mscclppTransport_t transportType, const char* ibDev),
       (comm, remoteRank, tag, localBuff, buffSize, transportType, ibDev), comm, remoteRank, tag, 1, buffSize)
TOOL_R(ConnectWithoutBuffer,
       (mscclppComm_t comm, int remoteRank, int tag, mscclppTransport_t transportType, const char* ibDev),
       (comm, remoteRank, tag, transportType, ibDev), comm, remoteRank, tag, 0, 0)
TOOL_R(RegisterBufferForConnection,
       (mscclppComm_t comm, int connIdx, void* localBuff, uint64_t buffSize, mscclppBufferHandle_t* handle),
       (comm, connIdx, localBuff, buffSize, handle), comm, -1, -1, 1, buffSize)
TOOL_PLAIN(ConnectionSetup, (mscclppComm_t comm), (comm), comm)
TOOL_PLAIN(GetAllDeviceConnections, (mscclppComm_t comm, mscclppDevConn_t * *devConns, int* nConns),
           (comm, devConns, nConns), comm)
TOOL_R(GetDeviceConnection, (mscclppComm_t comm, int remoteRank, int tag, mscclppDevConn_t** devConn),
       (comm, remoteRank, tag, devConn), comm, remoteRank, tag, 0, 0)
TOOL_PLAIN(ProxyLaunch, (mscclppComm_t comm), (comm), comm)
TOOL_PLAIN(ProxyStop, (mscclppComm_t comm), (comm), comm)
TOOL_PLAIN(CommRank, (mscclppComm_t comm, int* rank), (comm, rank), comm)
TOOL_PLAIN(CommSize, (mscclppComm_t comm, int* size), (comm, size), comm)
TOOL_PLAIN(SetBootstrapConnTimeout, (int timeout), (timeout), NULL)
TOOL_PLAIN(SetLogHandler, (mscclppLogHandler_t handler), (handler), NULL)
TOOL_R(RegisterBuffer, (mscclppComm_t comm, void* local_memory, size_t size, struct mscclppRegisteredMemory* regMem),
       (comm, local_memory, size, regMem), comm, -1, -1, 1, size)
TOOL_R(RegisteredBufferWrite,
       (mscclppComm_t comm, struct mscclppRegisteredMemory* regMem, void* srcBuff, size_t size, uint32_t srcOffset,
        uint32_t dstOffset, int64_t stream),
       (comm, regMem, srcBuff, size, srcOffset, dstOffset, stream), comm, -1, -1, 1, size)
TOOL_PLAIN(GetVersion, (int* version), (version), NULL)
TOOL_PLAIN(CommGetAsyncError, (mscclppComm_t comm, mscclppResult_t * asyncError), (comm, asyncError), comm)
TOOL_R(HostAlloc, (void** ptr, size_t size), (ptr, size), NULL, -1, -1, 1, size)
TOOL_PLAIN(HostFree, (void* ptr), (ptr), NULL)

/* the init calls: the clock anchor at entry, the communicator at return */
#define TOOL_INIT(Name, Params, Args)                                                        \
  static mscclppResult_t icpt##Name Params                                                   \
  {                                                                                          \
    int below;                                                                               \
    void (*next)(void) = toolNext(layer, mscclppToolFn##Name, &below);                       \
    toolAnchorClock();                                                                       \
    struct toolCall c = {.fn = mscclppToolFn##Name, .peer = -1, .tag = -1};                  \
    c.t0 = toolNowNs();                                                                      \
    mscclppResult_t r = ((mscclppTool##Name##_t)next) Args;                                  \
    c.t1 = toolNowNs();                                                                      \
    if (r == mscclppSuccess && comm != NULL) {                                               \
      toolCommAdd(*comm, rank, nranks);                                                      \
      c.comm = *comm;                                                                        \
    }                                                                                        \
    c.result = (int)r;                                                                       \
    toolAfter(&c);                                                                           \
    return r;                                                                                \
  }
TOOL_INIT(CommInitRank, (int layer, mscclppComm_t* comm, int nranks, const char* ipPortPair, int rank),
          (below, comm, nranks, ipPortPair, rank))
TOOL_INIT(CommInitRankFromId, (int layer, mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank),
          (below, comm, nranks, id, rank))

static mscclppResult_t icptCommDestroy(int layer, mscclppComm_t comm)
{
  int below;
  void (*next)(void) = toolNext(layer, mscclppToolFnCommDestroy, &below);
  struct toolCall c = {.fn = mscclppToolFnCommDestroy, .comm = comm, .peer = -1, .tag = -1};
  c.t0 = toolNowNs();
  mscclppResult_t r = ((mscclppToolCommDestroy_t)next)(below, comm);
  c.t1 = toolNowNs();
  if (r == mscclppSuccess) toolCommRemove(comm);
  c.result = (int)r;
  toolAfter(&c);
  return r;
}

static const char* icptGetErrorString(int layer, mscclppResult_t result)
{
  int below;
  void (*next)(void) = toolNext(layer, mscclppToolFnGetErrorString, &below);
  struct toolCall c = {.fn = mscclppToolFnGetErrorString, .peer = -1, .tag = -1, .result = -1};
  c.t0 = toolNowNs();
  const char* s = ((mscclppToolGetErrorString_t)next)(below, result);
  c.t1 = toolNowNs();
  toolAfter(&c);
  return s;
}

static const char* icptGetLastError(int layer, mscclppComm_t comm)
{
  int below;
  void (*next)(void) = toolNext(layer, mscclppToolFnGetLastError, &below);
  struct toolCall c = {.fn = mscclppToolFnGetLastError, .comm = comm, .peer = -1, .tag = -1, .result = -1};
  c.t0 = toolNowNs();
  const char* s = ((mscclppToolGetLastError_t)next)(below, comm);
  c.t1 = toolNowNs();
  toolAfter(&c);
  return s;
}

static void icptDefaultLogHandler(int layer, const char* msg)
{
  int below;
  void (*next)(void) = toolNext(layer, mscclppToolFnDefaultLogHandler, &below);
  struct toolCall c = {.fn = mscclppToolFnDefaultLogHandler, .peer = -1, .tag = -1, .result = -1};
  c.t0 = toolNowNs();
  ((mscclppToolDefaultLogHandler_t)next)(below, msg);
  c.t1 = toolNowNs();
  toolAfter(&c);
}

/* Registers layer name with every interceptor above and ctx/fini; 0 on success. */
static int toolRegisterAll(const char* name, void* ctx, void (*fini)(void*))
{
  int layer;
  if (mscclppToolRegisterName(name, &layer) != mscclppSuccess) {
    fprintf(stderr, "%s: not registered: %s\n", TOOL_NAME, mscclppGetLastError(NULL));
    return -1;
  }
#define TOOL_REGISTER_ONE(Name, Ret, Params, Args)                                      \
  {                                                                                     \
    mscclppTool##Name##_t f = icpt##Name;                                               \
    if (mscclppToolRegisterFunction(layer, mscclppToolFn##Name, (void (*)(void))f) != mscclppSuccess) \
      fprintf(stderr, "%s: cannot intercept %s: %s\n", TOOL_NAME, #Name, mscclppGetLastError(NULL)); \
  }
  MSCCLPP_TOOL_FUNCTIONS(TOOL_REGISTER_ONE)
  MSCCLPP_TOOL_VOID_FUNCTIONS(TOOL_REGISTER_ONE)
#undef TOOL_REGISTER_ONE
  mscclppToolSetContext(layer, ctx, fini);
  return 0;
}

/* The result code's name; "-" for functions that return no code. */
__attribute__((unused)) static const char* toolResultName(int r)
{
  static const char* const names[] = {"mscclppSuccess",       "mscclppUnhandledCudaError", "mscclppSystemError",
                                      "mscclppInternalError", "mscclppInvalidArgument",    "mscclppInvalidUsage",
                                      "mscclppRemoteError",   "mscclppInProgress"};
  if (r < 0) return "-";
  return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "mscclppUnknownResult";
}

#endif
