/*
 * mnallgather.cc: one rank of upstream's multi-node allgather pattern on the
 * stand-in driver (tests/multinode/run_multinode.sh, case
 * mn-ib-p2p-allgather-devthreads-2x2): 2 nodes x 2 ranks (ranks 0,1 and 2,3
 * share a node), one device buffer of 4 chunks per rank, P2P to the rank of
 * its own node (CUDA IPC between the processes) and IB to the two of the
 * other node (the libibverbs double: GPUDirect RDMA through the driver's
 * dma-bufs), all in CUDA mode. The kernel devAllgather (kernels.cc) runs on
 * CPU threads: each writes its part of the rank's chunk, pushes it to every
 * peer with putWithSignal, waits for its peer's signals and checks every
 * byte of that peer's chunk. The rank then reads its whole buffer back
 * through the driver and checks it again.
 *   mnallgather [--chunk BYTES]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../c/transports/suite_util.h"

#include <dlfcn.h>

typedef int (*kernelFn)(const char*);
typedef int (*memAllocFn)(unsigned long long*, size_t);
typedef int (*fakeReadFn)(unsigned long long, void*, size_t);

static uint8_t agPattern(int rank, uint64_t j) { return (uint8_t)(rank * 53 + j * 13 + 7); }

int main(int argc, char** argv)
{
  su_init("allgather-devthreads");
  size_t chunk = 3 << 20; /* spans several IB work requests' worth of pages, not a multiple of 3 parts */
  for (int i = 1; i + 1 < argc; i += 2)
    if (strcmp(argv[i], "--chunk") == 0) chunk = (size_t)atol(argv[i + 1]);
  const char* lib = getenv("MSCCLPP_CUDA_LIBRARY");
  void* drv = lib ? dlopen(lib, RTLD_NOW | RTLD_GLOBAL) : NULL;
  SU_REQUIRE(drv != NULL, "cannot load the stand-in driver (MSCCLPP_CUDA_LIBRARY=%s): %s", lib ? lib : "(unset)",
             dlerror());
  memAllocFn memAlloc = (memAllocFn)dlsym(drv, "cuMemAlloc_v2");
  kernelFn allgather = (kernelFn)dlsym(drv, "devAllgather");
  fakeReadFn fakeRead = (fakeReadFn)dlsym(drv, "fakeRead");
  SU_REQUIRE(memAlloc && allgather && fakeRead, "the driver lacks cuMemAlloc_v2, devAllgather or fakeRead");
  SU_REQUIRE(su_nranks == 4, "run on 4 ranks (2 nodes x 2), not %d", su_nranks);
  const char* ibDev = getenv("MSCCLPP_TEST_IB_DEV");
  if (ibDev == NULL || ibDev[0] == 0) ibDev = "double_0";

  su_comm_init();
  size_t size = 4 * chunk;
  unsigned long long buf = 0;
  SU_REQUIRE(memAlloc(&buf, size) == 0, "cuMemAlloc of %zu bytes failed", size);
  char peers[32] = "";
  int n = 0;
  for (int p = 0; p < su_nranks; p++) {
    if (p == su_rank) continue;
    int sameNode = p / 2 == su_rank / 2;
    SU_CK(mscclppConnect(su_comm, p, 0, (void*)(uintptr_t)buf, size, sameNode ? mscclppTransportP2P : mscclppTransportIB,
                         sameNode ? NULL : ibDev));
    snprintf(peers + strlen(peers), sizeof(peers) - strlen(peers), "%s%d", n++ ? "," : "", p);
  }
  SU_CK(mscclppConnectionSetup(su_comm));
  SU_CK(mscclppProxyLaunch(su_comm));
  mscclppDevConn_t* conns = NULL;
  int got = 0;
  SU_CK(mscclppGetAllDeviceConnections(su_comm, &conns, &got));
  SU_REQUIRE(got == n, "%d connections, want %d", got, n);

  char spec[160];
  snprintf(spec, sizeof(spec), "conns=%#lx n=%d rank=%d nranks=%d chunk=%zu peers=%s", (unsigned long)(uintptr_t)conns,
           n, su_rank, su_nranks, chunk, peers);
  int rc = allgather(spec);
  SU_CHECK(rc == 0, "rank %d: the allgather kernel: %d failures", su_rank, -rc);
  mscclppResult_t async = mscclppSuccess;
  SU_CK(mscclppCommGetAsyncError(su_comm, &async));
  SU_CHECK(async == mscclppSuccess, "rank %d: async error %d: %s", su_rank, (int)async, su_lasterr(su_comm));
  SU_CK(mscclppProxyStop(su_comm));

  /* every byte of every rank's chunk, as cudaMemcpy would read the buffer back */
  uint8_t* host = (uint8_t*)malloc(size);
  SU_REQUIRE(host != NULL && fakeRead(buf, host, size) == 0, "reading the device buffer back failed");
  size_t bad = 0;
  for (int r = 0; r < su_nranks; r++)
    for (size_t j = 0; j < chunk; j++) bad += host[(size_t)r * chunk + j] != agPattern(r, j);
  SU_CHECK(bad == 0, "rank %d: %zu of %zu bytes of the gathered buffer are wrong", su_rank, bad, size);
  free(host);
  SU_CK(mscclppCommDestroy(su_comm));
  return su_finish();
}
