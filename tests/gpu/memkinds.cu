/*
 * memkinds.cu: the kinds of memory an application hands the library, on a real driver:
 *   dmabuf SIZE    (launch -n 1) a cudaMalloc buffer of SIZE bytes, allocated after two small
 *                  ones (a small buffer then sits inside a driver chunk, at an offset): the whole
 *                  host pages around it exported as a dma-buf (cuMemGetHandleForAddressRange),
 *                  the range the library registers for GPUDirect RDMA; its allocation's range
 *                  and offset reported. A refused export FAILS; SKIP(attribute-unsupported)
 *                  where CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0 or the driver lacks the call.
 *   async          (-n 2) a cudaMallocAsync buffer: its dma-buf export reported (the driver's
 *                  answer, not judged); mscclppConnect (P2P) and mscclppRegisterBuffer over it
 *                  must be refused (mscclppInvalidUsage) with a message naming
 *                  cudaMallocAsync: it has no IPC handle and no peermem path.
 *                  SKIP(attribute-unsupported) where the device has no memory pools.
 *   hostalloc-eth  (-n 2) a cudaHostAlloc buffer over Ethernet: pinned host memory is host
 *                  memory, so the connection is in host mode and host threads drive it:
 *                  putWithSignal and wait from the host both ways (mscclppConnSignalOp,
 *                  mscclppConnWaitNext, which a CUDA-mode connection refuses), every byte checked.
 * A case the device cannot run prints "SKIP(attribute-unsupported): why" and exits 0; otherwise
 * "<mode>: ..." lines and "<mode>: rank R PASS", or why not, and a non-zero exit on a failure.
 */
#include <unistd.h>

#include "common.h"

static const char* const kModes[] = {"dmabuf", "async", "hostalloc-eth", NULL};

typedef CUresult (*getRangeFn)(CUdeviceptr*, size_t*, CUdeviceptr);
typedef CUresult (*getHandleFn)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
typedef CUresult (*getAttrFn)(int*, CUdevice_attribute, CUdevice);
typedef CUresult (*deviceGetFn)(CUdevice*, int);

/* The driver attribute `which` of runtime device `device`; -1 where it cannot be asked. */
static int deviceAttr(int device, int which)
{
  getAttrFn getAttr = (getAttrFn)driverFn("cuDeviceGetAttribute");
  deviceGetFn deviceGet = (deviceGetFn)driverFn("cuDeviceGet");
  CUdevice d;
  int v = 0;
  if (getAttr == NULL || deviceGet == NULL || deviceGet(&d, device) != CUDA_SUCCESS ||
      getAttr(&v, (CUdevice_attribute)which, d) != CUDA_SUCCESS)
    return -1;
  return v;
}

