/*
 * forward.c: the public entry points. Each checks that it is not running in
 * a child forked after the library was loaded (the Go runtime does not
 * survive fork: any call into Go there may hang forever), then forwards to
 * its Go export go_<name>. In C because the fork check must not enter Go.
 *
 * Tools (tools.c): after the fork check, one load and one predictable
 * branch ask whether a tool intercepts the function; if one does, the call
 * enters the outermost such layer instead. capiLib<Name> is the library's
 * own layer (0): the Go export, reached by the innermost tool.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "_cgo_export.h"
#include "forward.h"
#include "tools.h"

static volatile int forked;
static int loadPid;
static pthread_mutex_t globalLock = PTHREAD_MUTEX_INITIALIZER;
static char globalErr[1024];

static void onForkChild(void)
{
  forked = 1;
  /* the lock may have been held by another thread at fork time */
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  globalLock = fresh;
}

__attribute__((constructor)) static void capiLoad(void)
{
  loadPid = (int)getpid();
  pthread_atfork(NULL, NULL, onForkChild);
  capiToolsLoad();
}

int capiForkedChild(void) { return forked; }

void capiSetGlobalError(const char* msg)
{
  pthread_mutex_lock(&globalLock);
  snprintf(globalErr, sizeof(globalErr), "%s", msg);
  pthread_mutex_unlock(&globalLock);
}

int capiForked(const char* fn)
{
  if (!forked) return 0;
  char msg[512];
  snprintf(msg, sizeof(msg),
           "%s called in pid %d, a child forked from pid %d after libmscclpp was loaded; the Go runtime behind "
           "the library does not survive fork(): use mscclpp only in the parent, or exec a new program",
           fn, (int)getpid(), loadPid);
  capiSetGlobalError(msg);
  return 1;
}

void capiCallLogHandler(mscclppLogHandler_t h, const char* msg) { h(msg); }

#define CAPI_UNPAREN(...) __VA_ARGS__

