/*
 * loader.c: the entry points of the function tables of cuapi.h, as lists
 * impl/dynlib's loader (the one loader of vendor libraries) fills them from.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "cuapi.h"

#define SYM(field, name) {name, NULL, NULL, offsetof(cuwApi, field)}
#define SYM2(field, name, old) {name, old, NULL, offsetof(cuwApi, field)}

const cuwSym cuwCudaSyms[] = {
    SYM(init, "cuInit"),
    SYM(getErrorName, "cuGetErrorName"),
    SYM(getErrorString, "cuGetErrorString"),
    SYM(ctxGetCurrent, "cuCtxGetCurrent"),
    SYM(ctxSetCurrent, "cuCtxSetCurrent"),
    SYM(ctxGetDevice, "cuCtxGetDevice"),
    SYM(deviceGetPCIBusId, "cuDeviceGetPCIBusId"),
    SYM(memAlloc, "cuMemAlloc_v2"),
    SYM(memFree, "cuMemFree_v2"),
    SYM(memsetD8, "cuMemsetD8_v2"),
    SYM(memHostAlloc, "cuMemHostAlloc"),
    SYM(memFreeHost, "cuMemFreeHost"),
    SYM(memHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
    SYM(memGetAddressRange, "cuMemGetAddressRange_v2"),
    SYM(ipcGetMemHandle, "cuIpcGetMemHandle"),
    SYM2(ipcOpenMemHandle, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"),
    SYM(ipcCloseMemHandle, "cuIpcCloseMemHandle"),
    SYM(streamCreate, "cuStreamCreate"),
    SYM(streamDestroy, "cuStreamDestroy_v2"),
    SYM(streamSynchronize, "cuStreamSynchronize"),
    SYM(memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
    SYM(memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    SYM(memcpyAsync, "cuMemcpyAsync"),
    SYM(pointerGetAttribute, "cuPointerGetAttribute"),
    SYM(primaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    SYM2(primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    SYM(primaryCtxGetState, "cuDevicePrimaryCtxGetState"),
    SYM(ctxEnablePeerAccess, "cuCtxEnablePeerAccess"),
    SYM(deviceGetAttribute, "cuDeviceGetAttribute"),
    {NULL, NULL, 0},
};

/* optional: a driver without it offers no dma-buf export (GPUDirect RDMA then needs nvidia-peermem) */
const cuwSym cuwDmabufSyms[] = {
    {"cuMemGetHandleForAddressRange", NULL, NULL, offsetof(cuwDmabufApi, getHandleForAddressRange)},
    {NULL, NULL, 0},
};

#undef SYM
#define SYM(field, name) {name, NULL, NULL, offsetof(cuwNvml, field)}

const cuwSym cuwNvmlSyms[] = {
    SYM(init, "nvmlInit_v2"),
    SYM(shutdown, "nvmlShutdown"),
    SYM(errorString, "nvmlErrorString"),
    SYM(deviceGetHandleByPciBusId, "nvmlDeviceGetHandleByPciBusId_v2"),
    SYM(deviceGetCpuAffinity, "nvmlDeviceGetCpuAffinity"),
    {NULL, NULL, 0},
};
