/*
 * hwpaths.cu: what a real GPU and driver can refuse and a CPU harness cannot show, one mode a run:
 *   sameproc distinct  (launch -n 1) two communicators in one process, a thread each, on GPUs 0
 *                 and 1: P2P between them, putWithSignal + wait both ways, every byte checked.
 *                 The driver refuses an IPC import of a handle the same process exported.
 *                 SKIP(hardware) where CUDA sees one GPU.
 *   sameproc one  (launch -n 1) the same two ranks both on GPU 0: they would share its primary
 *                 context (one's synchronisation waits behind the other's spinning kernel), so
 *                 the library must refuse the connection (the second mscclppConnect, or
 *                 mscclppConnectionSetup; mscclppInvalidUsage, the message naming the one
 *                 GPU, as docs/TRANSPORTS.md says).
 *   everywait     (-n 2) 500 rounds of one-thread putWithSignal + wait, the received 64 KiB
 *                 checked by the kernel after every wait() (double-buffered: a round's data is
 *                 never overwritten while it is checked).
 *   syncthreads   (-n 2) the same with 1024 threads: all write the chunk, __syncthreads(), thread
 *                 0 pushes (its fence must publish the others' writes) and waits, __syncthreads(),
 *                 all check.
 *   regwrite [p2p | ib DEVICE]  (-n 2) mscclppRegisteredBufferWrite from a device buffer a kernel
 *                 is still writing on the same stream: the copy must wait for the kernel (every
 *                 byte checked); over P2P, or over IB through DEVICE (the two ranks of this node:
 *                 a loopback through the NIC, GPUDirect RDMA; SKIP(attribute-unsupported) where
 *                 the GPU offers neither GPUDirect RDMA (116) nor dma-buf (124)).
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
  return connectLaunch(comm, 1 - rank, buf, n, mscclppTransportP2P, NULL, NULL);
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
  bool oneGpu;  /* both ranks on GPU 0: the library must refuse the connection */
  bool refused; /* oneGpu: mscclppConnect (or mscclppConnectionSetup) failed */
  bool named;   /* ... with mscclppInvalidUsage and a message naming the shared GPU */
  pthread_barrier_t* both; /* oneGpu: both connects returned */
  sameArgs* peer;
};

/* oneGpu: the refusal of a connection between two ranks of one process on one GPU (they share
 * its primary context: one's synchronisation would wait behind the other's spinning kernel).
 * The second connect is refused (the first rank to connect cannot know yet); only where
 * neither is does setup run, which must refuse it then. */
static void sameGpuRefusal(sameArgs* a, mscclppComm_t comm, void* buf)
{
  const char* where = "mscclppConnect";
  mscclppResult_t r = mscclppConnect(comm, 1 - a->rank, 0, buf, 4 * CH, mscclppTransportP2P, NULL);
  a->refused = r != mscclppSuccess;
  pthread_barrier_wait(a->both);
  if (!a->refused && !a->peer->refused) {
    where = "mscclppConnectionSetup";
    r = mscclppConnectionSetup(comm);
    a->refused = r != mscclppSuccess;
  }
  const char* msg = mscclppGetLastError(comm);
  a->named = r == mscclppInvalidUsage && msg != NULL &&
             (strcasestr(msg, "same GPU") || strcasestr(msg, "one GPU"));
  printf("sameproc: rank %d: both ranks of one process on GPU 0: %s: %s (%s)\n", a->rank, where,
         mscclppGetErrorString(r), a->refused ? msg : "accepted");
  a->rc = 0;
  if (mscclppCommDestroy(comm) != mscclppSuccess) {
    fprintf(stderr, "sameproc: rank %d: destroy: %s\n", a->rank, mscclppGetLastError(NULL));
    a->rc = 1;
  }
}

