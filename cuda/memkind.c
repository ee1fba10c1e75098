/*
 * memkind.c: which device memory the library can share with a peer. Memory from a
 * memory pool (cudaMallocAsync) or the VMM API (cuMemCreate/cuMemMap) has no legacy
 * CUDA IPC handle and no nvidia-peermem registration; the driver says so through
 * cuPointerGetAttribute. In C because the attributes are read into driver types.
 */
#include "calls.h"

int cuwShareKind(const cuwApi* a, cuwDevicePtr p, int* kind)
{
  *kind = CUW_SHARE_OK;
  if (a->init(0) != CUW_SUCCESS) return CUW_SUCCESS; /* not device memory of this process */
  unsigned int type = 0;
  if (a->pointerGetAttribute(&type, CUW_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUW_SUCCESS ||
      type != CUW_MEMORYTYPE_DEVICE)
    return CUW_SUCCESS;
  unsigned int managed = 0;
  if (a->pointerGetAttribute(&managed, CUW_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUW_SUCCESS && managed)
    return CUW_SUCCESS; /* managed memory: not this check's concern */
  int capable = 1;
  /* a driver without the attribute (before CUDA 11.0) says nothing: shared as before */
  if (a->pointerGetAttribute(&capable, CUW_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) != CUW_SUCCESS || capable)
    return CUW_SUCCESS;
  void* pool = NULL;
  if (a->pointerGetAttribute(&pool, CUW_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) != CUW_SUCCESS) pool = NULL;
  *kind = pool != NULL ? CUW_SHARE_POOL : CUW_SHARE_VMM;
  return CUW_SUCCESS;
}
