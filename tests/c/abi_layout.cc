#include "mscclpp.h" // first, on purpose: the header needs no include before it

/*
 * abi_layout.cc: the layout facts of API.md section 1 from C++ (built as
 * C++11, 14, 17 and 20), and the C++-only parts of the header: the 64-bit
 * trigger type enum, mscclppRegisteredMemory's std::vector, the abstract
 * mscclppHostConn, the default ibDev argument, extern "C" linkage and the
 * connection methods of mscclppDevConn / mscclppConcurrentFifo.
 */
#include <type_traits>

#include "check.h"

#define TEST_ALIGNOF(T) alignof(T)
#include "abi_table.h"

// ---- compile time ----
static_assert(sizeof(mscclppResult_t) == 4, "mscclppResult_t is 4 bytes");
static_assert(sizeof(mscclppTransport_t) == 4, "mscclppTransport_t is 4 bytes");
static_assert(sizeof(mscclppTriggerType_t) == 8, "mscclppTriggerType_t is 64-bit");
static_assert(std::is_enum<mscclppTriggerType_t>::value, "mscclppTriggerType_t is an enum in C++");
static_assert(std::is_same<std::underlying_type<mscclppTriggerType_t>::type, uint64_t>::value,
              "enum mscclppTriggerType_t : uint64_t");
static_assert(sizeof(mscclppTrigger) == 16 && alignof(mscclppTrigger) == 16, "trigger 16/16");
static_assert(std::is_same<mscclppTrigger_t, mscclppTrigger*>::value, "mscclppTrigger_t");
static_assert(sizeof(mscclppConcurrentFifo) == 32, "fifo is 32 bytes");
static_assert(sizeof(mscclppDevConnSignalEpochId) == 16 && alignof(mscclppDevConnSignalEpochId) == 16, "epochs");
static_assert(sizeof(mscclppDevConn) == 80 && alignof(mscclppDevConn) == 8, "devconn 80/8");
static_assert(std::is_same<mscclppDevConn_t, mscclppDevConn>::value, "mscclppDevConn_t");
static_assert(std::is_standard_layout<mscclppDevConn>::value, "devconn is standard layout (device code copies it)");
static_assert(std::is_trivially_copyable<mscclppDevConn>::value, "devconn is trivially copyable");
static_assert(std::is_standard_layout<mscclppConcurrentFifo>::value, "fifo is standard layout");
static_assert(sizeof(mscclppUniqueId) == 128, "unique id");
static_assert(std::is_same<mscclppComm_t, mscclppComm*>::value, "mscclppComm_t");
static_assert(std::is_same<mscclppBufferHandle_t, uint32_t>::value, "mscclppBufferHandle_t");
static_assert(std::is_same<mscclppLogHandler_t, void (*)(const char*)>::value, "mscclppLogHandler_t");

// C++-only types
static_assert(sizeof(mscclppRegisteredMemoryP2P) == 16, "mscclppRegisteredMemoryP2P is 16 bytes");
static_assert(offsetof(mscclppRegisteredMemoryP2P, remoteBuff) == 0, "remoteBuff at 0");
static_assert(offsetof(mscclppRegisteredMemoryP2P, IbMr) == 8, "IbMr at 8");
static_assert(std::is_same<decltype(mscclppRegisteredMemoryP2P::remoteBuff), void*>::value, "remoteBuff type");
static_assert(std::is_same<decltype(mscclppRegisteredMemoryP2P::IbMr), const void*>::value, "IbMr type");
static_assert(std::is_same<decltype(mscclppRegisteredMemory::p2p), std::vector<mscclppRegisteredMemoryP2P>>::value,
              "mscclppRegisteredMemory::p2p is std::vector<mscclppRegisteredMemoryP2P>");
static_assert(std::is_abstract<mscclppHostConn>::value, "mscclppHostConn is abstract");
static_assert(std::has_virtual_destructor<mscclppHostConn>::value, "mscclppHostConn has a virtual destructor");
static_assert(std::is_same<mscclppHostConn_t, mscclppHostConn>::value, "mscclppHostConn_t");

// Every function signature.
static_assert(std::is_same<decltype(&mscclppGetUniqueId), mscclppResult_t (*)(mscclppUniqueId*)>::value, "");
static_assert(
  std::is_same<decltype(&mscclppCommInitRank), mscclppResult_t (*)(mscclppComm_t*, int, const char*, int)>::value, "");
static_assert(std::is_same<decltype(&mscclppCommInitRankFromId),
                           mscclppResult_t (*)(mscclppComm_t*, int, mscclppUniqueId, int)>::value,
              "");
static_assert(std::is_same<decltype(&mscclppBootstrapAllGather), mscclppResult_t (*)(mscclppComm_t, void*, int)>::value,
              "");
