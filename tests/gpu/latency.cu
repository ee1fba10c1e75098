/*
 * latency.cu: two ranks over one MSCCL++ P2P connection, initiated from the
 * GPU:
 *   - signal->wait latency: a ping-pong of putWithSignal(8 B) / wait() between
 *     two single-thread kernels, one-way time = round trip / 2;
 *   - P2P put bandwidth: rank 0 puts ITERS x SIZE bytes with putWithSignal,
 *     rank 1 waits for each and signals back once, for SIZE = 16 and 256 MiB;
 *   - beside it, cudaMemcpy device-to-device bandwidth on rank 0's GPU,
 *     measured in the same run while rank 1 idles.
 *
 *   launch -n 2 latency [PINGPONG_ITERS]   (default 200)
 */
#include "common.h"

/* Puts 8 bytes at the peer's offset `at` (outside what the bandwidth check reads). */
__global__ void pingpong(mscclppDevConn_t* c, int rank, int iters, uint64_t at)
{
  for (int i = 0; i < iters; i++) {
    if (rank == 0) {
      c->putWithSignal(at, 0, 8);
      c->wait();
    } else {
      c->wait();
      c->putWithSignal(at, 0, 8);
    }
  }
}

__global__ void sender(mscclppDevConn_t* c, uint64_t size, int iters)
{
  for (int i = 0; i < iters; i++) c->putWithSignal(0, 0, size);
  c->wait(); /* the receiver's acknowledgement */
}

__global__ void receiver(mscclppDevConn_t* c, int iters)
{
  for (int i = 0; i < iters; i++) c->wait();
  c->signal();
}

int main(int argc, char** argv)
{
  int rank, nranks, device;
  setupRank(&rank, &nranks, &device);
  if (nranks != 2) {
    fprintf(stderr, "latency needs exactly 2 ranks\n");
    return 2;
  }
  int ppIters = argc > 1 ? atoi(argv[1]) : 200;
  const uint64_t maxSize = 256ull << 20;
  unsigned char* buf;
  CUDACHECK(cudaMalloc(&buf, maxSize));
  CUDACHECK(cudaMemset(buf, rank + 1, maxSize));
  int peer = 1 - rank;
  MSCCLPPCHECK(mscclppConnect(gComm, peer, 0, buf, maxSize, mscclppTransportP2P, NULL));
  MSCCLPPCHECK(mscclppConnectionSetup(gComm));
  mscclppDevConn_t* hostConn;
  MSCCLPPCHECK(mscclppGetDeviceConnection(gComm, peer, 0, &hostConn));
  mscclppDevConn_t* conn;
  CUDACHECK(cudaMalloc(&conn, sizeof(mscclppDevConn_t)));
  CUDACHECK(cudaMemcpy(conn, hostConn, sizeof(mscclppDevConn_t), cudaMemcpyHostToDevice));
  /* the memset and a copy from pageable memory may still run: the kernels below are on a
   * non-blocking stream, which does not wait for the legacy one */
  CUDACHECK(cudaDeviceSynchronize());
  MSCCLPPCHECK(mscclppProxyLaunch(gComm));

  cudaStream_t s;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t t0, t1;
  CUDACHECK(cudaEventCreate(&t0));
  CUDACHECK(cudaEventCreate(&t1));

  /* signal -> wait latency */
  pingpong<<<1, 1, 0, s>>>(conn, rank, 10, maxSize - 8); /* warm-up */
  CUDACHECK(cudaStreamSynchronize(s));
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  CUDACHECK(cudaEventRecord(t0, s));
  pingpong<<<1, 1, 0, s>>>(conn, rank, ppIters, maxSize - 8);
  CUDACHECK(cudaEventRecord(t1, s));
  CUDACHECK(cudaStreamSynchronize(s));
  double rtt = elapsedMs(t0, t1) * 1000.0 / ppIters;
  if (rank == 0)
    printf("latency: signal->wait one-way %.2f us (round trip %.2f us, putWithSignal of 8 B, %d iterations)\n",
           rtt / 2, rtt, ppIters);

  /* P2P put bandwidth, rank 0 -> rank 1 */
  const uint64_t sizes[] = {16ull << 20, 256ull << 20};
  double p2p[2];
  for (int k = 0; k < 2; k++) {
    uint64_t size = sizes[k];
    int iters = size >= (256ull << 20) ? 5 : 20;
    MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
    CUDACHECK(cudaEventRecord(t0, s));
    if (rank == 0)
      sender<<<1, 1, 0, s>>>(conn, size, iters);
    else
      receiver<<<1, 1, 0, s>>>(conn, iters);
    CUDACHECK(cudaEventRecord(t1, s));
    CUDACHECK(cudaStreamSynchronize(s));
    p2p[k] = (double)size * iters / (elapsedMs(t0, t1) * 1e6); /* GB/s */
  }
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  if (rank == 1) {
    /* rank 0's bytes (value 1) arrived */
    unsigned char probe[3];
    CUDACHECK(cudaMemcpy(&probe[0], buf, 1, cudaMemcpyDeviceToHost));
    CUDACHECK(cudaMemcpy(&probe[1], buf + (16ull << 20) - 1, 1, cudaMemcpyDeviceToHost));
    CUDACHECK(cudaMemcpy(&probe[2], buf + maxSize - 9, 1, cudaMemcpyDeviceToHost));
    if (probe[0] != 1 || probe[1] != 1 || probe[2] != 1) {
      fprintf(stderr, "rank 1: the puts did not land: bytes %u %u %u, want 1\n", probe[0], probe[1], probe[2]);
      return 1;
    }
  }

  /* cudaMemcpy device-to-device on rank 0's GPU, rank 1 idle */
  if (rank == 0) {
    unsigned char* dst;
    CUDACHECK(cudaMalloc(&dst, maxSize));
    for (int k = 0; k < 2; k++) {
      uint64_t size = sizes[k];
      int iters = size >= (256ull << 20) ? 5 : 20;
      CUDACHECK(cudaMemcpyAsync(dst, buf, size, cudaMemcpyDeviceToDevice, s)); /* warm-up */
      CUDACHECK(cudaEventRecord(t0, s));
      for (int i = 0; i < iters; i++) CUDACHECK(cudaMemcpyAsync(dst, buf, size, cudaMemcpyDeviceToDevice, s));
      CUDACHECK(cudaEventRecord(t1, s));
      CUDACHECK(cudaStreamSynchronize(s));
      double d2d = (double)size * iters / (elapsedMs(t0, t1) * 1e6);
      printf("bandwidth: %3llu MiB: P2P put %8.2f GB/s, cudaMemcpy D2D %8.2f GB/s (P2P/D2D %.2f; bytes copied, not read+written)\n",
             (unsigned long long)(size >> 20), p2p[k], d2d, p2p[k] / d2d);
    }
    CUDACHECK(cudaFree(dst));
  }
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));

  mscclppResult_t async = mscclppSuccess;
  MSCCLPPCHECK(mscclppCommGetAsyncError(gComm, &async));
  if (async != mscclppSuccess) {
    fprintf(stderr, "rank %d: asynchronous error: %s (%s)\n", rank, mscclppGetErrorString(async),
            mscclppGetLastError(gComm));
    return 1;
  }
  MSCCLPPCHECK(mscclppProxyStop(gComm));
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  MSCCLPPCHECK(mscclppCommDestroy(gComm));
  CUDACHECK(cudaFree(conn));
  CUDACHECK(cudaFree(buf));
  printf("latency: rank %d PASS\n", rank);
  return 0;
}
