#include "mscclpp.h" /* first, on purpose: the header needs no include before it */
#include "mscclpp.h" /* and it is guarded */
#include "mscclppfifo.h"

/*
 * abi_layout.c: every size, offset, alignment, enum value and macro of
 * API.md section 1, checked from C11: at compile time (_Static_assert, and
 * _Generic for types; a wrong function signature is an incompatible-pointer
 * error under -Werror) and again at run time with a report of each value.
 */
#include <stdalign.h>

#include "check.h"

#define TEST_ALIGNOF(T) alignof(T)
#include "abi_table.h"

/* ---- compile-time layout ---- */
_Static_assert(sizeof(mscclppResult_t) == 4, "mscclppResult_t is 4 bytes");
_Static_assert(sizeof(mscclppTransport_t) == 4, "mscclppTransport_t is 4 bytes");
_Static_assert(sizeof(mscclppTriggerType_t) == 8, "mscclppTriggerType_t is 64-bit");
_Static_assert(sizeof(union mscclppTrigger) == 16, "trigger is 16 bytes");
_Static_assert(alignof(union mscclppTrigger) == 16, "trigger is 16-aligned");
_Static_assert(sizeof(struct mscclppConcurrentFifo) == 32, "fifo is 32 bytes");
_Static_assert(offsetof(struct mscclppConcurrentFifo, connId) == 24, "fifo.connId at 24");
_Static_assert(sizeof(struct mscclppDevConnSignalEpochId) == 16, "epoch ids are 16 bytes");
_Static_assert(alignof(struct mscclppDevConnSignalEpochId) == 16, "epoch ids are 16-aligned");
_Static_assert(sizeof(struct mscclppDevConn) == 80, "devconn is 80 bytes");
_Static_assert(alignof(struct mscclppDevConn) == 8, "devconn is 8-aligned");
_Static_assert(offsetof(struct mscclppDevConn, remoteRank) == 32, "remoteRank at 32");
_Static_assert(offsetof(struct mscclppDevConn, tag) == 36, "tag at 36");
_Static_assert(offsetof(struct mscclppDevConn, localBuff) == 40, "localBuff at 40");
_Static_assert(offsetof(struct mscclppDevConn, localSignalEpochId) == 48, "localSignalEpochId at 48");
_Static_assert(offsetof(struct mscclppDevConn, remoteSignalEpochId) == 56, "remoteSignalEpochId at 56");
_Static_assert(offsetof(struct mscclppDevConn, waitEpochId) == 64, "waitEpochId at 64");
_Static_assert(offsetof(struct mscclppDevConn, remoteBuff) == 72, "remoteBuff at 72");
_Static_assert(sizeof(mscclppUniqueId) == MSCCLPP_UNIQUE_ID_BYTES, "unique id is 128 bytes");
_Static_assert(MSCCLPP_VERSION == 100, "version 0.1.0");

/* ---- types, by _Generic ---- */
#define IS_TYPE(expr, T) _Generic((expr), T : 1, default : 0)
#define TYPE_CHECK(expr, T) ABI_EQ("type of " #expr " is " #T, IS_TYPE(expr, T), 1)

static void c_type_checks(void)
{
  struct mscclppDevConn* dc = NULL;
  struct mscclppConcurrentFifo* ff = NULL;
  mscclppTrigger* tr = NULL;
  mscclppUniqueId* id = NULL;
  (void)dc;
  (void)ff;
  (void)tr;
  (void)id;
  TYPE_CHECK((mscclppComm_t)0, struct mscclppComm*);
  TYPE_CHECK((mscclppTrigger_t)0, union mscclppTrigger*);
  TYPE_CHECK((mscclppBufferHandle_t)0, uint32_t);
  TYPE_CHECK((mscclppTriggerType_t)0, uint64_t);
  TYPE_CHECK((mscclppLogHandler_t)0, void (*)(const char*));
  TYPE_CHECK((mscclppDevConn_t*)0, struct mscclppDevConn*);
  TYPE_CHECK(tr->value[0], uint64_t);
  TYPE_CHECK(ff->triggerFifo, mscclppTrigger*);
  TYPE_CHECK(ff->triggerFifoTail, uint64_t*);
  TYPE_CHECK(ff->triggerFifoHead, uint64_t*);
  TYPE_CHECK(ff->connId, int);
  TYPE_CHECK(dc->fifo, struct mscclppConcurrentFifo);
  TYPE_CHECK(dc->remoteRank, int);
  TYPE_CHECK(dc->tag, int);
  TYPE_CHECK(dc->localBuff, void*);
  TYPE_CHECK(dc->localSignalEpochId, mscclppDevConnSignalEpochId*);
  TYPE_CHECK(dc->remoteSignalEpochId, mscclppDevConnSignalEpochId*);
  TYPE_CHECK(dc->waitEpochId, uint64_t*);
  TYPE_CHECK(dc->remoteBuff, void*);
  TYPE_CHECK(id->internal[0], char);
}

