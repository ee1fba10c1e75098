/*
 * devpaths.cu: the device paths a GPU shows and a CPU cannot, between 2
 * ranks (one process each, on GPU rank % ndev):
 *   pushers p2p|eth  one kernel of 256 threads (more than the FIFO's 128
 *       slots): each writes its 4 KiB chunk and pushes it in the same kernel,
 *       with putWithSignal, put+signal, putWithSignalAndFlush, or zero-size
 *       puts (at source offset 0 too) then putWithSignal; a one-thread kernel
 *       beside it waits for the peer's 256 signals and checks every byte. Over
 *       P2P, or over Ethernet in CUDA mode (device memory staged through
 *       pinned buffers).
 *   graph    putWithSignal + wait captured in a CUDA graph, launched 10
 *       times with fresh data each time, every byte checked each time.
 *   exit     one put, then main returns without mscclppProxyStop or
 *       mscclppCommDestroy: the process must still exit (run.sh's timeout).
 *
 *   launch -n 2 devpaths MODE [TRANSPORT]
 */
#include "common.h"

#define PUSHERS 256
#define CHUNK 4096ull
#define HALF (PUSHERS * CHUNK)

__device__ __host__ inline unsigned char pat(int rank, int t, uint64_t j)
{
  return (unsigned char)(rank * 29 + t * 31 + j * 7 + 1);
}

/* Thread t writes chunk t of my first half, then moves it to the peer's second half. */
__global__ void pushers(mscclppDevConn_t* c, int rank)
{
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= PUSHERS) return;
  uint64_t off = (uint64_t)t * CHUNK, dst = HALF + off;
  unsigned char* buf = (unsigned char*)c->localBuff;
  for (uint64_t j = 0; j < CHUNK; j++) buf[off + j] = pat(rank, t, j);
  switch (t % 4) {
  case 0:
    c->putWithSignal(dst, off, CHUNK);
    break;
  case 1:
    c->put(dst, off, CHUNK);
    c->signal();
    break;
  case 2:
    c->putWithSignalAndFlush(dst, off, CHUNK);
    break;
  default:
    c->put(0, 0, 0); /* zero-size at source offset 0: word 0 of its trigger must not be 0 */
    c->put(dst, off, 0);
    c->putWithSignal(dst, off, CHUNK);
    break;
  }
}

/* Waits for the peer's PUSHERS signals, then counts the wrong bytes of my second half. */
__global__ void waiter(mscclppDevConn_t* c, int peer, unsigned long long* bad)
{
  for (int i = 0; i < PUSHERS; i++) c->wait();
  const unsigned char* buf = (const unsigned char*)c->localBuff + HALF;
  unsigned long long n = 0;
  for (int t = 0; t < PUSHERS; t++)
    for (uint64_t j = 0; j < CHUNK; j++) n += buf[(uint64_t)t * CHUNK + j] != pat(peer, t, j);
  *bad = n;
}

__global__ void fill(unsigned char* p, int rank, int iter, uint64_t n)
{
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = pat(rank, iter, i);
}

__global__ void putWait(mscclppDevConn_t* c, uint64_t n)
{
  c->putWithSignal(HALF, 0, n);
  c->wait();
}

static int runPushers(int rank, mscclppDevConn_t* c)
{
  cudaStream_t a, b;
  CUDACHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CUDACHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  unsigned long long* bad;
  CUDACHECK(cudaMallocManaged(&bad, sizeof(*bad)));
  *bad = ~0ull;
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  waiter<<<1, 1, 0, b>>>(c, 1 - rank, bad);
  pushers<<<PUSHERS / 64, 64, 0, a>>>(c, rank);
  CUDACHECK(cudaStreamSynchronize(a));
  CUDACHECK(cudaStreamSynchronize(b));
  int ok = *bad == 0;
  printf("pushers: rank %d: %d threads pushed 4 KiB each in the kernel that wrote it; %llu of %llu received bytes wrong\n",
         rank, PUSHERS, *bad, HALF);
  CUDACHECK(cudaFree(bad));
  return ok ? 0 : 1;
}

static int runGraph(int rank, unsigned char* buf, mscclppDevConn_t* c)
{
  cudaStream_t s;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  putWait<<<1, 1, 0, s>>>(c, HALF);
  CUDACHECK(cudaStreamEndCapture(s, &g));
  CUDACHECK(cudaGraphInstantiateWithFlags(&exec, g, 0));
  unsigned char* host = (unsigned char*)malloc(HALF);
  int failures = 0;
  for (int iter = 0; iter < 10; iter++) {
    fill<<<64, 256, 0, s>>>(buf, rank, iter, HALF);
    CUDACHECK(cudaGraphLaunch(exec, s));
    CUDACHECK(cudaStreamSynchronize(s)); /* my wait() saw the peer's signal: its data is here */
    CUDACHECK(cudaMemcpy(host, buf + HALF, HALF, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (uint64_t j = 0; j < HALF; j++) bad += host[j] != pat(1 - rank, iter, j);
    if (bad) fprintf(stderr, "graph: rank %d: launch %d: %ld bytes wrong\n", rank, iter, bad);
    failures += bad != 0;
    MSCCLPPCHECK(mscclppBootstrapBarrier(gComm)); /* nobody overwrites before the peer checked */
  }
  printf("graph: rank %d: 10 launches of a captured putWithSignal+wait, %d with wrong bytes\n", rank, failures);
  free(host);
  CUDACHECK(cudaGraphExecDestroy(exec));
  CUDACHECK(cudaGraphDestroy(g));
  return failures ? 1 : 0;
}

static const char* const kModes[] = {"pushers", "graph", "exit", NULL};

int main(int argc, char** argv)
{
  if (listModes(argc, argv, kModes)) return 0;
  int rank, nranks, device;
  setupRank(&rank, &nranks, &device);
  const char* mode = argc > 1 ? argv[1] : "pushers";
  if (nranks != 2) {
    fprintf(stderr, "devpaths needs exactly 2 ranks\n");
    return 2;
  }
  mscclppTransport_t tr = argc > 2 && strcmp(argv[2], "eth") == 0 ? mscclppTransportEthernet : mscclppTransportP2P;
  unsigned char* buf;
  CUDACHECK(cudaMalloc(&buf, 2 * HALF));
  CUDACHECK(cudaMemset(buf, 0, 2 * HALF));
  mscclppDevConn_t* c = connectLaunch(gComm, 1 - rank, buf, 2 * HALF, tr, NULL, NULL);
  int rc;
  if (strcmp(mode, "pushers") == 0) {
    rc = runPushers(rank, c);
  } else if (strcmp(mode, "graph") == 0) {
    rc = runGraph(rank, buf, c);
  } else if (strcmp(mode, "exit") == 0) {
    putWait<<<1, 1>>>(c, HALF);
    CUDACHECK(cudaDeviceSynchronize());
    printf("exit: rank %d returns from main without mscclppProxyStop or mscclppCommDestroy\n", rank);
    return 0;
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return finishRank(mode, rank, rc, c, buf);
}
