/*
 * allgather.cu: an allgather over MSCCL++ P2P connections, initiated from
 * the GPU. Each of N ranks (one process each, on GPU rank % ndev) owns chunk
 * `rank` of one cudaMalloc'd buffer; one block per peer does
 * putWithSignal(rank*chunk, rank*chunk, chunk) and then wait(). Every byte
 * of every chunk is checked on the host; algorithm and bus bandwidth are
 * printed per size.
 *
 *   launch -n N allgather [MAX_CHUNK_BYTES]   (default 64 MiB)
 */
#include <vector>

#include "common.h"

__device__ __host__ inline unsigned char pattern(int r, uint64_t i)
{
  return (unsigned char)((i * 131u + (uint64_t)r * 17u + 7u) ^ (i >> 9));
}

__global__ void fill(unsigned char* p, int r, uint64_t n)
{
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = pattern(r, i);
}

/* Block b serves connection b (peers in Connect order). */
__global__ void allgather(mscclppDevConn_t* conns, int rank, uint64_t chunk)
{
  if (threadIdx.x != 0) return;
  mscclppDevConn_t* c = &conns[blockIdx.x];
  c->putWithSignal(rank * chunk, rank * chunk, chunk);
  c->wait();
}

/* Waits until every earlier put of this rank has completed. */
__global__ void flushAll(mscclppDevConn_t* conns)
{
  if (threadIdx.x == 0) conns[blockIdx.x].flush();
}

int main(int argc, char** argv)
{
  int rank, nranks, device;
  setupRank(&rank, &nranks, &device);
  uint64_t maxChunk = argc > 1 ? strtoull(argv[1], NULL, 0) : (64ull << 20);
  if (nranks < 2 || maxChunk * nranks >= (1ull << 32)) {
    fprintf(stderr, "need 2+ ranks and nranks*chunk < 4 GiB (32-bit offsets)\n");
    return 2;
  }
  uint64_t bytes = maxChunk * nranks;
  unsigned char* buf;
  CUDACHECK(cudaMalloc(&buf, bytes));

  for (int peer = 0; peer < nranks; peer++)
    if (peer != rank) MSCCLPPCHECK(mscclppConnect(gComm, peer, 0, buf, bytes, mscclppTransportP2P, NULL));
  MSCCLPPCHECK(mscclppConnectionSetup(gComm));
  mscclppDevConn_t* hostConns;
  int nConns = 0;
  MSCCLPPCHECK(mscclppGetAllDeviceConnections(gComm, &hostConns, &nConns));
  if (nConns != nranks - 1) {
    fprintf(stderr, "rank %d: %d connections, want %d\n", rank, nConns, nranks - 1);
    return 1;
  }
  mscclppDevConn_t* conns;
  CUDACHECK(cudaMalloc(&conns, nConns * sizeof(mscclppDevConn_t)));
  CUDACHECK(cudaMemcpy(conns, hostConns, nConns * sizeof(mscclppDevConn_t), cudaMemcpyHostToDevice));
  /* a copy from pageable memory may return before its DMA is done, and the kernels below run on
   * a non-blocking stream that does not wait for the legacy one */
  CUDACHECK(cudaDeviceSynchronize());
  MSCCLPPCHECK(mscclppProxyLaunch(gComm));

  cudaStream_t s;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t t0, t1;
  CUDACHECK(cudaEventCreate(&t0));
  CUDACHECK(cudaEventCreate(&t1));
  std::vector<unsigned char> host(bytes);
  int failures = 0;

  for (uint64_t chunk = 1ull << 20; chunk <= maxChunk; chunk *= 4) {
    int iters = chunk >= (16ull << 20) ? 5 : 20;
    /* on s: the legacy stream's cudaMemset would not be ordered before fill on a non-blocking stream */
    CUDACHECK(cudaMemsetAsync(buf, 0, bytes, s));
    fill<<<64, 256, 0, s>>>(buf + rank * chunk, rank, chunk);
    CUDACHECK(cudaStreamSynchronize(s));
    MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));

    allgather<<<nConns, 32, 0, s>>>(conns, rank, chunk); /* warm-up */
    CUDACHECK(cudaStreamSynchronize(s));
    MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
    CUDACHECK(cudaEventRecord(t0, s));
    for (int i = 0; i < iters; i++) allgather<<<nConns, 32, 0, s>>>(conns, rank, chunk);
    CUDACHECK(cudaEventRecord(t1, s));
    CUDACHECK(cudaStreamSynchronize(s));
    double us = elapsedMs(t0, t1) * 1000.0 / iters;

    /* every rank's puts have landed once every rank has flushed */
    flushAll<<<nConns, 32, 0, s>>>(conns);
    CUDACHECK(cudaStreamSynchronize(s));
    MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
    CUDACHECK(cudaMemcpy(host.data(), buf, chunk * nranks, cudaMemcpyDeviceToHost));
    long bad = 0, firstBad = -1;
    for (int r = 0; r < nranks; r++)
      for (uint64_t i = 0; i < chunk; i++)
        if (host[r * chunk + i] != pattern(r, i)) {
          if (firstBad < 0) firstBad = (long)(r * chunk + i);
          bad++;
        }
    double algbw = (double)(chunk * nranks) / (us * 1e3); /* GB/s */
    double busbw = algbw * (nranks - 1) / nranks;
    printf("allgather: rank %d of %d (GPU %d) chunk %8llu B: %10.1f us  algbw %7.2f GB/s  busbw %7.2f GB/s  %s\n",
           rank, nranks, device, (unsigned long long)chunk, us, algbw, busbw, bad == 0 ? "bytes ok" : "BYTES WRONG");
    if (bad != 0) {
      fprintf(stderr, "rank %d: chunk %llu: %ld wrong bytes, first at %ld (chunk of rank %ld)\n", rank,
              (unsigned long long)chunk, bad, firstBad, firstBad / (long)chunk);
      failures++;
    }
  }

  mscclppResult_t async = mscclppSuccess;
  MSCCLPPCHECK(mscclppCommGetAsyncError(gComm, &async));
  if (async != mscclppSuccess) {
    fprintf(stderr, "rank %d: asynchronous error: %s (%s)\n", rank, mscclppGetErrorString(async),
            mscclppGetLastError(gComm));
    failures++;
  }
  MSCCLPPCHECK(mscclppProxyStop(gComm));
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  MSCCLPPCHECK(mscclppCommDestroy(gComm));
  CUDACHECK(cudaFree(conns));
  CUDACHECK(cudaFree(buf));
  if (failures == 0) printf("allgather: rank %d PASS\n", rank);
  return failures == 0 ? 0 : 1;
}
