/*
 * cuapi.h: the few CUDA driver API and NVML declarations the library uses,
 * written out by hand so that building libmscclpp needs no CUDA toolkit.
 * libcuda.so.1 and libnvidia-ml.so.1 are opened at run time and these tables
 * are filled by impl/dynlib from the lists of loader.c, every symbol checked;
 * nothing here links against them.
 *
 * The types match cuda.h / nvml.h on every 64-bit platform (CUresult is an
 * int-sized enum there). The opaque struct tags are the toolkit's own, so the
 * conformance test (api_test.go) can include cuda.h beside this header and
 * check every function-pointer type against the real prototype.
 */
#ifndef MSCCLPP_CUAPI_H_
#define MSCCLPP_CUAPI_H_

#include "../impl/dynlib/dynlib.h"
#include <stddef.h>

/* The conformance test defines these as the toolkit's types. */
#ifndef CUW_RESULT
#define CUW_RESULT int
#endif
#ifndef CUW_POINTER_ATTRIBUTE
#define CUW_POINTER_ATTRIBUTE int
#endif
#ifndef CUW_RANGE_HANDLE_TYPE
#define CUW_RANGE_HANDLE_TYPE int
#endif
#ifndef CUW_DEVICE_ATTRIBUTE
#define CUW_DEVICE_ATTRIBUTE int
#endif
#ifndef CUW_NVML_RETURN
#define CUW_NVML_RETURN int
#endif

typedef CUW_RESULT cuwResult;
typedef unsigned long long cuwDevicePtr; /* CUdeviceptr */
typedef int cuwDevice;                   /* CUdevice */
typedef struct CUctx_st* cuwContext;     /* CUcontext */
typedef struct CUstream_st* cuwStream;   /* CUstream */

#define CUW_IPC_HANDLE_SIZE 64
struct cuwIpcMemHandle_st {
  char reserved[CUW_IPC_HANDLE_SIZE];
};
/* CUipcMemHandle, passed by value (the conformance test uses the toolkit's type) */
#ifdef CUW_IPC_HANDLE
typedef CUW_IPC_HANDLE cuwIpcMemHandle;
#else
typedef struct cuwIpcMemHandle_st cuwIpcMemHandle;
#endif

enum {
  CUW_SUCCESS = 0,
  CUW_ERROR_OUT_OF_MEMORY = 2,
  CUW_ERROR_NOT_INITIALIZED = 3,
  CUW_ERROR_NO_DEVICE = 100,
  CUW_ERROR_INVALID_VALUE = 1,
  CUW_ERROR_INVALID_CONTEXT = 201,
  CUW_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
};

/* Flags (values from cuda.h). */
#define CUW_MEMHOSTALLOC_PORTABLE 0x01
#define CUW_MEMHOSTALLOC_DEVICEMAP 0x02
#define CUW_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
#define CUW_STREAM_NON_BLOCKING 0x1
#define CUW_POINTER_ATTRIBUTE_CONTEXT 1
#define CUW_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CUW_POINTER_ATTRIBUTE_BUFFER_ID 7
#define CUW_POINTER_ATTRIBUTE_IS_MANAGED 8
#define CUW_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE 10
#define CUW_POINTER_ATTRIBUTE_MEMPOOL_HANDLE 17
#define CUW_MEMORYTYPE_DEVICE 2
#define CUW_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define CUW_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING 118
#define CUW_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER 100

