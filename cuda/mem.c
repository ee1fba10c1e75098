/*
 * mem.c: the driver calls behind the Go wrappers (calls.h) that allocate,
 * free, fill, look up and copy memory, and wait for a stream: device memory,
 * pinned mapped host memory (its pages placed by numa.c), an allocation's
 * range and buffer id, an asynchronous copy and a stream's synchronize. Each
 * runs with the given context current (cuwPush/cuwPop, calls.c) and returns
 * the CUresult, naming the failing call in *call. A file of its own: the
 * memory the Go side's allocators and caches manage, apart from context
 * set-up (calls.c) and sharing (ipc.c).
 */
#define _GNU_SOURCE
#include "calls.h"

int cuwMemAlloc(const cuwApi* a, cuwContext ctx, size_t size, cuwDevicePtr* out, const char** call)
{
  CUW_ONE_CALL(a, ctx, call, a->memAlloc(out, size), "cuMemAlloc");
}

int cuwMemFree(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, const char** call)
{
  CUW_ONE_CALL(a, ctx, call, a->memFree(p), "cuMemFree");
}

int cuwMemset(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, unsigned char v, size_t n, const char** call)
{
  cuwContext prev;
  cuwResult rc = cuwPush(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  CUW_FAIL_IF(a->memsetD8(p, v, n), "cuMemsetD8");
  /* memsets of device memory may return early: finish it before any stream uses it */
  CUW_FAIL_IF(a->streamSynchronize(NULL), "cuStreamSynchronize");
out:
  cuwPop(a, ctx, prev);
  return rc;
}

int cuwHostAlloc(const cuwApi* a, cuwContext ctx, size_t size, int numaNode, void** out, cuwDevicePtr* dev,
                 int* placed, const char** call)
{
  cuwContext prev;
  *out = NULL;
  *placed = 0;
  cuwResult rc = cuwPush(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  rc = cuwPinnedOnNode(a, out, size, CUW_MEMHOSTALLOC_PORTABLE | CUW_MEMHOSTALLOC_DEVICEMAP, numaNode, placed);
  if (rc != CUW_SUCCESS) {
    *call = "cuMemHostAlloc";
    *placed = 0;
    goto out;
  }
  rc = a->memHostGetDevicePointer(dev, *out, 0);
  if (rc != CUW_SUCCESS) {
    *call = "cuMemHostGetDevicePointer";
    a->memFreeHost(*out);
    *out = NULL;
  }
out:
  cuwPop(a, ctx, prev);
  return rc;
}

int cuwHostFree(const cuwApi* a, cuwContext ctx, void* p, const char** call)
{
  CUW_ONE_CALL(a, ctx, call, a->memFreeHost(p), "cuMemFreeHost");
}

int cuwAddressRange(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, cuwDevicePtr* base, size_t* size, const char** call)
{
  CUW_ONE_CALL(a, ctx, call, a->memGetAddressRange(base, size, p), "cuMemGetAddressRange");
}

int cuwBufferId(const cuwApi* a, cuwDevicePtr p, unsigned long long* id, const char** call)
{
  *id = 0;
  cuwResult rc = a->pointerGetAttribute(id, CUW_POINTER_ATTRIBUTE_BUFFER_ID, p);
  if (rc != CUW_SUCCESS) *call = "cuPointerGetAttribute";
  return rc;
}

int cuwCopyAsync(const cuwApi* a, cuwContext ctx, cuwDevicePtr dst, cuwDevicePtr src, size_t n, uintptr_t stream,
                 const char** call)
{
  CUW_ONE_CALL(a, ctx, call, a->memcpyAsync(dst, src, n, (cuwStream)stream), "cuMemcpyAsync");
}

int cuwStreamSync(const cuwApi* a, cuwContext ctx, uintptr_t stream, const char** call)
{
  CUW_ONE_CALL(a, ctx, call, a->streamSynchronize((cuwStream)stream), "cuStreamSynchronize");
}