static void* sameRank(void* p)
{
  sameArgs* a = (sameArgs*)p;
  int ndev = 0;
  CUDACHECK(cudaGetDeviceCount(&ndev));
  CUDACHECK(cudaSetDevice(a->oneGpu ? 0 : a->rank % ndev));
  CUDACHECK(cudaFree(0));
  unsigned char* buf;
  CUDACHECK(cudaMalloc(&buf, 4 * CH));
  CUDACHECK(cudaMemset(buf, 0, 4 * CH));
  CUDACHECK(cudaDeviceSynchronize());
  mscclppComm_t comm;
  mscclppResult_t r = mscclppCommInitRank(&comm, 2, a->addr, a->rank);
  if (r != mscclppSuccess) {
    fprintf(stderr, "sameproc: rank %d: mscclppCommInitRank: %s (%s)\n", a->rank, mscclppGetErrorString(r),
            mscclppGetLastError(NULL));
    a->rc = 1;
    return NULL;
  }
  if (a->oneGpu) {
    sameGpuRefusal(a, comm, buf);
    CUDACHECK(cudaFree(buf));
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

/* sameproc distinct|one: two communicators of one process, on GPUs 0 and 1 or both on GPU 0. */
static int runSameProc(const char* gpus)
{
  const char* addr = getenv("MSCCLPP_TEST_ADDR");
  if (addr == NULL) {
    fprintf(stderr, "MSCCLPP_TEST_ADDR is not set: start this program with tests/c/launch -n 1\n");
    return 2;
  }
  bool one = strcmp(gpus, "one") == 0;
  if (!one && strcmp(gpus, "distinct") != 0) {
    fprintf(stderr, "usage: hwpaths sameproc distinct|one\n");
    return 2;
  }
  int ndev = 0;
  CUDACHECK(cudaGetDeviceCount(&ndev));
  if (!one && ndev < 2) {
    printf("SKIP(hardware): sameproc distinct needs 2 GPUs; CUDA sees %d\n", ndev);
    return 0;
  }
  pthread_barrier_t both;
  pthread_barrier_init(&both, NULL, 2);
  sameArgs a[2] = {{addr, 0, 1, one, false, false, &both, &a[1]}, {addr, 1, 1, one, false, false, &both, &a[0]}};
  pthread_t t[2];
  for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, sameRank, &a[r]);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  pthread_barrier_destroy(&both);
  int rc = a[0].rc | a[1].rc;
  if (one) {
    bool ok = a[0].named || a[1].named;
    printf("sameproc: two ranks of one process on one GPU: %s\n",
           ok ? "refused, the message naming the shared GPU: PASS"
              : "FAILED: want a refusal with mscclppInvalidUsage, its message naming the one GPU");
    return rc | !ok;
  }
  printf("sameproc: two communicators of one process over P2P on GPUs 0 and 1 %s\n", rc ? "FAILED" : "PASS");
  return rc;
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

/* Whether the GPU can be an RDMA target (GPUDirect RDMA or dma-buf); prints the SKIP line if not. */
static bool gpuDirectRdma(int device)
{
  typedef CUresult (*getAttrFn)(int*, CUdevice_attribute, CUdevice);
  getAttrFn getAttr = (getAttrFn)driverFn("cuDeviceGetAttribute");
  int gdr = -1, dmabuf = -1;
  if (getAttr != NULL) {
    if (getAttr(&gdr, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, device) != CUDA_SUCCESS) gdr = -1;
    if (getAttr(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device) != CUDA_SUCCESS) dmabuf = -1;
  }
  if (gdr == 1 || dmabuf == 1) return true;
  printf("SKIP(attribute-unsupported): regwrite over IB: device %d has GPU_DIRECT_RDMA_SUPPORTED (116) %d and "
         "DMA_BUF_SUPPORTED (124) %d\n", device, gdr, dmabuf);
  return false;
}

static int runRegWrite(int rank, const char* ibDev)
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
  printf("regwrite: rank %d: mscclppRegisteredBufferWrite over %s%s of %llu MiB from a device buffer a kernel wrote on the same stream: %llu bytes wrong\n",
         rank, ibDev ? "IB " : "P2P", ibDev ? ibDev : "", (unsigned long long)(n >> 20), (unsigned long long)bad);
  free(h);
  CUDACHECK(cudaStreamDestroy(s));
  CUDACHECK(cudaFree(src));
  CUDACHECK(cudaFree(dst));
  return bad != 0;
}

static const char* const kModes[] = {"sameproc", "everywait", "syncthreads", "regwrite", NULL};

int main(int argc, char** argv)
{
  if (listModes(argc, argv, kModes)) return 0;
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "sameproc") == 0) return runSameProc(argc > 2 ? argv[2] : "");
  bool regwrite = strcmp(mode, "regwrite") == 0;
  if (!regwrite && strcmp(mode, "everywait") != 0 && strcmp(mode, "syncthreads") != 0) {
    fprintf(stderr, "unknown mode '%s' (sameproc, everywait, syncthreads, regwrite)\n", mode);
    return 2;
  }
  /* regwrite [p2p | ib DEVICE]: the connection mscclppRegisterBuffer registers on */
  const char* ibDev = regwrite && argc > 3 && strcmp(argv[2], "ib") == 0 ? argv[3] : NULL;
  if (regwrite && argc > 2 && strcmp(argv[2], "p2p") != 0 && ibDev == NULL) {
    fprintf(stderr, "usage: hwpaths regwrite [p2p | ib DEVICE]\n");
    return 2;
  }
  int rank, nranks, device;
  setupRank(&rank, &nranks, &device);
  if (nranks != 2) {
    fprintf(stderr, "hwpaths %s needs exactly 2 ranks\n", mode);
    return 2;
  }
  if (ibDev != NULL && !gpuDirectRdma(device)) {
    MSCCLPPCHECK(mscclppCommDestroy(gComm));
    return 0;
  }
  unsigned char* buf;
  CUDACHECK(cudaMalloc(&buf, 4 * CH));
  CUDACHECK(cudaMemset(buf, 0, 4 * CH));
  CUDACHECK(cudaDeviceSynchronize());
  mscclppDevConn_t* c = connectLaunch(gComm, 1 - rank, buf, 4 * CH, ibDev ? mscclppTransportIB : mscclppTransportP2P,
                                      ibDev, NULL);
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  int rc;
  if (regwrite)
    rc = runRegWrite(rank, ibDev);
  else
    rc = runRounds(mode, rank, c, strcmp(mode, "syncthreads") == 0 ? 1024 : 1, ROUNDS);
  return finishRank(mode, rank, rc, c, buf);
}
