/*
 * mscclpp_tools.h: tools stacked over the libmscclpp API (interception
 * layers, after MPI's QMPI proposal). Extension: not part of MSCCL++ 0.1.
 *
 * A tool is a shared library (or the application itself) that registers a
 * named layer and, for any API function it wants, an interceptor. A call to
 * an intercepted function enters the outermost layer's interceptor with that
 * layer's number; the interceptor may look at or change the arguments, call
 * the next layer (mscclppToolGetNext) zero, one or more times, and look at or
 * change the result. The lowest layer, number 0, is the library itself.
 *
 * Loading: every library named in MSCCLPP_TOOLS (colon-separated paths, as
 * dlopen takes them) is dlopened, in order, while libmscclpp loads; its
 * constructor registers its layer. The first listed is the outermost. A
 * library that does not load, loads but registers no layer, or was already
 * loaded (listed twice: it registers once) is skipped with a WARN line on
 * stderr that says which. A program (or a library it links) may also
 * register from its own constructor or from main: layers registered later
 * sit below those registered earlier, so the order is always the order of
 * registration, outermost first.
 *
 *   static int myLayer;
 *   static mscclppResult_t myCommRank(int layer, mscclppComm_t comm, int* rank)
 *   {
 *     void (*next)(void);
 *     int below;
 *     mscclppToolGetNext(layer, mscclppToolFnCommRank, &next, &below);
 *     mscclppResult_t r = ((mscclppToolCommRank_t)next)(below, comm, rank);
 *     ... look at r and *rank ...
 *     return r;
 *   }
 *   __attribute__((constructor)) static void myInit(void)
 *   {
 *     if (mscclppToolRegisterName("my-tool", &myLayer) != mscclppSuccess) return;
 *     mscclppToolRegisterFunction(myLayer, mscclppToolFnCommRank, (void (*)(void))myCommRank);
 *   }
 *
 * Rules for tools:
 * - A constructor may only call the mscclppTool* functions and
 *   mscclppGetLastError(NULL) (the text of a failed registration): the rest
 *   of the library is not running yet while it loads.
 * - Inside an interceptor, call other API functions through
 *   mscclppToolGetNext(layer, ...) too: calling the public function enters
 *   the stack again at the top (and the same interceptor, recursively).
 * - Interceptors run on the application's threads, concurrently.
 * - The data-path functions (mscclppConnOp, mscclppConnPutHandle,
 *   mscclppConnWait, mscclppConnWaitNext, mscclppConnEpochIncrement,
 *   mscclppConnSignalOp, mscclppFifoPush, mscclppFifoWaitServed and the
 *   connection methods) are
 *   never intercepted: they are the hot path.
 * - In a child forked after the library loaded, calls return
 *   mscclppInvalidUsage before reaching any tool, and no fini runs.
 *
 * Self-contained; works from C99/C11 and C++11..C++20.
 */
#ifndef MSCCLPP_TOOLS_H_
#define MSCCLPP_TOOLS_H_

#include "mscclpp.h"

/* mscclppRegisterBuffer's argument; the type is complete in C++ only. */
struct mscclppRegisteredMemory;

/* The layer of the library itself: the bottom of every stack. */
#define MSCCLPP_TOOL_LAYER_LIBRARY 0
/* The most layers (tools) one process may register. */
#define MSCCLPP_TOOL_MAX_LAYERS 32
/* The longest layer name, not counting the terminating NUL. */
#define MSCCLPP_TOOL_MAX_NAME 63

/* Every function a tool can intercept. The values are ABI: new functions
 * are only ever added at the end. mscclppToolNumFunctions is the count this
 * header knows; a library older than the header rejects the values it does
 * not know with mscclppInvalidArgument. */