/* FWD(Name, (params), (args), (go args)): mscclpp<Name> and its layer 0, capiLib<Name>. */
#define FWD(Name, params, args, goargs)                                                        \
  mscclppResult_t capiLib##Name(int layer, CAPI_UNPAREN params)                                \
  {                                                                                            \
    (void)layer;                                                                               \
    return (mscclppResult_t)go_mscclpp##Name goargs;                                           \
  }                                                                                            \
  mscclppResult_t mscclpp##Name params                                                         \
  {                                                                                            \
    if (capiForked("mscclpp" #Name)) return mscclppInvalidUsage;                               \
    int top = capiToolTop(mscclppToolFn##Name);                                                \
    if (__builtin_expect(top != 0, 0))                                                         \
      return ((mscclppTool##Name##_t)capiToolAt(top, mscclppToolFn##Name))(top, CAPI_UNPAREN args); \
    return (mscclppResult_t)go_mscclpp##Name goargs;                                           \
  }

FWD(GetUniqueId, (mscclppUniqueId * uniqueId), (uniqueId), (uniqueId))
FWD(CommInitRank, (mscclppComm_t * comm, int nranks, const char* ipPortPair, int rank), (comm, nranks, ipPortPair, rank),
    (comm, nranks, (char*)ipPortPair, rank))
FWD(CommInitRankFromId, (mscclppComm_t * comm, int nranks, mscclppUniqueId id, int rank), (comm, nranks, id, rank),
    (comm, nranks, id, rank))
FWD(BootstrapAllGather, (mscclppComm_t comm, void* data, int size), (comm, data, size), (comm, data, size))
FWD(BootstrapBarrier, (mscclppComm_t comm), (comm), (comm))
FWD(CommDestroy, (mscclppComm_t comm), (comm), (comm))
FWD(Connect,
    (mscclppComm_t comm, int remoteRank, int tag, void* localBuff, uint64_t buffSize,
     mscclppTransport_t transportType, const char* ibDev),
    (comm, remoteRank, tag, localBuff, buffSize, transportType, ibDev),
    (comm, remoteRank, tag, localBuff, buffSize, transportType, (char*)ibDev))
FWD(ConnectWithoutBuffer,
    (mscclppComm_t comm, int remoteRank, int tag, mscclppTransport_t transportType, const char* ibDev),
    (comm, remoteRank, tag, transportType, ibDev), (comm, remoteRank, tag, transportType, (char*)ibDev))
FWD(RegisterBufferForConnection,
    (mscclppComm_t comm, int connIdx, void* localBuff, uint64_t buffSize, mscclppBufferHandle_t* handle),
    (comm, connIdx, localBuff, buffSize, handle), (comm, connIdx, localBuff, buffSize, handle))
FWD(ConnectionSetup, (mscclppComm_t comm), (comm), (comm))
FWD(GetAllDeviceConnections, (mscclppComm_t comm, mscclppDevConn_t * *devConns, int* nConns),
    (comm, devConns, nConns), (comm, (void**)devConns, nConns))
FWD(GetDeviceConnection, (mscclppComm_t comm, int remoteRank, int tag, mscclppDevConn_t** devConn),
    (comm, remoteRank, tag, devConn), (comm, remoteRank, tag, (void**)devConn))
FWD(ProxyLaunch, (mscclppComm_t comm), (comm), (comm))
FWD(ProxyStop, (mscclppComm_t comm), (comm), (comm))
FWD(CommRank, (mscclppComm_t comm, int* rank), (comm, rank), (comm, rank))
FWD(CommSize, (mscclppComm_t comm, int* size), (comm, size), (comm, size))
FWD(SetBootstrapConnTimeout, (int timeout), (timeout), (timeout))
FWD(SetLogHandler, (mscclppLogHandler_t handler), (handler), (handler))
FWD(GetVersion, (int* version), (version), (version))
FWD(CommGetAsyncError, (mscclppComm_t comm, mscclppResult_t* asyncError), (comm, asyncError),
    (comm, (int*)asyncError))
FWD(HostAlloc, (void** ptr, size_t size), (ptr, size), (ptr, size))
FWD(HostFree, (void* ptr), (ptr), (ptr))

/* The three functions below do not enter Go unless they must, and work in a
 * forked child too; there they skip the tools, like every other entry point. */

static inline const char* errorString(mscclppResult_t code)
{
  switch (code) {
  case mscclppSuccess: return "no error";
  case mscclppUnhandledCudaError: return "unhandled cuda error";
  case mscclppSystemError: return "unhandled system error";
  case mscclppInternalError: return "internal error";
  case mscclppInvalidArgument: return "invalid argument";
  case mscclppInvalidUsage: return "invalid usage";
  case mscclppRemoteError: return "remote process exited or there was a network error";
  case mscclppInProgress: return "MSCCL++ operation in progress";
  default: return "unknown result code";
  }
}

const char* capiLibGetErrorString(int layer, mscclppResult_t code)
{
  (void)layer;
  return errorString(code);
}

const char* mscclppGetErrorString(mscclppResult_t code)
{
  int top = capiToolTop(mscclppToolFnGetErrorString);
  if (__builtin_expect(top != 0, 0) && !forked)
    return ((mscclppToolGetErrorString_t)capiToolAt(top, mscclppToolFnGetErrorString))(top, code);
  return errorString(code);
}

void capiLibDefaultLogHandler(int layer, const char* msg)
{
  (void)layer;
  if (msg == NULL) return;
  if (forked) {
    fputs(msg, stdout);
    fflush(stdout);
    return;
  }
  go_mscclppDefaultLogHandler((char*)msg);
}

void mscclppDefaultLogHandler(const char* msg)
{
  int top = capiToolTop(mscclppToolFnDefaultLogHandler);
  if (__builtin_expect(top != 0, 0) && !forked) {
    ((mscclppToolDefaultLogHandler_t)capiToolAt(top, mscclppToolFnDefaultLogHandler))(top, msg);
    return;
  }
  capiLibDefaultLogHandler(0, msg);
}

const char* capiLibGetLastError(int layer, mscclppComm_t comm)
{
  (void)layer;
  if (!forked && comm != NULL) {
    const char* s = go_mscclppGetLastError(comm);
    if (s != NULL) return s;
  }
  return globalErr; /* process-wide text; only ever overwritten in place */
}

const char* mscclppGetLastError(mscclppComm_t comm)
{
  int top = capiToolTop(mscclppToolFnGetLastError);
  if (__builtin_expect(top != 0, 0) && !forked)
    return ((mscclppToolGetLastError_t)capiToolAt(top, mscclppToolFnGetLastError))(top, comm);
  return capiLibGetLastError(0, comm);
}
