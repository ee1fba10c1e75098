/*
 * forward.c: the public entry points. Each checks that it is not running in
 * a child forked after the library was loaded (the Go runtime does not
 * survive fork: any call into Go there may hang forever), then forwards to
 * its Go export go_<name>. In C because the fork check must not enter Go.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "_cgo_export.h"
#include "forward.h"

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
}

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

#define FWD(name, params, args)                                \
  mscclppResult_t name params                                  \
  {                                                            \
    if (capiForked(#name)) return mscclppInvalidUsage;         \
    return (mscclppResult_t)go_##name args;                    \
  }

FWD(mscclppGetUniqueId, (mscclppUniqueId * uniqueId), (uniqueId))
FWD(mscclppCommInitRank, (mscclppComm_t * comm, int nranks, const char* ipPortPair, int rank),
    (comm, nranks, (char*)ipPortPair, rank))
FWD(mscclppCommInitRankFromId, (mscclppComm_t * comm, int nranks, mscclppUniqueId id, int rank),
    (comm, nranks, id, rank))
FWD(mscclppBootstrapAllGather, (mscclppComm_t comm, void* data, int size), (comm, data, size))
FWD(mscclppBootstrapBarrier, (mscclppComm_t comm), (comm))
FWD(mscclppCommDestroy, (mscclppComm_t comm), (comm))
FWD(mscclppConnect,
    (mscclppComm_t comm, int remoteRank, int tag, void* localBuff, uint64_t buffSize,
     mscclppTransport_t transportType, const char* ibDev),
    (comm, remoteRank, tag, localBuff, buffSize, transportType, (char*)ibDev))
FWD(mscclppConnectWithoutBuffer,
    (mscclppComm_t comm, int remoteRank, int tag, mscclppTransport_t transportType, const char* ibDev),
    (comm, remoteRank, tag, transportType, (char*)ibDev))
FWD(mscclppRegisterBufferForConnection,
    (mscclppComm_t comm, int connIdx, void* localBuff, uint64_t buffSize, mscclppBufferHandle_t* handle),
    (comm, connIdx, localBuff, buffSize, handle))
FWD(mscclppConnectionSetup, (mscclppComm_t comm), (comm))
FWD(mscclppGetAllDeviceConnections, (mscclppComm_t comm, mscclppDevConn_t * *devConns, int* nConns),
    (comm, (void**)devConns, nConns))
FWD(mscclppGetDeviceConnection, (mscclppComm_t comm, int remoteRank, int tag, mscclppDevConn_t** devConn),
    (comm, remoteRank, tag, (void**)devConn))
FWD(mscclppProxyLaunch, (mscclppComm_t comm), (comm))
FWD(mscclppProxyStop, (mscclppComm_t comm), (comm))
FWD(mscclppCommRank, (mscclppComm_t comm, int* rank), (comm, rank))
FWD(mscclppCommSize, (mscclppComm_t comm, int* size), (comm, size))
FWD(mscclppSetBootstrapConnTimeout, (int timeout), (timeout))
FWD(mscclppSetLogHandler, (mscclppLogHandler_t handler), (handler))
FWD(mscclppGetVersion, (int* version), (version))
FWD(mscclppCommGetAsyncError, (mscclppComm_t comm, mscclppResult_t* asyncError), (comm, (int*)asyncError))
FWD(mscclppHostAlloc, (void** ptr, size_t size), (ptr, size))
FWD(mscclppHostFree, (void* ptr), (ptr))

const char* mscclppGetErrorString(mscclppResult_t code)
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

void mscclppDefaultLogHandler(const char* msg)
{
  if (msg == NULL) return;
  if (forked) {
    fputs(msg, stdout);
    fflush(stdout);
    return;
  }
  go_mscclppDefaultLogHandler((char*)msg);
}

const char* mscclppGetLastError(mscclppComm_t comm)
{
  if (!forked && comm != NULL) {
    const char* s = go_mscclppGetLastError(comm);
    if (s != NULL) return s;
  }
  return globalErr; /* process-wide text; only ever overwritten in place */
}