/* ---- every function signature (an incompatible pointer is an error) ---- */
static void c_signature_checks(void)
{
  mscclppResult_t (*getUniqueId)(mscclppUniqueId*) = mscclppGetUniqueId;
  mscclppResult_t (*initRank)(mscclppComm_t*, int, const char*, int) = mscclppCommInitRank;
  mscclppResult_t (*initRankFromId)(mscclppComm_t*, int, mscclppUniqueId, int) = mscclppCommInitRankFromId;
  mscclppResult_t (*allGather)(mscclppComm_t, void*, int) = mscclppBootstrapAllGather;
  mscclppResult_t (*barrier)(mscclppComm_t) = mscclppBootstrapBarrier;
  mscclppResult_t (*destroy)(mscclppComm_t) = mscclppCommDestroy;
  const char* (*errorString)(mscclppResult_t) = mscclppGetErrorString;
  mscclppResult_t (*connect)(mscclppComm_t, int, int, void*, uint64_t, mscclppTransport_t, const char*) =
    mscclppConnect;
  mscclppResult_t (*connectWithoutBuffer)(mscclppComm_t, int, int, mscclppTransport_t, const char*) =
    mscclppConnectWithoutBuffer;
  mscclppResult_t (*registerBufferForConnection)(mscclppComm_t, int, void*, uint64_t, mscclppBufferHandle_t*) =
    mscclppRegisterBufferForConnection;
  mscclppResult_t (*connectionSetup)(mscclppComm_t) = mscclppConnectionSetup;
  mscclppResult_t (*getAll)(mscclppComm_t, mscclppDevConn_t**, int*) = mscclppGetAllDeviceConnections;
  mscclppResult_t (*getOne)(mscclppComm_t, int, int, mscclppDevConn_t**) = mscclppGetDeviceConnection;
  mscclppResult_t (*proxyLaunch)(mscclppComm_t) = mscclppProxyLaunch;
  mscclppResult_t (*proxyStop)(mscclppComm_t) = mscclppProxyStop;
  mscclppResult_t (*commRank)(mscclppComm_t, int*) = mscclppCommRank;
  mscclppResult_t (*commSize)(mscclppComm_t, int*) = mscclppCommSize;
  mscclppResult_t (*setTimeout)(int) = mscclppSetBootstrapConnTimeout;
  void (*defaultLogHandler)(const char*) = mscclppDefaultLogHandler;
  mscclppResult_t (*setLogHandler)(mscclppLogHandler_t) = mscclppSetLogHandler;
  const char* (*lastError)(mscclppComm_t) = mscclppGetLastError;
  mscclppResult_t (*getVersion)(int*) = mscclppGetVersion;
  mscclppResult_t (*asyncError)(mscclppComm_t, mscclppResult_t*) = mscclppCommGetAsyncError;
  mscclppResult_t (*hostAlloc)(void**, size_t) = mscclppHostAlloc;
  mscclppResult_t (*hostFree)(void*) = mscclppHostFree;
  void* volatile all[] = {
    (void*)&getUniqueId,     (void*)&initRank,      (void*)&initRankFromId,
    (void*)&allGather,       (void*)&barrier,       (void*)&destroy,
    (void*)&errorString,     (void*)&connect,       (void*)&connectWithoutBuffer,
    (void*)&registerBufferForConnection, (void*)&connectionSetup, (void*)&getAll,
    (void*)&getOne,          (void*)&proxyLaunch,   (void*)&proxyStop,
    (void*)&commRank,        (void*)&commSize,      (void*)&setTimeout,
    (void*)&defaultLogHandler, (void*)&setLogHandler, (void*)&lastError,
    (void*)&getVersion,      (void*)&asyncError,    (void*)&hostAlloc,
    (void*)&hostFree,
  };
  (void)all;
  test_note("ok   all %d function signatures match the spec", (int)(sizeof all / sizeof all[0]));
}

