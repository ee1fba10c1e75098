/*
 * calls.c: the driver calls behind the Go wrappers, each run with a given
 * context current and the calling thread's own context restored afterwards
 * (cgo runs these on the application's thread when called from an export).
 * Each returns the CUresult and, on failure, the name of the call in *call.
 */
#include "calls.h"

#include <string.h>

/* Makes ctx current, remembering the thread's context in *prev. */
static cuwResult push(const cuwApi* a, cuwContext ctx, cuwContext* prev, const char** call)
{
  cuwResult rc = a->ctxGetCurrent(prev);
  if (rc != CUW_SUCCESS) {
    *call = "cuCtxGetCurrent";
    return rc;
  }
  if (*prev != ctx && (rc = a->ctxSetCurrent(ctx)) != CUW_SUCCESS) *call = "cuCtxSetCurrent";
  return rc;
}

static void pop(const cuwApi* a, cuwContext ctx, cuwContext prev)
{
  if (prev != ctx) a->ctxSetCurrent(prev);
}

#define FAIL_IF(expr, name)  \
  do {                       \
    rc = (expr);             \
    if (rc != CUW_SUCCESS) { \
      *call = name;          \
      goto out;              \
    }                        \
  } while (0)

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

int cuwSetCurrent(const cuwApi* a, cuwContext ctx)
{
  return a->ctxSetCurrent(ctx);
}

int cuwMemAlloc(const cuwApi* a, cuwContext ctx, size_t size, cuwDevicePtr* out, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->memAlloc(out, size), "cuMemAlloc");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwMemFree(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->memFree(p), "cuMemFree");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwMemset(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, unsigned char v, size_t n, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->memsetD8(p, v, n), "cuMemsetD8");
  /* memsets of device memory may return early: finish it before any stream uses it */
  FAIL_IF(a->streamSynchronize(NULL), "cuStreamSynchronize");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwHostAlloc(const cuwApi* a, cuwContext ctx, size_t size, void** out, cuwDevicePtr* dev, const char** call)
{
  cuwContext prev;
  *out = NULL;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->memHostAlloc(out, size, CUW_MEMHOSTALLOC_PORTABLE | CUW_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc");
  rc = a->memHostGetDevicePointer(dev, *out, 0);
  if (rc != CUW_SUCCESS) {
    *call = "cuMemHostGetDevicePointer";
    a->memFreeHost(*out);
    *out = NULL;
  }
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwHostFree(const cuwApi* a, cuwContext ctx, void* p, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->memFreeHost(p), "cuMemFreeHost");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwIpcHandleOf(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, cuwIpcMemHandle* h, cuwDevicePtr* base,
                   size_t* size, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->memGetAddressRange(base, size, p), "cuMemGetAddressRange");
  FAIL_IF(a->ipcGetMemHandle(h, *base), "cuIpcGetMemHandle");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwIpcOpen(const cuwApi* a, cuwContext ctx, const cuwIpcMemHandle* h, cuwDevicePtr* base, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->ipcOpenMemHandle(base, *h, CUW_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwIpcClose(const cuwApi* a, cuwContext ctx, cuwDevicePtr base, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->ipcCloseMemHandle(base), "cuIpcCloseMemHandle");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwCopyAsync(const cuwApi* a, cuwContext ctx, cuwDevicePtr dst, cuwDevicePtr src, size_t n, uintptr_t stream,
                 const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->memcpyAsync(dst, src, n, (cuwStream)stream), "cuMemcpyAsync");
out:
  pop(a, ctx, prev);
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
