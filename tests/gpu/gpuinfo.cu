/*
 * gpuinfo.cu: the GPUs as CUDA sees them, for run.sh: the count comes from
 * cudaGetDeviceCount, so CUDA_VISIBLE_DEVICES and MIG instances count as the
 * checks will see them (nvidia-smi -L lists every physical GPU). Per device it
 * logs the attributes the library's paths depend on: GPUDirect RDMA supported
 * (116), its write ordering (118: the library registers device memory with
 * relaxed ordering only where it is at least OWNER), dma-buf supported (124)
 * and memory pools (cudaMallocAsync). Needs no libmscclpp.
 *
 * Prints "gpuinfo: ..." lines and last "gpus N"; N is 0 (exit 0) where the
 * driver is missing or finds no device, with the CUDA error on a line before.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

typedef CUresult (*getAttrFn)(int*, CUdevice_attribute, CUdevice);

/* One driver attribute as text: its value, or why there is none. */
static void attr(getAttrFn get, int dev, int which, const char* name)
{
  int v = 0;
  if (get == NULL) {
    printf(" %s (%d) not asked (no cuDeviceGetAttribute);", name, which);
    return;
  }
  CUresult rc = get(&v, (CUdevice_attribute)which, dev);
  if (rc != CUDA_SUCCESS)
    printf(" %s (%d) unknown to this driver (CUresult %d);", name, which, (int)rc);
  else
    printf(" %s (%d) %d;", name, which, v);
}

int main(void)
{
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    printf("gpuinfo: cudaGetDeviceCount: %s\n", cudaGetErrorString(e));
    printf("gpus 0\n");
    return 0;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  printf("gpuinfo: %d CUDA device(s) (CUDA_VISIBLE_DEVICES %s); driver API %d, runtime %d\n", n,
         visible ? visible : "unset", driver, runtime);
  void* fn = NULL;
  if (cudaGetDriverEntryPoint("cuDeviceGetAttribute", &fn, cudaEnableDefault) != cudaSuccess) fn = NULL;
  getAttrFn get = (getAttrFn)fn;
  for (int d = 0; d < n; d++) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
      printf("gpuinfo: device %d: cudaGetDeviceProperties failed\n", d);
      continue;
    }
    printf("gpuinfo: device %d: %s, sm_%d%d, PCI %04x:%02x:%02x, compute mode %d, %zu MiB;", d, p.name, p.major,
           p.minor, p.pciDomainID, p.pciBusID, p.pciDeviceID, p.computeMode, p.totalGlobalMem >> 20);
    attr(get, d, 116, "GPUDirect RDMA supported");
    attr(get, d, 118, "GPUDirect RDMA writes ordering");
    attr(get, d, 124, "dma-buf supported");
    attr(get, d, 115, "memory pools supported");
    printf("\n");
  }
  printf("gpus %d\n", n);
  return 0;
}