static_assert(std::is_same<decltype(&mscclppBootstrapBarrier), mscclppResult_t (*)(mscclppComm_t)>::value, "");
static_assert(std::is_same<decltype(&mscclppCommDestroy), mscclppResult_t (*)(mscclppComm_t)>::value, "");
static_assert(std::is_same<decltype(&mscclppGetErrorString), const char* (*)(mscclppResult_t)>::value, "");
static_assert(std::is_same<decltype(&mscclppConnect), mscclppResult_t (*)(mscclppComm_t, int, int, void*, uint64_t,
                                                                          mscclppTransport_t, const char*)>::value,
              "");
static_assert(std::is_same<decltype(&mscclppConnectWithoutBuffer),
                           mscclppResult_t (*)(mscclppComm_t, int, int, mscclppTransport_t, const char*)>::value,
              "");
static_assert(std::is_same<decltype(&mscclppRegisterBufferForConnection),
                           mscclppResult_t (*)(mscclppComm_t, int, void*, uint64_t, mscclppBufferHandle_t*)>::value,
              "");
static_assert(std::is_same<decltype(&mscclppConnectionSetup), mscclppResult_t (*)(mscclppComm_t)>::value, "");
static_assert(std::is_same<decltype(&mscclppGetAllDeviceConnections),
                           mscclppResult_t (*)(mscclppComm_t, mscclppDevConn_t**, int*)>::value,
              "");
static_assert(std::is_same<decltype(&mscclppGetDeviceConnection),
                           mscclppResult_t (*)(mscclppComm_t, int, int, mscclppDevConn_t**)>::value,
              "");
static_assert(std::is_same<decltype(&mscclppProxyLaunch), mscclppResult_t (*)(mscclppComm_t)>::value, "");
static_assert(std::is_same<decltype(&mscclppProxyStop), mscclppResult_t (*)(mscclppComm_t)>::value, "");
static_assert(std::is_same<decltype(&mscclppCommRank), mscclppResult_t (*)(mscclppComm_t, int*)>::value, "");
static_assert(std::is_same<decltype(&mscclppCommSize), mscclppResult_t (*)(mscclppComm_t, int*)>::value, "");
static_assert(std::is_same<decltype(&mscclppSetBootstrapConnTimeout), mscclppResult_t (*)(int)>::value, "");
static_assert(std::is_same<decltype(&mscclppDefaultLogHandler), void (*)(const char*)>::value, "");
static_assert(std::is_same<decltype(&mscclppSetLogHandler), mscclppResult_t (*)(mscclppLogHandler_t)>::value, "");
static_assert(std::is_same<decltype(&mscclppRegisterBuffer),
                           mscclppResult_t (*)(mscclppComm_t, void*, size_t, mscclppRegisteredMemory*)>::value,
              "");
static_assert(std::is_same<decltype(&mscclppRegisteredBufferWrite),
                           mscclppResult_t (*)(mscclppComm_t, mscclppRegisteredMemory*, void*, size_t, uint32_t,
                                               uint32_t, int64_t)>::value,
              "");
static_assert(std::is_same<decltype(&mscclppGetLastError), const char* (*)(mscclppComm_t)>::value, "");
static_assert(std::is_same<decltype(&mscclppGetVersion), mscclppResult_t (*)(int*)>::value, "");

// The default argument ibDev = 0 of both connect calls (unevaluated).
static_assert(std::is_same<decltype(mscclppConnect((mscclppComm_t)0, 1, 0, (void*)0, (uint64_t)0, mscclppTransportIB)),
                           mscclppResult_t>::value,
              "mscclppConnect(..., transport) without ibDev");
static_assert(
  std::is_same<decltype(mscclppConnectWithoutBuffer((mscclppComm_t)0, 1, 0, mscclppTransportIB)), mscclppResult_t>::value,
  "mscclppConnectWithoutBuffer(..., transport) without ibDev");

// The connection methods, with their documented shapes.
static_assert(std::is_same<decltype(static_cast<void (mscclppDevConn::*)(uint64_t, uint64_t, uint64_t)>(
                             &mscclppDevConn::put)),
                           void (mscclppDevConn::*)(uint64_t, uint64_t, uint64_t)>::value,
              "put(dst, src, size)");
static_assert(std::is_same<decltype(static_cast<void (mscclppDevConn::*)(uint64_t, uint64_t)>(&mscclppDevConn::put)),
                           void (mscclppDevConn::*)(uint64_t, uint64_t)>::value,
              "put(off, size)");
