/*
 * faults.cu: what a kernel waiting on a P2P connection sees when its communicator can no longer
 * serve it, on a real GPU (2 ranks, one process each, GPU rank % ndev):
 *   peerkill  rank 0's kernel waits for a signal rank 1 never sends; once it waits, rank 1 is
 *             killed (SIGKILL; run with launch --expect-fail 1). Copies into a dead peer's
 *             mapping still succeed, so only the library's watcher can tell the kernel: its
 *             wait() must return with failed() true within the bootstrap timeout (5 s here)
 *             + 1 s, and rank 0's asynchronous error must be mscclppRemoteError.
 *   stopwait  each rank's kernel waits for a signal that never comes; mscclppProxyStop on both
 *             ranks: nothing serves the FIFO any more, so the wait must return with failed()
 *             true within 1 s of the stop, with no error recorded.
 * Prints "<mode>: ..." lines and "<mode>: rank R PASS", or why not; exits non-zero on a failure.
 */
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define BOOTSTRAP_TIMEOUT_S 5

static const char* const kModes[] = {"peerkill", "stopwait", NULL};

/* state[0]: 1 once the kernel is about to wait, 2 once wait() returned; state[1]: failed(). */
__global__ void waitOnce(mscclppDevConn_t* c, volatile int* state)
{
  state[0] = 1;
  __threadfence_system();
  c->wait();
  state[1] = c->failed() ? 1 : 0;
  __threadfence_system();
  state[0] = 2;
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Polls *state (host-mapped memory the kernel writes) until it is want or limit seconds pass. */
static bool awaitState(volatile int* state, int want, double limit)
{
  for (double end = now() + limit; now() < end; usleep(1000))
    if (*state == want) return true;
  return *state == want;
}

int main(int argc, char** argv)
{
  if (listModes(argc, argv, kModes)) return 0;
  const char* mode = argc > 1 ? argv[1] : "";
  bool peerkill = strcmp(mode, "peerkill") == 0;
  if (!peerkill && strcmp(mode, "stopwait") != 0) {
    fprintf(stderr, "unknown mode '%s' (peerkill, stopwait)\n", mode);
    return 2;
  }
  MSCCLPPCHECK(mscclppSetBootstrapConnTimeout(BOOTSTRAP_TIMEOUT_S));
  int rank, nranks, device;
  setupRank(&rank, &nranks, &device);
  if (nranks != 2) {
    fprintf(stderr, "faults %s needs exactly 2 ranks\n", mode);
    return 2;
  }
  const uint64_t n = 1 << 20;
  void* buf;
  CUDACHECK(cudaMalloc(&buf, n));
  CUDACHECK(cudaMemset(buf, 0, n));
  mscclppDevConn_t* c = connectLaunch(gComm, 1 - rank, buf, n, mscclppTransportP2P, NULL, NULL);
  int *state, *dstate;
  CUDACHECK(cudaHostAlloc(&state, 2 * sizeof(int), cudaHostAllocMapped));
  state[0] = state[1] = 0;
  CUDACHECK(cudaHostGetDevicePointer(&dstate, state, 0));
  cudaStream_t s;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  bool waits = !peerkill || rank == 0;
  if (waits) {
    waitOnce<<<1, 1, 0, s>>>(c, dstate);
    if (!awaitState(state, 1, 20)) {
      fprintf(stderr, "%s: rank %d: the kernel did not start within 20 s: FAILED\n", mode, rank);
      _exit(1);
    }
  }
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm)); /* every waiting kernel is in its wait */
  if (peerkill && rank == 1) {
    printf("%s: rank 1 kills itself (SIGKILL) while rank 0's kernel waits for its signal\n", mode);
    fflush(stdout);
    raise(SIGKILL);
  }
  double t0 = now(), bound = peerkill ? BOOTSTRAP_TIMEOUT_S + 1.0 : 1.0;
  if (!peerkill) MSCCLPPCHECK(mscclppProxyStop(gComm));
  bool returned = awaitState(state, 2, bound + 10);
  double took = now() - t0;
  if (!returned) {
    /* the kernel spins for ever: exit without the teardown it would block */
    printf("%s: rank %d: the waiting kernel did not return within %.0f s (bound %.0f s) FAILED\n", mode, rank,
           bound + 10, bound);
    fflush(stdout);
    _exit(1);
  }
  CUDACHECK(cudaStreamSynchronize(s));
  int rc = 0;
  mscclppResult_t async = mscclppSuccess;
  MSCCLPPCHECK(mscclppCommGetAsyncError(gComm, &async));
  printf("%s: rank %d: the waiting kernel returned %.3f s after the %s (bound %.1f s), failed() %s; "
         "asynchronous error: %s (%s)\n",
         mode, rank, took, peerkill ? "peer was killed" : "mscclppProxyStop began", bound, state[1] ? "true" : "false",
         mscclppGetErrorString(async), async == mscclppSuccess ? "none" : mscclppGetLastError(gComm));
  if (took > bound || state[1] != 1) rc = 1;
  if (peerkill && async != mscclppRemoteError) {
    fprintf(stderr, "%s: rank %d: want mscclppRemoteError as the asynchronous error\n", mode, rank);
    rc = 1;
  }
  if (!peerkill && async != mscclppSuccess) {
    fprintf(stderr, "%s: rank %d: a stop records no error\n", mode, rank);
    rc = 1;
  }
  if (!peerkill) MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  double d0 = now();
  mscclppResult_t dr = mscclppCommDestroy(gComm);
  printf("%s: rank %d: mscclppCommDestroy: %s after %.3f s\n", mode, rank, mscclppGetErrorString(dr), now() - d0);
  if (!peerkill && dr != mscclppSuccess) rc = 1;
  CUDACHECK(cudaStreamDestroy(s));
  CUDACHECK(cudaFreeHost(state));
  CUDACHECK(cudaFree(c));
  CUDACHECK(cudaFree(buf));
  if (rc == 0) printf("%s: rank %d PASS\n", mode, rank);
  return rc;
}
