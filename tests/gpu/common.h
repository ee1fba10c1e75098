/*
 * common.h: what the GPU checks share: the rank environment set by
 * tests/c/launch (MSCCLPP_TEST_RANK, MSCCLPP_TEST_NRANKS, MSCCLPP_TEST_ADDR),
 * error checks that name the failing call and the library's last error, a
 * bootstrapped communicator on the GPU rank % (number of GPUs), one connection
 * set up with its device copy, driver entry points, and the "--modes" answer
 * run.sh's dry run reads.
 */
#ifndef MSCCLPP_TESTS_GPU_COMMON_H_
#define MSCCLPP_TESTS_GPU_COMMON_H_

#include <cuda.h>
#include <cuda_runtime.h>
#include <mscclpp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int gRank = -1;
static mscclppComm_t gComm = NULL;

#define CUDACHECK(cmd)                                                                                 \
  do {                                                                                                 \
    cudaError_t e_ = (cmd);                                                                            \
    if (e_ != cudaSuccess) {                                                                           \
      fprintf(stderr, "rank %d: %s:%d: %s: %s\n", gRank, __FILE__, __LINE__, #cmd, cudaGetErrorString(e_)); \
      exit(1);                                                                                         \
    }                                                                                                  \
  } while (0)

#define MSCCLPPCHECK(cmd)                                                                               \
  do {                                                                                                  \
    mscclppResult_t r_ = (cmd);                                                                         \
    if (r_ != mscclppSuccess) {                                                                         \
      fprintf(stderr, "rank %d: %s:%d: %s: %s (%s)\n", gRank, __FILE__, __LINE__, #cmd,                 \
              mscclppGetErrorString(r_), mscclppGetLastError(gComm));                                   \
      exit(1);                                                                                          \
    }                                                                                                   \
  } while (0)

static int envInt(const char* name)
{
  const char* v = getenv(name);
  if (v == NULL || *v == '\0') {
    fprintf(stderr, "%s is not set: start this program with tests/c/launch\n", name);
    exit(2);
  }
  return atoi(v);
}

/* Selects the GPU rank % ndev (the application's cudaSetDevice), makes its
 * context current, and joins the job's communicator. */
static void setupRank(int* rank, int* nranks, int* device)
{
  *rank = gRank = envInt("MSCCLPP_TEST_RANK");
  *nranks = envInt("MSCCLPP_TEST_NRANKS");
  const char* addr = getenv("MSCCLPP_TEST_ADDR");
  if (addr == NULL) {
    fprintf(stderr, "MSCCLPP_TEST_ADDR is not set: start this program with tests/c/launch\n");
    exit(2);
  }
  int ndev = 0;
  CUDACHECK(cudaGetDeviceCount(&ndev));
  *device = *rank % ndev;
  CUDACHECK(cudaSetDevice(*device));
  CUDACHECK(cudaFree(0)); /* creates the primary context on every CUDA version */
  MSCCLPPCHECK(mscclppCommInitRank(&gComm, *nranks, addr, *rank));
}

/* The end of a check's rank: an asynchronous error fails it (rc 1), then ProxyStop, a
 * barrier and destroy, the two device buffers freed; prints "MODE: rank R PASS" when rc is 0. */
static int finishRank(const char* mode, int rank, int rc, void* c, void* buf)
{
  mscclppResult_t async = mscclppSuccess;
  MSCCLPPCHECK(mscclppCommGetAsyncError(gComm, &async));
  if (async != mscclppSuccess) {
    fprintf(stderr, "rank %d: asynchronous error: %s (%s)\n", rank, mscclppGetErrorString(async),
            mscclppGetLastError(gComm));
    rc = 1;
  }
  MSCCLPPCHECK(mscclppProxyStop(gComm));
  MSCCLPPCHECK(mscclppBootstrapBarrier(gComm));
  MSCCLPPCHECK(mscclppCommDestroy(gComm));
  CUDACHECK(cudaFree(c));
  CUDACHECK(cudaFree(buf));
  if (rc == 0) printf("%s: rank %d PASS\n", mode, rank);
  return rc;
}

/* Declares the connection to peer over buf (n bytes) on tr, sets it up and launches the proxy;
 * returns the device connection's copy in device memory (and the library's host copy in *host). */
static mscclppDevConn_t* connectLaunch(mscclppComm_t comm, int peer, void* buf, uint64_t n, mscclppTransport_t tr,
                                       const char* ibDev, mscclppDevConn_t** host)
{
  MSCCLPPCHECK(mscclppConnect(comm, peer, 0, buf, n, tr, ibDev));
  MSCCLPPCHECK(mscclppConnectionSetup(comm));
  mscclppDevConn_t *h, *dev;
  MSCCLPPCHECK(mscclppGetDeviceConnection(comm, peer, 0, &h));
  CUDACHECK(cudaMalloc(&dev, sizeof(*dev)));
  CUDACHECK(cudaMemcpy(dev, h, sizeof(*dev), cudaMemcpyHostToDevice));
  CUDACHECK(cudaDeviceSynchronize());
  MSCCLPPCHECK(mscclppProxyLaunch(comm));
  if (host != NULL) *host = h;
  return dev;
}

/* A driver API entry point (the checks link only the runtime), or NULL. */
static void* driverFn(const char* name)
{
  void* fn = NULL;
  if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) fn = NULL;
  return fn;
}

/* "prog --modes": prints the modes (a NULL-ended list) for run.sh --dry-run and returns 1. */
static int listModes(int argc, char** argv, const char* const* modes)
{
  if (argc < 2 || strcmp(argv[1], "--modes") != 0) return 0;
  for (; *modes != NULL; modes++) printf("%s\n", *modes);
  return 1;
}

static double elapsedMs(cudaEvent_t a, cudaEvent_t b)
{
  float ms = 0;
  CUDACHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

#endif
