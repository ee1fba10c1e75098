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
#include <stdio.h>

#include "_cgo_export.h"
#include "../impl/status/errs.h" /* impl/status: error text, result-code strings, the fork check */
#include "forward.h"
#include "tools.h"

/* Layer 0 of the tool stack: the library's own functions, handed to tools.c. */
#define CAPI_TOOL_LIB_ENTRY(Name, Ret, Params, Args) [mscclppToolFn##Name] = (capiToolFn)capiLib##Name,
static const capiToolFn libraryFn[mscclppToolNumFunctions] = {
  MSCCLPP_TOOL_FUNCTIONS(CAPI_TOOL_LIB_ENTRY) MSCCLPP_TOOL_VOID_FUNCTIONS(CAPI_TOOL_LIB_ENTRY)};

__attribute__((constructor)) static void capiLoad(void) { capiToolsLoad(libraryFn); }

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
    if (errForked("mscclpp" #Name)) return mscclppInvalidUsage;                                \
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

const char* capiLibGetErrorString(int layer, mscclppResult_t code)
{
  (void)layer;
  return errString(code);
}

const char* mscclppGetErrorString(mscclppResult_t code)
{
  int top = capiToolTop(mscclppToolFnGetErrorString);
  if (__builtin_expect(top != 0, 0) && !errForkedChild)
    return ((mscclppToolGetErrorString_t)capiToolAt(top, mscclppToolFnGetErrorString))(top, code);
  return errString(code);
}

void capiLibDefaultLogHandler(int layer, const char* msg)
{
  (void)layer;
  if (msg == NULL) return;
  if (errForkedChild) {
    fputs(msg, stdout);
    fflush(stdout);
    return;
  }
  go_mscclppDefaultLogHandler((char*)msg);
}

void mscclppDefaultLogHandler(const char* msg)
{
  int top = capiToolTop(mscclppToolFnDefaultLogHandler);
  if (__builtin_expect(top != 0, 0) && !errForkedChild) {
    ((mscclppToolDefaultLogHandler_t)capiToolAt(top, mscclppToolFnDefaultLogHandler))(top, msg);
    return;
  }
  capiLibDefaultLogHandler(0, msg);
}

const char* capiLibGetLastError(int layer, mscclppComm_t comm)
{
  (void)layer;
  if (!errForkedChild && comm != NULL) {
    const char* s = go_mscclppGetLastError(comm);
    if (s != NULL) return s;
  }
  return errLast(NULL); /* process-wide text; only ever overwritten in place */
}

const char* mscclppGetLastError(mscclppComm_t comm)
{
  int top = capiToolTop(mscclppToolFnGetLastError);
  if (__builtin_expect(top != 0, 0) && !errForkedChild)
    return ((mscclppToolGetLastError_t)capiToolAt(top, mscclppToolFnGetLastError))(top, comm);
  return capiLibGetLastError(0, comm);
}
