/*
 * loader.c: fills the function tables of cuapi.h with dlsym from a library
 * the Go side has already opened and checked with go-nvml's pkg/dl. Every
 * symbol is checked again here; a missing one is an error that names it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "cuapi.h"

#define SYM(field, name) {name, NULL, offsetof(cuwApi, field)}
#define SYM2(field, name, old) {name, old, offsetof(cuwApi, field)}

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
    {NULL, NULL, 0},
};

#undef SYM
#define SYM(field, name) {name, NULL, offsetof(cuwNvml, field)}

const cuwSym cuwNvmlSyms[] = {
    SYM(init, "nvmlInit_v2"),
    SYM(shutdown, "nvmlShutdown"),
    SYM(errorString, "nvmlErrorString"),
    SYM(deviceGetHandleByPciBusId, "nvmlDeviceGetHandleByPciBusId_v2"),
    SYM(deviceGetCpuAffinity, "nvmlDeviceGetCpuAffinity"),
    {NULL, NULL, 0},
};

int cuwResolve(const char* name, const cuwSym* syms, void* table, char* err, int errLen)
{
  dlerror();
  void* h = dlopen(name, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == NULL) {
    const char* why = dlerror();
    snprintf(err, (size_t)errLen, "%s: not loaded: %s", name, why ? why : "dlopen failed");
    return -1;
  }
  for (const cuwSym* s = syms; s->name != NULL; s++) {
    dlerror();
    void* p = dlsym(h, s->name);
    if (p == NULL && s->fallback != NULL) p = dlsym(h, s->fallback);
    if (p == NULL) {
      snprintf(err, (size_t)errLen, "%s: symbol \"%s\" not found", name, s->name);
      return -1;
    }
    *(void**)((char*)table + s->offset) = p;
  }
  /* h stays open: the table's pointers must outlive every caller */
  return 0;
}
