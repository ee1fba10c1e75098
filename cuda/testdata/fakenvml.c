/*
 * fakenvml.c: a stand-in libnvidia-ml.so.1 for the package's tests: one GPU
 * at 0000:3B:00.0 whose CPU affinity is {1, 3, 64}.
 */
#include <string.h>
#include <strings.h>

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char* nvmlErrorString(int r) { return r == 6 ? "Not Found" : "Unknown Error"; }
int nvmlDeviceGetHandleByPciBusId_v2(const char* id, void** dev)
{
  static char gpu;
  if (strcasecmp(id, "0000:3B:00.0") != 0 && strcasecmp(id, "00000000:3B:00.0") != 0) return 6;
  *dev = &gpu;
  return 0;
}
int nvmlDeviceGetCpuAffinity(void* dev, unsigned int n, unsigned long* set)
{
  (void)dev;
  memset(set, 0, n * sizeof(*set));
  set[0] = (1ul << 1) | (1ul << 3);
  if (n > 1) set[1] = 1ul;
  return 0;
}
