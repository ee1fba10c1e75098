/*
 * api_check.c: compiled (never run) by TestDeclarationsMatchToolkit where
 * the CUDA toolkit's cuda.h and nvml.h exist: every declaration cuapi.h
 * writes out by hand must match the toolkit's.
 */
#include <cuda.h>
#include <nvml.h>
#define CUW_RESULT CUresult
#define CUW_NVML_RETURN nvmlReturn_t
#define CUW_POINTER_ATTRIBUTE CUpointer_attribute
#define CUW_IPC_HANDLE CUipcMemHandle
#define CUW_RANGE_HANDLE_TYPE CUmemRangeHandleType
#define CUW_DEVICE_ATTRIBUTE CUdevice_attribute
#include "cuapi.h"

#define SAME(a, b) _Static_assert(__builtin_types_compatible_p(a, b), #a " != " #b)
#define FN(table, field, fn) SAME(__typeof__(((table*)0)->field), __typeof__(&fn))

SAME(cuwDevicePtr, CUdeviceptr);
SAME(cuwDevice, CUdevice);
SAME(cuwContext, CUcontext);
SAME(cuwStream, CUstream);
SAME(cuwNvmlDevice, nvmlDevice_t);
_Static_assert(sizeof(struct cuwIpcMemHandle_st) == sizeof(CUipcMemHandle), "CUipcMemHandle size");
_Static_assert(_Alignof(struct cuwIpcMemHandle_st) == _Alignof(CUipcMemHandle), "CUipcMemHandle alignment");
_Static_assert(CUW_IPC_HANDLE_SIZE == CU_IPC_HANDLE_SIZE, "CU_IPC_HANDLE_SIZE");
_Static_assert(sizeof(cuwResult) == sizeof(int), "CUresult is int-sized");
_Static_assert((int)CUW_SUCCESS == (int)CUDA_SUCCESS, "CUDA_SUCCESS");
_Static_assert((int)CUW_ERROR_OUT_OF_MEMORY == (int)CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY");
_Static_assert((int)CUW_ERROR_NOT_INITIALIZED == (int)CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED");
_Static_assert((int)CUW_ERROR_NO_DEVICE == (int)CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
_Static_assert((int)CUW_ERROR_INVALID_CONTEXT == (int)CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT");
_Static_assert(CUW_MEMHOSTALLOC_PORTABLE == CU_MEMHOSTALLOC_PORTABLE, "CU_MEMHOSTALLOC_PORTABLE");
_Static_assert(CUW_MEMHOSTALLOC_DEVICEMAP == CU_MEMHOSTALLOC_DEVICEMAP, "CU_MEMHOSTALLOC_DEVICEMAP");
_Static_assert(CUW_IPC_MEM_LAZY_ENABLE_PEER_ACCESS == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, "IPC flag");
_Static_assert(CUW_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING, "CU_STREAM_NON_BLOCKING");
_Static_assert(CUW_POINTER_ATTRIBUTE_CONTEXT == CU_POINTER_ATTRIBUTE_CONTEXT, "CU_POINTER_ATTRIBUTE_CONTEXT");
_Static_assert(CUW_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING == CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, "ordering");
_Static_assert(CUW_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER == CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER, "owner");
_Static_assert(CUW_POINTER_ATTRIBUTE_MEMORY_TYPE == CU_POINTER_ATTRIBUTE_MEMORY_TYPE, "CU_POINTER_ATTRIBUTE_MEMORY_TYPE");
_Static_assert(CUW_MEMORYTYPE_DEVICE == CU_MEMORYTYPE_DEVICE, "CU_MEMORYTYPE_DEVICE");
_Static_assert(CUW_POINTER_ATTRIBUTE_BUFFER_ID == CU_POINTER_ATTRIBUTE_BUFFER_ID, "CU_POINTER_ATTRIBUTE_BUFFER_ID");
_Static_assert(CUW_POINTER_ATTRIBUTE_IS_MANAGED == CU_POINTER_ATTRIBUTE_IS_MANAGED, "CU_POINTER_ATTRIBUTE_IS_MANAGED");
_Static_assert(CUW_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, "IS_LEGACY_CUDA_IPC_CAPABLE");
_Static_assert(CUW_POINTER_ATTRIBUTE_MEMPOOL_HANDLE == CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, "CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE");
_Static_assert(CUW_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, "DMA_BUF_SUPPORTED");
_Static_assert((int)CUW_ERROR_INVALID_VALUE == (int)CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE");
_Static_assert((int)CUW_ERROR_PEER_ACCESS_ALREADY_ENABLED == (int)CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "PEER_ACCESS_ALREADY_ENABLED");

FN(cuwApi, init, cuInit);
FN(cuwApi, getErrorName, cuGetErrorName);
FN(cuwApi, getErrorString, cuGetErrorString);
FN(cuwApi, ctxGetCurrent, cuCtxGetCurrent);
FN(cuwApi, ctxSetCurrent, cuCtxSetCurrent);
FN(cuwApi, ctxGetDevice, cuCtxGetDevice);
FN(cuwApi, deviceGetPCIBusId, cuDeviceGetPCIBusId);
FN(cuwApi, memAlloc, cuMemAlloc_v2);
FN(cuwApi, memFree, cuMemFree_v2);
FN(cuwApi, memsetD8, cuMemsetD8_v2);
FN(cuwApi, memHostAlloc, cuMemHostAlloc);
FN(cuwApi, memFreeHost, cuMemFreeHost);
FN(cuwApi, memHostGetDevicePointer, cuMemHostGetDevicePointer_v2);
FN(cuwApi, memGetAddressRange, cuMemGetAddressRange_v2);
FN(cuwApi, ipcGetMemHandle, cuIpcGetMemHandle);
FN(cuwApi, ipcOpenMemHandle, cuIpcOpenMemHandle_v2);
FN(cuwApi, ipcCloseMemHandle, cuIpcCloseMemHandle);
FN(cuwApi, streamCreate, cuStreamCreate);
FN(cuwApi, streamDestroy, cuStreamDestroy_v2);
FN(cuwApi, streamSynchronize, cuStreamSynchronize);
FN(cuwApi, memcpyDtoDAsync, cuMemcpyDtoDAsync_v2);
FN(cuwApi, memcpyHtoDAsync, cuMemcpyHtoDAsync_v2);
FN(cuwApi, memcpyAsync, cuMemcpyAsync);
FN(cuwApi, pointerGetAttribute, cuPointerGetAttribute);
FN(cuwApi, primaryCtxRetain, cuDevicePrimaryCtxRetain);
FN(cuwApi, primaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
FN(cuwApi, primaryCtxGetState, cuDevicePrimaryCtxGetState);
FN(cuwApi, ctxEnablePeerAccess, cuCtxEnablePeerAccess);
FN(cuwApi, deviceGetAttribute, cuDeviceGetAttribute);

FN(cuwDmabufApi, getHandleForAddressRange, cuMemGetHandleForAddressRange);
_Static_assert(CUW_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD == CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, "DMA_BUF_FD");

FN(cuwNvml, init, nvmlInit_v2);
FN(cuwNvml, shutdown, nvmlShutdown);
FN(cuwNvml, errorString, nvmlErrorString);
FN(cuwNvml, deviceGetHandleByPciBusId, nvmlDeviceGetHandleByPciBusId_v2);
FN(cuwNvml, deviceGetCpuAffinity, nvmlDeviceGetCpuAffinity);
