/*
 * hwpaths.cu: what a real GPU and driver can refuse and a CPU harness cannot show, one mode a run:
 *   sameproc      (launch -n 1) two communicators in one process, a thread each (rank r on GPU
 *                 r % ndev): P2P between them, putWithSignal + wait both ways, every byte checked.
 *                 The driver refuses an IPC import of a handle the same process exported.
 *   everywait     (-n 2) 500 rounds of one-thread putWithSignal + wait, the received 64 KiB
 *                 checked by the kernel after every wait() (double-buffered: a round's data is
 *                 never overwritten while it is checked).
 *   syncthreads   (-n 2) the same with 1024 threads: all write the chunk, __syncthreads(), thread
 *                 0 pushes (its fence must publish the others' writes) and waits, __syncthreads(),
 *                 all check.
 *   dmabuf        (-n 2) after setup, each device block the library allocated for the connection
 *                 (signal epochs, wait counter, FIFO head and tail) exported as a dma-buf with
 *                 cuMemGetHandleForAddressRange over its allocation's host pages, as the library
 *                 does for GPUDirect RDMA (no NIC needed); report-only where the device has no
 *                 CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED.
 *   regwrite      (-n 2) mscclppRegisteredBufferWrite from a device buffer a kernel is still
 *                 writing on the same stream: the copy must wait for the kernel (every byte checked).
 * Prints "<mode>: ... PASS" per rank, or why not; exits non-zero on a failure.
 */
#include <cuda.h>
#include <pthread.h>
#include <unistd.h>

#include "common.h"

#define CH (64ull << 10)
#define ROUNDS 500

__device__ __host__ inline unsigned char hpat(int rank, int round, uint64_t j)
{
  return (unsigned char)(rank * 37 + round * 11 + j * 13 + 5);
}

/* buf: [src0 | src1 | dst0 | dst1], CH bytes each; round i sends src(i%2) to the peer's dst(i%2). */
__global__ void rounds(mscclppDevConn_t* c, int rank, int n, unsigned long long* bad)
{
  unsigned char* buf = (unsigned char*)c->localBuff;
  unsigned long long mine = 0;
  for (int i = 0; i < n; i++) {
    uint64_t src = (uint64_t)(i % 2) * CH, dst = 2 * CH + src;
    for (uint64_t j = threadIdx.x; j < CH; j += blockDim.x) buf[src + j] = hpat(rank, i, j);
    __syncthreads();
    if (threadIdx.x == 0) {
      c->putWithSignal(dst, src, CH);
      c->wait();
    }
    __syncthreads();
    for (uint64_t j = threadIdx.x; j < CH; j += blockDim.x) mine += buf[dst + j] != hpat(1 - rank, i, j);
  }
  atomicAdd(bad, mine);
}

static mscclppDevConn_t* setUp(mscclppComm_t comm, int rank, void* buf, uint64_t n)
{
  gComm = comm;
  MSCCLPPCHECK(mscclppConnect(comm, 1 - rank, 0, buf, n, mscclppTransportP2P, NULL));
  MSCCLPPCHECK(mscclppConnectionSetup(comm));
  mscclppDevConn_t *host, *dev;
  MSCCLPPCHECK(mscclppGetDeviceConnection(comm, 1 - rank, 0, &host));
  CUDACHECK(cudaMalloc(&dev, sizeof(*dev)));
  CUDACHECK(cudaMemcpy(dev, host, sizeof(*dev), cudaMemcpyHostToDevice));
  CUDACHECK(cudaDeviceSynchronize());
  MSCCLPPCHECK(mscclppProxyLaunch(comm));
  return dev;
}

/* Runs `rounds` on c with threads threads; 0 when every byte of every round was right. */
static int runRounds(const char* mode, int rank, mscclppDevConn_t* c, int threads, int n)
{
  unsigned long long* bad;
  CUDACHECK(cudaMallocManaged(&bad, sizeof(*bad)));
  *bad = 0;
  cudaStream_t s;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  rounds<<<1, threads, 0, s>>>(c, rank, n, bad);
  CUDACHECK(cudaStreamSynchronize(s));
  printf("%s: rank %d: %d rounds of %llu KiB, %d thread(s) writing and checking, one pushing: %llu bytes wrong\n",
         mode, rank, n, CH >> 10, threads, *bad);
  int rc = *bad != 0;
  CUDACHECK(cudaFree(bad));
  CUDACHECK(cudaStreamDestroy(s));
  return rc;
}

/* ---- sameproc ---- */

struct sameArgs {
  const char* addr;
  int rank, rc;
};