static_assert(std::is_same<decltype(&mscclppDevConn::signal), void (mscclppDevConn::*)()>::value, "signal()");
static_assert(std::is_same<decltype(&mscclppDevConn::flush), void (mscclppDevConn::*)()>::value, "flush()");
static_assert(std::is_same<decltype(&mscclppDevConn::wait), void (mscclppDevConn::*)()>::value, "wait()");
static_assert(std::is_same<decltype(&mscclppDevConn::epochIncrement), void (mscclppDevConn::*)()>::value,
              "epochIncrement()");
static_assert(std::is_same<decltype(&mscclppConcurrentFifo::push),
                           uint64_t (mscclppConcurrentFifo::*)(uint64_t, uint64_t, uint64_t, uint64_t)>::value,
              "fifo.push(type, dst, src, size)");
static_assert(std::is_same<decltype(&mscclppConcurrentFifo::sync), void (mscclppConcurrentFifo::*)(uint64_t)>::value,
              "fifo.sync(head)");

// A concrete host connection: compiles only if every pure virtual matches.
namespace {
struct CountingConn : mscclppHostConn
{
  int* calls;
  int* destroyed;
  CountingConn(int* c, int* d) : calls(c), destroyed(d) {}
  ~CountingConn() override { ++*destroyed; }
  void put(uint64_t, uint64_t, uint64_t) override { calls[0]++; }
  void put(mscclppBufferHandle_t, uint64_t, mscclppBufferHandle_t, uint64_t, uint64_t) override { calls[1]++; }
  void signal() override { calls[2]++; }
  void wait() override { calls[3]++; }
  void flush() override { calls[4]++; }
};
} // namespace

static void cpp_checks()
{
  int calls[5] = {0, 0, 0, 0, 0};
  int destroyed = 0;
  mscclppHostConn_t* hc = new CountingConn(calls, &destroyed);
  hc->put(1, 2, 3);
  hc->put(1, 2, 1, 3, 4);
  hc->signal();
  hc->wait();
  hc->flush();
  delete hc; // through the base: needs the virtual destructor
  ABI_EQ("mscclppHostConn virtual put(dst, src, size)", calls[0], 1);
  ABI_EQ("mscclppHostConn virtual put(handles)", calls[1], 1);
  ABI_EQ("mscclppHostConn virtual signal", calls[2], 1);
  ABI_EQ("mscclppHostConn virtual wait", calls[3], 1);
  ABI_EQ("mscclppHostConn virtual flush", calls[4], 1);
  ABI_EQ("mscclppHostConn virtual destructor ran", destroyed, 1);

  mscclppRegisteredMemory reg;
  mscclppRegisteredMemoryP2P e;
  e.remoteBuff = &reg;
  e.IbMr = nullptr;
  reg.p2p.push_back(e);
  ABI_EQ("mscclppRegisteredMemory.p2p is a usable vector", reg.p2p.size(), 1);

  // mscclppTriggerType_t values OR together into a uint64_t
  uint64_t all = mscclppData | mscclppFlag | mscclppSync;
  ABI_EQ("mscclppData | mscclppFlag | mscclppSync (C++)", all, 7);
  mscclppTriggerType_t t = mscclppSync;
  ABI_EQ("mscclppTriggerType_t holds mscclppSync", (uint64_t)t, 4);

  // on a host thread epochIncrement() goes through the library, which refuses a struct
  // it did not hand out (last error set) instead of writing through its pointers
  mscclppDevConnSignalEpochId ep = {41, 7};
  mscclppDevConn dc;
  memset(&dc, 0, sizeof dc);
  dc.localSignalEpochId = &ep;
  dc.epochIncrement();
  ABI_EQ("mscclppDevConn::epochIncrement() on a foreign struct leaves device", ep.device, 41);
  ABI_EQ("mscclppDevConn::epochIncrement() on a foreign struct leaves proxy", ep.proxy, 7);
  ABI_EQ("mscclppDevConn::epochIncrement() on a foreign struct sets the last error",
         strstr(mscclppGetLastError(nullptr), "mscclppConnEpochIncrement") != nullptr, 1);

  // the C++-only functions are extern "C" symbols of the library
  static void* volatile cppOnly[] = {(void*)&mscclppRegisterBuffer, (void*)&mscclppRegisteredBufferWrite};
  ABI_EQ("mscclppRegisterBuffer resolved", cppOnly[0] != nullptr, 1);
  ABI_EQ("mscclppRegisteredBufferWrite resolved", cppOnly[1] != nullptr, 1);
  ABI_EQ("__cplusplus standard", (unsigned long long)__cplusplus, (unsigned long long)__cplusplus);
}

int main()
{
  test_init("abi_layout.cc");
  printf("built as C++ %ld\n", (long)__cplusplus);
  abi_run_all();
  cpp_checks();
  return test_finish();
}
