/*
 * job.c: one rank of the traced job of trace_test.go.
 *
 *   job ADDR NRANKS RANK
 *
 * Makes a known set of calls: mscclppCommInitRank, mscclppCommRank,
 * mscclppCommSize, mscclppBootstrapAllGather (4 bytes a rank), three
 * mscclppGetVersion from a second thread, mscclppBootstrapBarrier,
 * mscclppCommDestroy. Exit status 0 when every call succeeded.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "mscclpp.h"

#define CHECK(call)                                                  \
  do {                                                               \
    mscclppResult_t r_ = (call);                                     \
    if (r_ != mscclppSuccess) {                                      \
      fprintf(stderr, "job: %s: %s\n", #call, mscclppGetErrorString(r_)); \
      exit(1);                                                       \
    }                                                                \
  } while (0)

static void* versions(void* arg)
{
  (void)arg;
  for (int i = 0; i < 3; i++) {
    int v;
    CHECK(mscclppGetVersion(&v));
  }
  return NULL;
}

int main(int argc, char** argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: job ADDR NRANKS RANK\n");
    return 2;
  }
  int n = atoi(argv[2]), me = atoi(argv[3]);
  mscclppComm_t comm;
  CHECK(mscclppCommInitRank(&comm, n, argv[1], me));
  int rank, size;
  CHECK(mscclppCommRank(comm, &rank));
  CHECK(mscclppCommSize(comm, &size));
  int data[64] = {0};
  if (size > 64) return 1;
  data[rank] = rank + 100;
  CHECK(mscclppBootstrapAllGather(comm, data, sizeof(int)));
  for (int r = 0; r < size; r++)
    if (data[r] != r + 100) return 1;
  pthread_t t;
  if (pthread_create(&t, NULL, versions, NULL) != 0 || pthread_join(t, NULL) != 0) return 1;
  CHECK(mscclppBootstrapBarrier(comm));
  CHECK(mscclppCommDestroy(comm));
  return 0;
}
