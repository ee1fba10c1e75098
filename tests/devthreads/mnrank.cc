/*
 * mnrank.cc: one rank of the device-threads test across simulated nodes
 * (tests/multinode/run_multinode.sh, case mn-eth-devthreads-2x2). The rank
 * loads the stand-in driver linked with the kernels of kernels.cc (the file
 * MSCCLPP_CUDA_LIBRARY names: the library loads the same one), allocates a
 * device buffer from it, connects over mscclppTransportEthernet to its
 * partner on the other node (rank r ^ 2: ranks 0,1 and 2,3 share a node),
 * which puts the communicator in CUDA mode, and runs two kernels at once on
 * CPU threads: devSend (150 threads writing and pushing their chunks with
 * every trigger type and zero-size puts) and devRecv (waits for every
 * signal of the partner's devSend, then checks each byte).
 *   mnrank [--threads T] [--chunk BYTES]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../c/transports/suite_util.h"

#include <dlfcn.h>
#include <pthread.h>

typedef int (*kernelFn)(const char*);
typedef int (*memAllocFn)(unsigned long long*, size_t);

struct sendArgs {
  kernelFn fn;
  const char* spec;
  int rc;
};

static void* sendMain(void* p)
{
  sendArgs* a = (sendArgs*)p;
  a->rc = a->fn(a->spec);
  return NULL;
}

int main(int argc, char** argv)
{
  su_init("devthreads");
  int threads = 150;
  size_t chunk = 2048;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--chunk") == 0) chunk = (size_t)atol(argv[i + 1]);
  }
  const char* lib = getenv("MSCCLPP_CUDA_LIBRARY");
  void* drv = lib ? dlopen(lib, RTLD_NOW | RTLD_GLOBAL) : NULL;
  SU_REQUIRE(drv != NULL, "cannot load the stand-in driver (MSCCLPP_CUDA_LIBRARY=%s): %s", lib ? lib : "(unset)",
             dlerror());
  memAllocFn memAlloc = (memAllocFn)dlsym(drv, "cuMemAlloc_v2");
  kernelFn devSend = (kernelFn)dlsym(drv, "devSend"), devRecv = (kernelFn)dlsym(drv, "devRecv");
  SU_REQUIRE(memAlloc && devSend && devRecv, "the driver lacks cuMemAlloc_v2, devSend or devRecv");
  SU_REQUIRE(su_nranks == 4, "run on 4 ranks (2 nodes x 2), not %d", su_nranks);

  su_comm_init();
  size_t size = (size_t)threads * chunk;
  unsigned long long buf = 0;
  SU_REQUIRE(memAlloc(&buf, 2 * size) == 0, "cuMemAlloc of %zu bytes failed", 2 * size);
  int peer = su_rank ^ 2;
  SU_CK(mscclppConnect(su_comm, peer, 0, (void*)(uintptr_t)buf, 2 * size, mscclppTransportEthernet, NULL));
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  mscclppDevConn_t* conns = NULL;
  int n = 0;
  SU_CK(mscclppGetAllDeviceConnections(su_comm, &conns, &n));
  SU_REQUIRE(n == 1, "%d connections, want 1", n);

  char spec[128];
  snprintf(spec, sizeof(spec), "conn=%#lx size=%zu threads=%d", (unsigned long)(uintptr_t)&conns[0], size, threads);
  sendArgs s = {devSend, spec, -1};
  pthread_t t;
  SU_REQUIRE(pthread_create(&t, NULL, sendMain, &s) == 0, "cannot start the sending kernel");
  int rrc = devRecv(spec);
  pthread_join(t, NULL);
  SU_CHECK(s.rc == 0, "rank %d: the sending kernel to rank %d: %d failures", su_rank, peer, -s.rc);
  SU_CHECK(rrc == 0, "rank %d: the receiving kernel from rank %d: %d failures", su_rank, peer, -rrc);
  mscclppResult_t async = mscclppSuccess;
  SU_CK(mscclppCommGetAsyncError(su_comm, &async));
  SU_CHECK(async == mscclppSuccess, "rank %d: async error %d: %s", su_rank, (int)async, su_lasterr(su_comm));
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  return su_finish();
}