typedef enum
{
  mscclppToolFnGetUniqueId = 0,
  mscclppToolFnCommInitRank = 1,
  mscclppToolFnCommInitRankFromId = 2,
  mscclppToolFnBootstrapAllGather = 3,
  mscclppToolFnBootstrapBarrier = 4,
  mscclppToolFnCommDestroy = 5,
  mscclppToolFnGetErrorString = 6,
  mscclppToolFnConnect = 7,
  mscclppToolFnConnectWithoutBuffer = 8,
  mscclppToolFnRegisterBufferForConnection = 9,
  mscclppToolFnConnectionSetup = 10,
  mscclppToolFnGetAllDeviceConnections = 11,
  mscclppToolFnGetDeviceConnection = 12,
  mscclppToolFnProxyLaunch = 13,
  mscclppToolFnProxyStop = 14,
  mscclppToolFnCommRank = 15,
  mscclppToolFnCommSize = 16,
  mscclppToolFnSetBootstrapConnTimeout = 17,
  mscclppToolFnDefaultLogHandler = 18,
  mscclppToolFnSetLogHandler = 19,
  mscclppToolFnRegisterBuffer = 20,
  mscclppToolFnRegisteredBufferWrite = 21,
  /* the extensions declared in mscclpp.h that are not on the data path */
  mscclppToolFnGetLastError = 22,
  mscclppToolFnGetVersion = 23,
  mscclppToolFnCommGetAsyncError = 24,
  mscclppToolFnHostAlloc = 25,
  mscclppToolFnHostFree = 26,
  mscclppToolNumFunctions = 27
} mscclppToolFunction;

/* An interceptor's type: the layer it runs as, then the function's own
 * parameters. mscclppToolGetNext hands out the next layer's function as a
 * void (*)(void): cast it to the function's type below before calling. */
typedef mscclppResult_t (*mscclppToolGetUniqueId_t)(int layer, mscclppUniqueId* uniqueId);
typedef mscclppResult_t (*mscclppToolCommInitRank_t)(int layer, mscclppComm_t* comm, int nranks,
                                                     const char* ipPortPair, int rank);
typedef mscclppResult_t (*mscclppToolCommInitRankFromId_t)(int layer, mscclppComm_t* comm, int nranks,
                                                           mscclppUniqueId id, int rank);
typedef mscclppResult_t (*mscclppToolBootstrapAllGather_t)(int layer, mscclppComm_t comm, void* data, int size);
typedef mscclppResult_t (*mscclppToolBootstrapBarrier_t)(int layer, mscclppComm_t comm);
typedef mscclppResult_t (*mscclppToolCommDestroy_t)(int layer, mscclppComm_t comm);
typedef const char* (*mscclppToolGetErrorString_t)(int layer, mscclppResult_t result);
typedef mscclppResult_t (*mscclppToolConnect_t)(int layer, mscclppComm_t comm, int remoteRank, int tag,
                                                void* localBuff, uint64_t buffSize,
                                                mscclppTransport_t transportType, const char* ibDev);
typedef mscclppResult_t (*mscclppToolConnectWithoutBuffer_t)(int layer, mscclppComm_t comm, int remoteRank, int tag,
                                                             mscclppTransport_t transportType, const char* ibDev);
typedef mscclppResult_t (*mscclppToolRegisterBufferForConnection_t)(int layer, mscclppComm_t comm, int connIdx,
                                                                    void* localBuff, uint64_t buffSize,
                                                                    mscclppBufferHandle_t* handle);
typedef mscclppResult_t (*mscclppToolConnectionSetup_t)(int layer, mscclppComm_t comm);
typedef mscclppResult_t (*mscclppToolGetAllDeviceConnections_t)(int layer, mscclppComm_t comm,
                                                                mscclppDevConn_t** devConns, int* nConns);
typedef mscclppResult_t (*mscclppToolGetDeviceConnection_t)(int layer, mscclppComm_t comm, int remoteRank, int tag,
                                                            mscclppDevConn_t** devConn);
typedef mscclppResult_t (*mscclppToolProxyLaunch_t)(int layer, mscclppComm_t comm);
typedef mscclppResult_t (*mscclppToolProxyStop_t)(int layer, mscclppComm_t comm);
typedef mscclppResult_t (*mscclppToolCommRank_t)(int layer, mscclppComm_t comm, int* rank);
typedef mscclppResult_t (*mscclppToolCommSize_t)(int layer, mscclppComm_t comm, int* size);
typedef mscclppResult_t (*mscclppToolSetBootstrapConnTimeout_t)(int layer, int timeout);
typedef void (*mscclppToolDefaultLogHandler_t)(int layer, const char* msg);
typedef mscclppResult_t (*mscclppToolSetLogHandler_t)(int layer, mscclppLogHandler_t handler);
typedef mscclppResult_t (*mscclppToolRegisterBuffer_t)(int layer, mscclppComm_t comm, void* local_memory,
                                                       size_t size, struct mscclppRegisteredMemory* regMem);
