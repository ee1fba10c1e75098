/*
 * boot_mscclpp: the library's bootstrap, timed by boot.h. Started by launch.
 *
 *   launch N boot_mscclpp [init|cold]
 *
 * Times mscclppCommInitRank from the release (reported through bench_ready),
 * then, unless "init" or "cold" is given, mscclppBootstrapAllGather of 4 B
 * and 1 MiB per rank and mscclppBootstrapBarrier.
 *
 * Before the release each rank makes one cheap library call
 * (mscclppGetVersion): the Go runtime of the library starts on a thread of
 * its own when the library is loaded, and the first call into it waits for
 * that and sets up the calling thread (cgo reads /proc/self/maps for the
 * main thread's stack bounds), which the C reference never pays. "cold"
 * skips that call, so that its init time includes the runtime's start.
 */
#define _GNU_SOURCE
#include <mscclpp.h>

#include "boot.h"

static int ag(void* ctx, void* data, int size)
{
  return mscclppBootstrapAllGather((mscclppComm_t)ctx, data, size) != mscclppSuccess;
}

static int bar(void* ctx) { return mscclppBootstrapBarrier((mscclppComm_t)ctx) != mscclppSuccess; }

int main(int argc, char** argv)
{
  int rank = bench_env_int("BENCH_RANK", 0), n = bench_env_int("BENCH_NRANKS", 1);
  const char* addr = getenv("BENCH_ADDR");
  if (!addr) BENCH_DIE("run me through launch");
  int initOnly = argc > 1 && (strcmp(argv[1], "init") == 0 || strcmp(argv[1], "cold") == 0);
  if (!(argc > 1 && strcmp(argv[1], "cold") == 0)) {
    int v;
    mscclppGetVersion(&v);
  }
  bench_start();
  mscclppComm_t comm = NULL;
  mscclppResult_t r = mscclppCommInitRank(&comm, n, addr, rank);
  if (r != mscclppSuccess) BENCH_DIE("rank %d: init: %s: %s", rank, mscclppGetErrorString(r), mscclppGetLastError(NULL));
  bench_ready();
  if (!initOnly) {
    boot_ops o = {comm, rank, n, ag, bar};
    boot_all(&o);
  }
  if (mscclppBootstrapBarrier(comm) != mscclppSuccess) BENCH_DIE("rank %d: final barrier", rank);
  mscclppCommDestroy(comm);
  return 0;
}