static void* sameRank(void* p)
{
  sameArgs* a = (sameArgs*)p;
  int ndev = 0;
  CUDACHECK(cudaGetDeviceCount(&ndev));
  CUDACHECK(cudaSetDevice(a->rank % ndev));
  CUDACHECK(cudaFree(0));
  unsigned char* buf;
  CUDACHECK(cudaMalloc(&buf, 4 * CH));
  CUDACHECK(cudaMemset(buf, 0, 4 * CH));
  mscclppComm_t comm;
  mscclppResult_t r = mscclppCommInitRank(&comm, 2, a->addr, a->rank);
  if (r != mscclppSuccess) {
    fprintf(stderr, "sameproc: rank %d: mscclppCommInitRank: %s (%s)\n", a->rank, mscclppGetErrorString(r),
            mscclppGetLastError(NULL));
    a->rc = 1;
    return NULL;
  }
  mscclppDevConn_t* c = setUp(comm, a->rank, buf, 4 * CH);
  a->rc = runRounds("sameproc", a->rank, c, 256, 100);
  mscclppResult_t async = mscclppSuccess;
  mscclppCommGetAsyncError(comm, &async);
  if (async != mscclppSuccess) {
    fprintf(stderr, "sameproc: rank %d: %s (%s)\n", a->rank, mscclppGetErrorString(async), mscclppGetLastError(comm));
    a->rc = 1;
  }
  if (mscclppProxyStop(comm) != mscclppSuccess || mscclppCommDestroy(comm) != mscclppSuccess) {
    fprintf(stderr, "sameproc: rank %d: stop/destroy: %s\n", a->rank, mscclppGetLastError(NULL));
    a->rc = 1;
  }
  CUDACHECK(cudaFree(c));
  CUDACHECK(cudaFree(buf));
  return NULL;
}

static int runSameProc(void)
{
  const char* addr = getenv("MSCCLPP_TEST_ADDR");
  if (addr == NULL) {
    fprintf(stderr, "MSCCLPP_TEST_ADDR is not set: start this program with tests/c/launch -n 1\n");
    return 2;
  }
  sameArgs a[2] = {{addr, 0, 1}, {addr, 1, 1}};
  pthread_t t[2];
  for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, sameRank, &a[r]);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  int rc = a[0].rc | a[1].rc;
  printf("sameproc: two communicators of one process over P2P %s\n", rc ? "FAILED" : "PASS");
  return rc;
}

/* ---- dmabuf ---- */

typedef CUresult (*getRangeFn)(CUdeviceptr*, size_t*, CUdeviceptr);
typedef CUresult (*getHandleFn)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
typedef CUresult (*getAttrFn)(int*, CUdevice_attribute, CUdevice);
typedef CUresult (*ptrAttrFn)(void*, CUpointer_attribute, CUdeviceptr);

static void* driverFn(const char* name)
{
  void* fn = NULL;
  if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) fn = NULL;
  return fn;
}

static int runDmabuf(int rank, int device, mscclppDevConn_t* host)
{
  getRangeFn getRange = (getRangeFn)driverFn("cuMemGetAddressRange");
  getHandleFn getHandle = (getHandleFn)driverFn("cuMemGetHandleForAddressRange");
  getAttrFn getAttr = (getAttrFn)driverFn("cuDeviceGetAttribute");
  ptrAttrFn ptrAttr = (ptrAttrFn)driverFn("cuPointerGetAttribute");
  if (getRange == NULL || getAttr == NULL || ptrAttr == NULL) {
    fprintf(stderr, "dmabuf: rank %d: the driver lacks cuMemGetAddressRange/cuDeviceGetAttribute\n", rank);
    return 1;
  }
  int supported = 0;
  getAttr(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device);
  if (!supported || getHandle == NULL) {
    printf("dmabuf: rank %d: this GPU/driver offers no dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 0): report only, PASS\n",
           rank);
    return 0;
  }
  struct {
    const char* name;
    const void* p;
  } blocks[] = {{"localSignalEpochId", host->localSignalEpochId}, {"waitEpochId", host->waitEpochId},
                {"fifo.triggerFifoTail", host->fifo.triggerFifoTail}, {"fifo.triggerFifoHead", host->fifo.triggerFifoHead},
                {"localBuff", host->localBuff}};
  long page = sysconf(_SC_PAGESIZE);
  int failures = 0;
  for (auto& b : blocks) {
    unsigned int type = 0;
    if (ptrAttr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)b.p) != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE) {
      printf("dmabuf: rank %d: %s is not device memory here: not probed\n", rank, b.name);
      continue;
    }
    CUdeviceptr base = 0;
    size_t size = 0;
    if (getRange(&base, &size, (CUdeviceptr)b.p) != CUDA_SUCCESS) {
      printf("dmabuf: rank %d: %s: cuMemGetAddressRange failed\n", rank, b.name);
      failures++;
      continue;
    }
    /* the library's registration: the allocation's range rounded out to host pages */
    CUdeviceptr lo = base & ~(CUdeviceptr)(page - 1);
    CUdeviceptr hi = (base + size + page - 1) & ~(CUdeviceptr)(page - 1);
    int fd = -1;
    CUresult rc = getHandle(&fd, lo, hi - lo, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    printf("dmabuf: rank %d: %-20s allocation %#llx + %zu (offset %llu in its 2 MiB page): export %s (CUresult %d)\n",
           rank, b.name, (unsigned long long)base, size, (unsigned long long)(base & ((2ull << 20) - 1)),
           rc == CUDA_SUCCESS ? "ok" : "REFUSED", (int)rc);
    if (rc == CUDA_SUCCESS)
      close(fd);
    else
      failures++;
  }
  printf("dmabuf: rank %d: %d of the library's device blocks refused %s\n", rank, failures, failures ? "FAILED" : "PASS");
  return failures != 0;
}

