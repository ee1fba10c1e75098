/* mode.c: CUDA/host mode choice on a machine without a usable GPU.
 *   mode auto      -- init succeeds in host mode and says why in one INFO line
 *   mode preloaded -- the app loaded libcuda.so.1 first (as cudart does): the library
 *                     probes the driver and still falls back to host mode, naming the CUDA error
 *   mode cuda      -- MSCCLPP_DEVICE=cuda: init fails clearly (no hang, a message naming the cause) */
#define _GNU_SOURCE
#include "mscclpp.h"

#include <dlfcn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static char seen[8192];
static void handler(const char* msg)
{
  if (strlen(seen) + strlen(msg) < sizeof(seen)) strcat(seen, msg);
}

int main(int argc, char** argv)
{
  const char* which = argc > 1 ? argv[1] : "auto";
  const char* addr = getenv("MSCCLPP_TEST_ADDR");
  mscclppComm_t comm = NULL;
  test_init("mode");
  MCHECK(mscclppSetLogHandler(handler));
  if (strcmp(which, "cuda") == 0) {
    mscclppResult_t r = mscclppCommInitRank(&comm, 1, addr, 0);
    const char* msg = mscclppGetLastError(NULL);
    printf("MSCCLPP_DEVICE=cuda: %s: %s\n", mscclppGetErrorString(r), msg);
    CHECK(r == mscclppUnhandledCudaError || r == mscclppInvalidUsage, "code %d", (int)r);
    CHECK(comm == NULL, "comm %p", (void*)comm);
    CHECK(strstr(msg, "MSCCLPP_DEVICE=cuda") != NULL, "%s", msg);
    CHECK(strstr(msg, "cuInit") != NULL || strstr(msg, "libcuda") != NULL || strstr(msg, "context") != NULL, "%s", msg);
  } else {
    if (strcmp(which, "preloaded") == 0 && dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) == NULL) {
      printf("SKIP: no libcuda.so.1 here (%s)\n", dlerror());
      return 0;
    }
    MCHECK(mscclppCommInitRank(&comm, 1, addr, 0));
    printf("log: %s", seen);
    CHECK(strstr(seen, "MSCCLPP INFO host mode: ") != NULL, "no INFO line saying why host mode: %s", seen);
    if (strcmp(which, "preloaded") == 0)
      CHECK(strstr(seen, "host mode: cuInit: CUDA_ERROR_") != NULL, "the probe's CUDA error is not named: %s", seen);
    MCHECK(mscclppCommDestroy(comm));
  }
  return test_finish();
}