/* Exports the host pages around [p, p+size) as a dma-buf and reports it; the CUresult. */
static CUresult exportPages(const char* what, const void* p, size_t size)
{
  getRangeFn getRange = (getRangeFn)driverFn("cuMemGetAddressRange");
  getHandleFn getHandle = (getHandleFn)driverFn("cuMemGetHandleForAddressRange");
  CUdeviceptr base = 0;
  size_t asize = 0;
  if (getRange == NULL || getRange(&base, &asize, (CUdeviceptr)p) != CUDA_SUCCESS) base = 0, asize = 0;
  long page = sysconf(_SC_PAGESIZE);
  CUdeviceptr lo = (CUdeviceptr)p & ~(CUdeviceptr)(page - 1);
  CUdeviceptr hi = ((CUdeviceptr)p + size + page - 1) & ~(CUdeviceptr)(page - 1);
  int fd = -1;
  CUresult rc = getHandle(&fd, lo, hi - lo, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  printf("dmabuf: %s at %p (offset %llu in its 2 MiB page; allocation %#llx + %zu): pages %#llx + %llu exported %s "
         "(CUresult %d)\n",
         what, p, (unsigned long long)((uintptr_t)p & ((2ull << 20) - 1)), (unsigned long long)base, asize,
         (unsigned long long)lo, (unsigned long long)(hi - lo), rc == CUDA_SUCCESS ? "ok" : "REFUSED", (int)rc);
  if (rc == CUDA_SUCCESS) close(fd);
  return rc;
}

static int runDmabuf(uint64_t size)
{
  CUDACHECK(cudaSetDevice(0));
  CUDACHECK(cudaFree(0));
  int supported = deviceAttr(0, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
  if (supported != 1 || driverFn("cuMemGetHandleForAddressRange") == NULL) {
    printf("SKIP(attribute-unsupported): dmabuf: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (124) is %d on device 0%s\n",
           supported, driverFn("cuMemGetHandleForAddressRange") ? "" : " and the driver has no cuMemGetHandleForAddressRange");
    return 0;
  }
  void *a, *b, *p;
  CUDACHECK(cudaMalloc(&a, 4096));
  CUDACHECK(cudaMalloc(&b, 4096));
  CUDACHECK(cudaMalloc(&p, size));
  char what[64];
  snprintf(what, sizeof what, "cudaMalloc of %llu B", (unsigned long long)size);
  CUresult rc = exportPages(what, p, size);
  CUDACHECK(cudaFree(p));
  CUDACHECK(cudaFree(b));
  CUDACHECK(cudaFree(a));
  if (rc != CUDA_SUCCESS) return 1;
  printf("dmabuf: rank 0 PASS\n");
  return 0;
}

/* A call over cudaMallocAsync memory must be refused with a message naming it; 0 when it was. */
static int refused(const char* call, int rank, mscclppResult_t r)
{
  const char* msg = mscclppGetLastError(gComm);
  bool named = msg != NULL && strstr(msg, "cudaMallocAsync") != NULL;
  bool ok = r == mscclppInvalidUsage && named;
  printf("async: rank %d: %s over a cudaMallocAsync buffer: %s (%s) %s\n", rank, call, mscclppGetErrorString(r),
         r == mscclppSuccess ? "accepted" : msg, ok ? "refused as it should be" : "FAILED: want a refusal naming cudaMallocAsync");
  return ok ? 0 : 1;
}

static int runAsync(int rank, int device)
{
  int pools = deviceAttr(device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
  if (pools != 1) {
    printf("SKIP(attribute-unsupported): async: CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED (115) is %d on device %d\n",
           pools, device);
    MSCCLPPCHECK(mscclppCommDestroy(gComm));
    return 0;
  }
  const uint64_t n = 1 << 20;
  cudaStream_t s;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* p;
  CUDACHECK(cudaMallocAsync(&p, n, s));
  CUDACHECK(cudaStreamSynchronize(s));
  if (deviceAttr(device, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) == 1 && driverFn("cuMemGetHandleForAddressRange"))
    exportPages("cudaMallocAsync of 1 MiB (the driver's answer, not judged)", p, n);
  int rc = refused("mscclppConnect (P2P)", rank, mscclppConnect(gComm, 1 - rank, 0, p, n, mscclppTransportP2P, NULL));
  void* buf;
  CUDACHECK(cudaMalloc(&buf, n));
  CUDACHECK(cudaMemset(buf, 0, n));
  CUDACHECK(cudaDeviceSynchronize());
  mscclppDevConn_t* c = connectLaunch(gComm, 1 - rank, buf, n, mscclppTransportP2P, NULL, NULL);
  mscclppRegisteredMemory reg;
  rc |= refused("mscclppRegisterBuffer", rank, mscclppRegisterBuffer(gComm, p, n, &reg));
  CUDACHECK(cudaFreeAsync(p, s));
  CUDACHECK(cudaStreamSynchronize(s));
  CUDACHECK(cudaStreamDestroy(s));
  return finishRank("async", rank, rc, c, buf);
}

static inline unsigned char epat(int rank, uint64_t j)
{
  return (unsigned char)(rank * 41 + j * 3 + 9);
}

static int runHostAllocEth(int rank)
{
  const uint64_t half = 4 << 20;
  unsigned char* hb;
  CUDACHECK(cudaHostAlloc((void**)&hb, 2 * half, cudaHostAllocDefault));
  for (uint64_t j = 0; j < half; j++) hb[j] = epat(rank, j);
  memset(hb + half, 0, half);
  MSCCLPPCHECK(mscclppConnect(gComm, 1 - rank, 0, hb, 2 * half, mscclppTransportEthernet, NULL));
  MSCCLPPCHECK(mscclppConnectionSetup(gComm));
  mscclppDevConn_t* h;
  MSCCLPPCHECK(mscclppGetDeviceConnection(gComm, 1 - rank, 0, &h));
  MSCCLPPCHECK(mscclppProxyLaunch(gComm));
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  mscclppResult_t put = mscclppConnSignalOp(h, mscclppData | mscclppFlag, half, 0, half);
  mscclppResult_t wait = put == mscclppSuccess ? mscclppConnWaitNext(h, 30000) : put;
  uint64_t bad = 0;
  for (uint64_t j = 0; wait == mscclppSuccess && j < half; j++) bad += hb[half + j] != epat(1 - rank, j);
  cudaPointerAttributes pa;
  bool devEpoch = cudaPointerGetAttributes(&pa, h->localSignalEpochId) == cudaSuccess && pa.type == cudaMemoryTypeDevice;
  printf("hostalloc-eth: rank %d: a cudaHostAlloc buffer over Ethernet, driven from a host thread: putWithSignal %s, "
         "wait %s (%s); %llu of %llu bytes wrong; signal epochs in %s memory\n",
         rank, mscclppGetErrorString(put), mscclppGetErrorString(wait),
         wait == mscclppSuccess ? "host mode" : mscclppGetLastError(gComm), (unsigned long long)bad,
         (unsigned long long)half, devEpoch ? "device (CUDA mode)" : "host");
  int rc = put != mscclppSuccess || wait != mscclppSuccess || bad != 0;
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm)); /* both landed before either stops */
  mscclppResult_t async = mscclppSuccess;
  MSCCLPPCHECK(mscclppCommGetAsyncError(gComm, &async));
  if (async != mscclppSuccess) {
    fprintf(stderr, "rank %d: asynchronous error: %s (%s)\n", rank, mscclppGetErrorString(async), mscclppGetLastError(gComm));
    rc = 1;
  }
  MSCCLPPCHECK(mscclppProxyStop(gComm));
  MSCCLPPCHECK(mscclppCommDestroy(gComm));
  CUDACHECK(cudaFreeHost(hb));
  if (rc == 0) printf("hostalloc-eth: rank %d PASS\n", rank);
  return rc;
}

int main(int argc, char** argv)
{
  if (listModes(argc, argv, kModes)) return 0;
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "dmabuf") == 0) {
    if (argc < 3 || strtoull(argv[2], NULL, 0) == 0) {
      fprintf(stderr, "usage: memkinds dmabuf SIZE\n");
      return 2;
    }
    return runDmabuf(strtoull(argv[2], NULL, 0));
  }
  if (strcmp(mode, "async") != 0 && strcmp(mode, "hostalloc-eth") != 0) {
    fprintf(stderr, "unknown mode '%s' (dmabuf SIZE, async, hostalloc-eth)\n", mode);
    return 2;
  }
  int rank, nranks, device;
  setupRank(&rank, &nranks, &device);
  if (nranks != 2) {
    fprintf(stderr, "memkinds %s needs exactly 2 ranks\n", mode);
    return 2;
  }
  return strcmp(mode, "async") == 0 ? runAsync(rank, device) : runHostAllocEth(rank);
}