/* The C inline connection functions exist with the documented shapes. */
static void c_inline_checks(void)
{
  void (*epochIncrement)(mscclppDevConn_t*) = mscclppDevConnEpochIncrement;
  mscclppResult_t (*put)(mscclppDevConn_t*, uint64_t, uint64_t, uint64_t) = mscclppDevConnPut;
  mscclppResult_t (*sig)(mscclppDevConn_t*) = mscclppDevConnSignal;
  mscclppResult_t (*putWithSignal)(mscclppDevConn_t*, uint64_t, uint64_t, uint64_t) = mscclppDevConnPutWithSignal;
  mscclppResult_t (*putWithSignalAndFlush)(mscclppDevConn_t*, uint64_t, uint64_t, uint64_t) =
    mscclppDevConnPutWithSignalAndFlush;
  mscclppResult_t (*flush)(mscclppDevConn_t*) = mscclppDevConnFlush;
  mscclppResult_t (*wait)(mscclppDevConn_t*) = mscclppDevConnWait;
  mscclppResult_t (*waitTimeout)(mscclppDevConn_t*, int64_t) = mscclppDevConnWaitTimeout;
  void* volatile all[] = {(void*)&epochIncrement, (void*)&put,   (void*)&sig,  (void*)&putWithSignal,
                          (void*)&putWithSignalAndFlush, (void*)&flush, (void*)&wait, (void*)&waitTimeout};
  (void)all;

  /* epochIncrement on a struct the library did not hand out: misuse is an error
   * (the last error names it), never a write through its pointers; the real
   * increment is checked on live connections (datapath.c, shm/) */
  mscclppDevConnSignalEpochId ep = {41, 7};
  uint64_t waitId = 0;
  mscclppDevConn_t dc;
  memset(&dc, 0, sizeof dc);
  dc.localSignalEpochId = &ep;
  dc.waitEpochId = &waitId;
  mscclppDevConnEpochIncrement(&dc);
  ABI_EQ("mscclppDevConnEpochIncrement on a foreign struct leaves device", ep.device, 41);
  ABI_EQ("mscclppDevConnEpochIncrement on a foreign struct leaves proxy", ep.proxy, 7);
  ABI_EQ("mscclppDevConnEpochIncrement on a foreign struct sets the last error",
         strstr(mscclppGetLastError(NULL), "mscclppConnEpochIncrement") != NULL, 1);
  ABI_EQ("mscclppDevConnPutWithSignal on a foreign struct is invalid usage", mscclppDevConnPutWithSignal(&dc, 0, 0, 8),
         mscclppInvalidUsage);
  ABI_EQ("mscclppDevConnPutWithSignal on a foreign struct leaves device", ep.device, 41);
  ABI_EQ("mscclppDevConnPutWithSignal on a foreign struct names mscclppConnOp",
         strstr(mscclppGetLastError(NULL), "mscclppConnOp: ") == mscclppGetLastError(NULL), 1);
  ABI_EQ("mscclppDevConnWait on a foreign struct is invalid usage", mscclppDevConnWait(&dc), mscclppInvalidUsage);
  ABI_EQ("mscclppDevConnWait on a foreign struct leaves waitEpochId", waitId, 0);
}

int main(void)
{
  test_init("abi_layout.c");
  abi_run_all();
  c_type_checks();
  c_signature_checks();
  c_inline_checks();
  return test_finish();
}