typedef mscclppResult_t (*mscclppToolRegisteredBufferWrite_t)(int layer, mscclppComm_t comm,
                                                              struct mscclppRegisteredMemory* regMem, void* srcBuff,
                                                              size_t size, uint32_t srcOffset, uint32_t dstOffset,
                                                              int64_t stream);
typedef const char* (*mscclppToolGetLastError_t)(int layer, mscclppComm_t comm);
typedef mscclppResult_t (*mscclppToolGetVersion_t)(int layer, int* version);
typedef mscclppResult_t (*mscclppToolCommGetAsyncError_t)(int layer, mscclppComm_t comm, mscclppResult_t* asyncError);
typedef mscclppResult_t (*mscclppToolHostAlloc_t)(int layer, void** ptr, size_t size);
typedef mscclppResult_t (*mscclppToolHostFree_t)(int layer, void* ptr);

/*
 * The same functions as an X-macro, for tools that wrap many of them:
 * X(Name, ReturnType, (parameters), (arguments)) for each function that
 * returns a value, and MSCCLPP_TOOL_VOID_FUNCTIONS for the one that does not.
 * Name is the function's name without "mscclpp": mscclppToolFn##Name is its
 * enum value and mscclppTool##Name##_t its type. MSCCLPP_TOOL_UNPAREN strips
 * the parentheses, to put the layer in front: (int layer, MSCCLPP_TOOL_UNPAREN P).
 */
#define MSCCLPP_TOOL_UNPAREN(...) __VA_ARGS__
#define MSCCLPP_TOOL_FUNCTIONS(X)                                                                                    \
  X(GetUniqueId, mscclppResult_t, (mscclppUniqueId * uniqueId), (uniqueId))                                          \
  X(CommInitRank, mscclppResult_t, (mscclppComm_t * comm, int nranks, const char* ipPortPair, int rank),             \
    (comm, nranks, ipPortPair, rank))                                                                                \
  X(CommInitRankFromId, mscclppResult_t, (mscclppComm_t * comm, int nranks, mscclppUniqueId id, int rank),           \
    (comm, nranks, id, rank))                                                                                        \
  X(BootstrapAllGather, mscclppResult_t, (mscclppComm_t comm, void* data, int size), (comm, data, size))             \
  X(BootstrapBarrier, mscclppResult_t, (mscclppComm_t comm), (comm))                                                 \
  X(CommDestroy, mscclppResult_t, (mscclppComm_t comm), (comm))                                                      \
  X(GetErrorString, const char*, (mscclppResult_t result), (result))                                                 \
  X(Connect, mscclppResult_t,                                                                                        \
    (mscclppComm_t comm, int remoteRank, int tag, void* localBuff, uint64_t buffSize,                                \
     mscclppTransport_t transportType, const char* ibDev),                                                           \
    (comm, remoteRank, tag, localBuff, buffSize, transportType, ibDev))                                              \
  X(ConnectWithoutBuffer, mscclppResult_t,                                                                           \
    (mscclppComm_t comm, int remoteRank, int tag, mscclppTransport_t transportType, const char* ibDev),              \
    (comm, remoteRank, tag, transportType, ibDev))                                                                   \
  X(RegisterBufferForConnection, mscclppResult_t,                                                                    \
    (mscclppComm_t comm, int connIdx, void* localBuff, uint64_t buffSize, mscclppBufferHandle_t* handle),            \
    (comm, connIdx, localBuff, buffSize, handle))                                                                    \
  X(ConnectionSetup, mscclppResult_t, (mscclppComm_t comm), (comm))                                                  \
  X(GetAllDeviceConnections, mscclppResult_t, (mscclppComm_t comm, mscclppDevConn_t * *devConns, int* nConns),       \
    (comm, devConns, nConns))                                                                                        \
  X(GetDeviceConnection, mscclppResult_t,                                                                            \
    (mscclppComm_t comm, int remoteRank, int tag, mscclppDevConn_t** devConn), (comm, remoteRank, tag, devConn))     \
  X(ProxyLaunch, mscclppResult_t, (mscclppComm_t comm), (comm))                                                      \
  X(ProxyStop, mscclppResult_t, (mscclppComm_t comm), (comm))                                                        \
  X(CommRank, mscclppResult_t, (mscclppComm_t comm, int* rank), (comm, rank))                                        \
  X(CommSize, mscclppResult_t, (mscclppComm_t comm, int* size), (comm, size))                                        \
  X(SetBootstrapConnTimeout, mscclppResult_t, (int timeout), (timeout))                                              \
  X(SetLogHandler, mscclppResult_t, (mscclppLogHandler_t handler), (handler))                                        \
  X(RegisterBuffer, mscclppResult_t,                                                                                 \
    (mscclppComm_t comm, void* local_memory, size_t size, struct mscclppRegisteredMemory* regMem),                   \
    (comm, local_memory, size, regMem))                                                                              \
  X(RegisteredBufferWrite, mscclppResult_t,                                                                          \
    (mscclppComm_t comm, struct mscclppRegisteredMemory* regMem, void* srcBuff, size_t size, uint32_t srcOffset,     \
     uint32_t dstOffset, int64_t stream),                                                                            \
    (comm, regMem, srcBuff, size, srcOffset, dstOffset, stream))                                                     \
  X(GetLastError, const char*, (mscclppComm_t comm), (comm))                                                         \
  X(GetVersion, mscclppResult_t, (int* version), (version))                                                          \
  X(CommGetAsyncError, mscclppResult_t, (mscclppComm_t comm, mscclppResult_t * asyncError), (comm, asyncError))      \
  X(HostAlloc, mscclppResult_t, (void** ptr, size_t size), (ptr, size))                                              \
  X(HostFree, mscclppResult_t, (void* ptr), (ptr))