/* The driver entry points, each under the exported (versioned) name noted. */
typedef struct cuwApi {
  cuwResult (*init)(unsigned int flags);                                  /* cuInit */
  cuwResult (*getErrorName)(cuwResult err, const char** str);             /* cuGetErrorName */
  cuwResult (*getErrorString)(cuwResult err, const char** str);           /* cuGetErrorString */
  cuwResult (*ctxGetCurrent)(cuwContext* ctx);                            /* cuCtxGetCurrent */
  cuwResult (*ctxSetCurrent)(cuwContext ctx);                             /* cuCtxSetCurrent */
  cuwResult (*ctxGetDevice)(cuwDevice* dev);                              /* cuCtxGetDevice */
  cuwResult (*deviceGetPCIBusId)(char* busId, int len, cuwDevice dev);    /* cuDeviceGetPCIBusId */
  cuwResult (*memAlloc)(cuwDevicePtr* dptr, size_t size);                 /* cuMemAlloc_v2 */
  cuwResult (*memFree)(cuwDevicePtr dptr);                                /* cuMemFree_v2 */
  cuwResult (*memsetD8)(cuwDevicePtr dst, unsigned char value, size_t n); /* cuMemsetD8_v2 */
  cuwResult (*memHostAlloc)(void** pp, size_t size, unsigned int flags);  /* cuMemHostAlloc */
  cuwResult (*memFreeHost)(void* p);                                      /* cuMemFreeHost */
  cuwResult (*memHostGetDevicePointer)(cuwDevicePtr* dptr, void* p, unsigned int flags); /* cuMemHostGetDevicePointer_v2 */
  cuwResult (*memGetAddressRange)(cuwDevicePtr* base, size_t* size, cuwDevicePtr dptr);  /* cuMemGetAddressRange_v2 */
  cuwResult (*ipcGetMemHandle)(cuwIpcMemHandle* handle, cuwDevicePtr dptr);              /* cuIpcGetMemHandle */
  cuwResult (*ipcOpenMemHandle)(cuwDevicePtr* dptr, cuwIpcMemHandle handle, unsigned int flags); /* cuIpcOpenMemHandle_v2 */
  cuwResult (*ipcCloseMemHandle)(cuwDevicePtr dptr);                     /* cuIpcCloseMemHandle */
  cuwResult (*streamCreate)(cuwStream* stream, unsigned int flags);       /* cuStreamCreate */
  cuwResult (*streamDestroy)(cuwStream stream);                           /* cuStreamDestroy_v2 */
  cuwResult (*streamSynchronize)(cuwStream stream);                       /* cuStreamSynchronize */
  cuwResult (*memcpyDtoDAsync)(cuwDevicePtr dst, cuwDevicePtr src, size_t n, cuwStream stream);  /* cuMemcpyDtoDAsync_v2 */
  cuwResult (*memcpyHtoDAsync)(cuwDevicePtr dst, const void* src, size_t n, cuwStream stream);   /* cuMemcpyHtoDAsync_v2 */
  cuwResult (*memcpyAsync)(cuwDevicePtr dst, cuwDevicePtr src, size_t n, cuwStream stream);      /* cuMemcpyAsync */
  cuwResult (*pointerGetAttribute)(void* data, CUW_POINTER_ATTRIBUTE attr, cuwDevicePtr ptr);   /* cuPointerGetAttribute */
  cuwResult (*primaryCtxRetain)(cuwContext* pctx, cuwDevice dev);         /* cuDevicePrimaryCtxRetain */
  cuwResult (*primaryCtxRelease)(cuwDevice dev);                          /* cuDevicePrimaryCtxRelease_v2 */
  cuwResult (*primaryCtxGetState)(cuwDevice dev, unsigned int* flags, int* active); /* cuDevicePrimaryCtxGetState */
  cuwResult (*ctxEnablePeerAccess)(cuwContext peer, unsigned int flags);   /* cuCtxEnablePeerAccess */
  cuwResult (*deviceGetAttribute)(int* v, CUW_DEVICE_ATTRIBUTE attr, cuwDevice dev); /* cuDeviceGetAttribute */
} cuwApi;

/* Entry points a driver may lack (CUDA 11.7 added cuMemGetHandleForAddressRange): resolved in a
 * table of their own, whose load failing means "not offered", never a failure of the driver. */
#define CUW_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 0x1
typedef struct cuwDmabufApi {
  cuwResult (*getHandleForAddressRange)(void* handle, cuwDevicePtr dptr, size_t size, CUW_RANGE_HANDLE_TYPE type,
                                        unsigned long long flags); /* cuMemGetHandleForAddressRange */
} cuwDmabufApi;

/* NVML (nvml.h): nvmlReturn_t is an int-sized enum, nvmlDevice_t an opaque pointer. */
typedef CUW_NVML_RETURN cuwNvmlReturn;
typedef struct nvmlDevice_st* cuwNvmlDevice;

typedef struct cuwNvml {
  cuwNvmlReturn (*init)(void);                                                       /* nvmlInit_v2 */
  cuwNvmlReturn (*shutdown)(void);                                                   /* nvmlShutdown */
  const char* (*errorString)(cuwNvmlReturn r);                                       /* nvmlErrorString */
  cuwNvmlReturn (*deviceGetHandleByPciBusId)(const char* busId, cuwNvmlDevice* dev); /* nvmlDeviceGetHandleByPciBusId_v2 */
  cuwNvmlReturn (*deviceGetCpuAffinity)(cuwNvmlDevice dev, unsigned int n, unsigned long* set); /* nvmlDeviceGetCpuAffinity */
} cuwNvml;

/* The entry points of cuwApi and cuwNvml (impl/dynlib's dynSym), each list ended by a NULL name. */
typedef dynSym cuwSym;
extern const cuwSym cuwCudaSyms[];
extern const cuwSym cuwNvmlSyms[];
extern const cuwSym cuwDmabufSyms[];

#endif