/* ---- regwrite ---- */

/* Writes n bytes slowly (each thread spins first), so that a copy not ordered after it reads stale bytes. */
__global__ void slowFill(unsigned char* p, int rank, uint64_t n)
{
  long long t0 = clock64();
  while (clock64() - t0 < 20000000) /* ~10 ms */
    ;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = hpat(rank, 7, i);
}

static int runRegWrite(int rank)
{
  const uint64_t n = 8ull << 20;
  unsigned char *src, *dst;
  CUDACHECK(cudaMalloc(&src, n));
  CUDACHECK(cudaMalloc(&dst, n));
  CUDACHECK(cudaMemset(src, 0, n));
  CUDACHECK(cudaMemset(dst, 0, n));
  CUDACHECK(cudaDeviceSynchronize());
  mscclppRegisteredMemory reg;
  MSCCLPPCHECK(mscclppRegisterBuffer(gComm, dst, n, &reg));
  cudaStream_t s;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  slowFill<<<64, 256, 0, s>>>(src, rank, n);
  MSCCLPPCHECK(mscclppRegisteredBufferWrite(gComm, &reg, src, n, 0, 0, (int64_t)(uintptr_t)s));
  CUDACHECK(cudaStreamSynchronize(s));
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm)); /* both writes landed */
  unsigned char* h = (unsigned char*)malloc(n);
  CUDACHECK(cudaMemcpy(h, dst, n, cudaMemcpyDeviceToHost));
  uint64_t bad = 0;
  for (uint64_t i = 0; i < n; i++) bad += h[i] != hpat(1 - rank, 7, i);
  printf("regwrite: rank %d: mscclppRegisteredBufferWrite of %llu MiB from a device buffer a kernel wrote on the same stream: %llu bytes wrong\n",
         rank, (unsigned long long)(n >> 20), (unsigned long long)bad);
  free(h);
  CUDACHECK(cudaStreamDestroy(s));
  CUDACHECK(cudaFree(src));
  CUDACHECK(cudaFree(dst));
  return bad != 0;
}

int main(int argc, char** argv)
{
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "sameproc") == 0) return runSameProc();
  int rank, nranks, device;
  setupRank(&rank, &nranks, &device);
  if (nranks != 2) {
    fprintf(stderr, "hwpaths %s needs exactly 2 ranks\n", mode);
    return 2;
  }
  unsigned char* buf;
  CUDACHECK(cudaMalloc(&buf, 4 * CH));
  CUDACHECK(cudaMemset(buf, 0, 4 * CH));
  mscclppDevConn_t* c = setUp(gComm, rank, buf, 4 * CH);
  mscclppDevConn_t* host;
  MSCCLPPCHECK(mscclppGetDeviceConnection(gComm, 1 - rank, 0, &host));
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  int rc;
  if (strcmp(mode, "everywait") == 0) {
    rc = runRounds(mode, rank, c, 1, ROUNDS);
  } else if (strcmp(mode, "syncthreads") == 0) {
    rc = runRounds(mode, rank, c, 1024, ROUNDS);
  } else if (strcmp(mode, "dmabuf") == 0) {
    rc = runDmabuf(rank, device, host);
  } else if (strcmp(mode, "regwrite") == 0) {
    rc = runRegWrite(rank);
  } else {
    fprintf(stderr, "unknown mode '%s' (sameproc, everywait, syncthreads, dmabuf, regwrite)\n", mode);
    return 2;
  }
  return finishRank(mode, rank, rc, c, buf);
}