#define MSCCLPP_TOOL_VOID_FUNCTIONS(X) X(DefaultLogHandler, void, (const char* msg), (msg))

#ifdef __cplusplus
extern "C" {
#endif

/* Registers a new layer named name (1..MSCCLPP_TOOL_MAX_NAME characters,
 * unique in the process) below every layer registered before it; *layer
 * receives its number (1, 2, ...: the outermost is 1). InvalidArgument for a
 * NULL, empty or too long name or NULL layer; InvalidUsage when the name is
 * taken or MSCCLPP_TOOL_MAX_LAYERS layers exist. */
mscclppResult_t mscclppToolRegisterName(const char* name, int* layer);

/* Makes interceptor (a function of type mscclppTool<Name>_t, cast to
 * void (*)(void)) layer's handler of fn; registering fn again for the same
 * layer replaces the handler. Safe while other threads call the API: a call
 * already past a layer does not see the change. InvalidArgument for an
 * unknown layer or fn or a NULL interceptor. */
mscclppResult_t mscclppToolRegisterFunction(int layer, mscclppToolFunction fn, void (*interceptor)(void));

/* The handler of fn in the first layer below layer that intercepts fn (the
 * library's own function when none does), and that layer's number: call
 * ((mscclppTool<Name>_t)*next)(*below, args...). layer may be any registered
 * layer, whether or not it intercepts fn. InvalidArgument for an unknown or
 * library layer, an unknown fn, or NULL next or below. */
mscclppResult_t mscclppToolGetNext(int layer, mscclppToolFunction fn, void (**next)(void), int* below);

/* Attaches ctx to layer. fini (may be NULL) is called once with ctx when the
 * process exits normally (exit() or a return from main), layers in the
 * reverse order of registration (innermost first), while every tool and
 * the library are still loaded. Setting the context again replaces both. */
mscclppResult_t mscclppToolSetContext(int layer, void* ctx, void (*fini)(void* ctx));
/* The context attached to layer (NULL when none). */
mscclppResult_t mscclppToolGetContext(int layer, void** ctx);

/* "mscclppCommInitRank" for mscclppToolFnCommInitRank, and so on; NULL for
 * an unknown value. */
const char* mscclppToolFunctionName(mscclppToolFunction fn);
/* The name layer was registered with ("libmscclpp" for layer 0); NULL for an
 * unknown layer. */
const char* mscclppToolLayerName(int layer);
/* The number of layers registered so far, the library not counted. */
int mscclppToolNumLayers(void);

#ifdef __cplusplus
}
#endif

#endif
