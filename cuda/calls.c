/*
 * calls.c: the driver calls behind the Go wrappers (calls.h) that concern
 * contexts and devices: probing a context or a pointer's device, making a
 * context current, device attributes, the primary context's reference, the
 * driver's error texts and NVML's CPU affinity; and cuwPush/cuwPop, which run
 * every wrapper with a given context current and restore the calling
 * thread's own afterwards (cgo runs these on the application's thread when
 * called from an export). Each returns the CUresult and, on failure, the
 * name of the call in *call. Memory is mem.c (NUMA placement numa.c),
 * sharing memory beyond its context ipc.c.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <string.h>

/* Makes ctx current, remembering the thread's context in *prev. */
int cuwPush(const cuwApi* a, cuwContext ctx, cuwContext* prev, const char** call)
{
  cuwResult rc = a->ctxGetCurrent(prev);
  if (rc != CUW_SUCCESS) {
    *call = "cuCtxGetCurrent";
    return rc;
  }
  if (*prev != ctx && (rc = a->ctxSetCurrent(ctx)) != CUW_SUCCESS) *call = "cuCtxSetCurrent";
  return rc;
}

void cuwPop(const cuwApi* a, cuwContext ctx, cuwContext prev)
{
  if (prev != ctx) a->ctxSetCurrent(prev);
}

int cuwProbe(const cuwApi* a, int* ordinal, cuwContext* ctx, char* busId, int len, const char** call)
{
  cuwResult rc;
  *ctx = NULL;
  if ((rc = a->init(0)) != CUW_SUCCESS) {
    *call = "cuInit";
    return rc;
  }
  if ((rc = a->ctxGetCurrent(ctx)) != CUW_SUCCESS) {
    *call = "cuCtxGetCurrent";
    return rc;
  }
  if (*ctx == NULL) return CUW_SUCCESS; /* the caller reports it */
  cuwDevice dev = 0;
  if ((rc = a->ctxGetDevice(&dev)) != CUW_SUCCESS) {
    *call = "cuCtxGetDevice";
    return rc;
  }
  *ordinal = dev;
  memset(busId, 0, (size_t)len);
  if ((rc = a->deviceGetPCIBusId(busId, len - 1, dev)) != CUW_SUCCESS) *call = "cuDeviceGetPCIBusId";
  return rc;
}

int cuwProbePointer(const cuwApi* a, cuwDevicePtr p, int* ordinal, cuwContext* ctx, char* busId, int len,
                    int* memType, const char** call)
{
  cuwResult rc;
  *ctx = NULL;
  *memType = 0;
  if ((rc = a->init(0)) != CUW_SUCCESS) {
    *call = "cuInit";
    return rc;
  }
  cuwContext c = NULL;
  if ((rc = a->pointerGetAttribute(&c, CUW_POINTER_ATTRIBUTE_CONTEXT, p)) != CUW_SUCCESS) {
    *call = "cuPointerGetAttribute";
    return rc;
  }
  if (c == NULL) return CUW_SUCCESS; /* the caller reports it */
  /* pinned host memory has a context too: only the memory type tells it from device memory */
  unsigned int type = 0;
  if ((rc = a->pointerGetAttribute(&type, CUW_POINTER_ATTRIBUTE_MEMORY_TYPE, p)) != CUW_SUCCESS) {
    *call = "cuPointerGetAttribute";
    return rc;
  }
  *memType = (int)type;
  if (type != CUW_MEMORYTYPE_DEVICE) return CUW_SUCCESS; /* the caller reports it */
  cuwContext prev;
  if ((rc = cuwPush(a, c, &prev, call)) != CUW_SUCCESS) return rc;
  cuwDevice dev = 0;
  CUW_FAIL_IF(a->ctxGetDevice(&dev), "cuCtxGetDevice");
  *ordinal = dev;
  memset(busId, 0, (size_t)len);
  CUW_FAIL_IF(a->deviceGetPCIBusId(busId, len - 1, dev), "cuDeviceGetPCIBusId");
  *ctx = c;
out:
  cuwPop(a, c, prev);
  return rc;
}

int cuwInit(const cuwApi* a) { return a->init(0); }

int cuwSetCurrent(const cuwApi* a, cuwContext ctx)
{
  return a->ctxSetCurrent(ctx);
}

int cuwDeviceAttr(const cuwApi* a, cuwDevice dev, int attr, int* v, const char** call)
{
  *v = 0;
  cuwResult rc = a->deviceGetAttribute(v, attr, dev);
  if (rc != CUW_SUCCESS) *call = "cuDeviceGetAttribute";
  return rc;
}

int cuwPrimaryRetain(const cuwApi* a, cuwDevice dev, cuwContext ctx, int* retained, const char** call)
{
  unsigned int flags = 0;
  int active = 0;
  cuwContext pctx = NULL;
  *retained = 0;
  cuwResult rc = a->primaryCtxGetState(dev, &flags, &active);
  if (rc != CUW_SUCCESS) {
    *call = "cuDevicePrimaryCtxGetState";
    return rc;
  }
  if (!active) return CUW_SUCCESS; /* ctx is not the primary context: never create that one */
  rc = a->primaryCtxRetain(&pctx, dev);
  if (rc != CUW_SUCCESS) {
    *call = "cuDevicePrimaryCtxRetain";
    return rc;
  }
  if (pctx == ctx) {
    *retained = 1;
    return CUW_SUCCESS;
  }
  rc = a->primaryCtxRelease(dev);
  if (rc != CUW_SUCCESS) *call = "cuDevicePrimaryCtxRelease";
  return rc;
}

int cuwPrimaryRelease(const cuwApi* a, cuwDevice dev, const char** call)
{
  cuwResult rc = a->primaryCtxRelease(dev);
  if (rc != CUW_SUCCESS) *call = "cuDevicePrimaryCtxRelease";
  return rc;
}

const char* cuwErrorName(const cuwApi* a, int code)
{
  const char* s = NULL;
  if (a == NULL || a->getErrorName((cuwResult)code, &s) != CUW_SUCCESS) return NULL;
  return s;
}

const char* cuwErrorString(const cuwApi* a, int code)
{
  const char* s = NULL;
  if (a == NULL || a->getErrorString((cuwResult)code, &s) != CUW_SUCCESS) return NULL;
  return s;
}

int cuwNvmlCpuAffinity(const cuwNvml* n, const char* busId, unsigned long* set, unsigned int words,
                       const char** call, const char** msg)
{
  cuwNvmlReturn rc = n->init();
  if (rc != 0) {
    *call = "nvmlInit_v2";
    *msg = n->errorString(rc);
    return rc;
  }
  cuwNvmlDevice dev = NULL;
  rc = n->deviceGetHandleByPciBusId(busId, &dev);
  if (rc != 0) {
    *call = "nvmlDeviceGetHandleByPciBusId_v2";
  } else if ((rc = n->deviceGetCpuAffinity(dev, words, set)) != 0) {
    *call = "nvmlDeviceGetCpuAffinity";
  }
  if (rc != 0) *msg = n->errorString(rc);
  n->shutdown();
  return rc;
}
