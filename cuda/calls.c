/*
 * calls.c: the driver calls behind the Go wrappers, each run with a given
 * context current and the calling thread's own context restored afterwards
 * (cgo runs these on the application's thread when called from an export).
 * Each returns the CUresult and, on failure, the name of the call in *call.
 * In C because the memory-policy calls around a pinned allocation must run on
 * the very thread that allocates, with nothing of Go's scheduling between.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Memory policy (linux/mempolicy.h; numaif.h is not always installed). */
#define CUW_MPOL_DEFAULT 0
#define CUW_MPOL_PREFERRED 1
#define CUW_MPOL_F_NODE 1
#define CUW_MPOL_F_ADDR 2
#define CUW_MAX_NODES 1024

typedef struct cuwPolicy {
  int saved; /* 1: the thread's policy was saved and must be restored */
  int mode;
  unsigned long mask[CUW_MAX_NODES / (8 * sizeof(unsigned long))];
} cuwPolicy;

/* Makes the calling thread prefer node for new pages, saving its policy in *p; 1 when the
 * kernel took it. Fails silently (no NUMA support, seccomp, an unknown node): 0. */
static int preferNode(int node, cuwPolicy* p)
{
  p->saved = 0;
#if defined(SYS_get_mempolicy) && defined(SYS_set_mempolicy)
  if (node < 0 || node >= CUW_MAX_NODES - 1) return 0;
  memset(p->mask, 0, sizeof(p->mask));
  if (syscall(SYS_get_mempolicy, &p->mode, p->mask, (unsigned long)CUW_MAX_NODES, NULL, 0UL) != 0) return 0;
  p->saved = 1;
  unsigned long want[CUW_MAX_NODES / (8 * sizeof(unsigned long))] = {0};
  want[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
  if (syscall(SYS_set_mempolicy, CUW_MPOL_PREFERRED, want, (unsigned long)CUW_MAX_NODES) != 0) {
    p->saved = 0;
    return 0;
  }
  return 1;
#else
  (void)node;
  return 0;
#endif
}

static void restorePolicy(const cuwPolicy* p)
{
#if defined(SYS_set_mempolicy)
  if (!p->saved) return;
  if ((p->mode & 0xffff) == CUW_MPOL_DEFAULT)
    syscall(SYS_set_mempolicy, p->mode, NULL, 0UL);
  else
    syscall(SYS_set_mempolicy, p->mode, p->mask, (unsigned long)CUW_MAX_NODES);
#else
  (void)p;
#endif
}

int cuwPinnedOnNode(const cuwApi* a, void** out, size_t size, unsigned int flags, int numaNode, int* placed)
{
  /* the driver maps and pins the pages on this thread: they follow its policy */
  cuwPolicy pol;
  *placed = preferNode(numaNode, &pol);
  cuwResult rc = a->memHostAlloc(out, size, flags);
  restorePolicy(&pol);
  if (rc != CUW_SUCCESS) *placed = 0;
  return rc;
}

int cuwPageNode(const void* p)
{
#if defined(SYS_get_mempolicy)
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, NULL, 0UL, p, (unsigned long)(CUW_MPOL_F_NODE | CUW_MPOL_F_ADDR)) != 0)
    return -1;
  return node;
#else
  (void)p;
  return -1;
#endif
}

int cuwPolicyMode(void)
{
#if defined(SYS_get_mempolicy)
  int mode = -1;
  unsigned long mask[CUW_MAX_NODES / (8 * sizeof(unsigned long))];
  if (syscall(SYS_get_mempolicy, &mode, mask, (unsigned long)CUW_MAX_NODES, NULL, 0UL) != 0) return -1;
  return mode;
#else
  return -1;
#endif
}

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

int cuwProbePointer(const cuwApi* a, cuwDevicePtr p, int* ordinal, cuwContext* ctx, char* busId, int len,
                    const char** call)
{
  cuwResult rc;
  *ctx = NULL;
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
  cuwContext prev;
  if ((rc = push(a, c, &prev, call)) != CUW_SUCCESS) return rc;
  cuwDevice dev = 0;
  FAIL_IF(a->ctxGetDevice(&dev), "cuCtxGetDevice");
  *ordinal = dev;
  memset(busId, 0, (size_t)len);
  FAIL_IF(a->deviceGetPCIBusId(busId, len - 1, dev), "cuDeviceGetPCIBusId");
  *ctx = c;
out:
  pop(a, c, prev);
  return rc;
}

int cuwInit(const cuwApi* a) { return a->init(0); }

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

int cuwHostAlloc(const cuwApi* a, cuwContext ctx, size_t size, int numaNode, void** out, cuwDevicePtr* dev,
                 int* placed, const char** call)
{
  cuwContext prev;
  *out = NULL;
  *placed = 0;
  cuwResult rc = push(a, ctx, &prev, call);
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

int cuwAddressRange(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, cuwDevicePtr* base, size_t* size, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->memGetAddressRange(base, size, p), "cuMemGetAddressRange");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwDmabufFd(const cuwDmabufApi* b, const cuwApi* a, cuwContext ctx, cuwDevicePtr p, size_t n, int* fd,
                const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(b->getHandleForAddressRange(fd, p, n, CUW_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
          "cuMemGetHandleForAddressRange");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwEnablePeer(const cuwApi* a, cuwContext ctx, cuwContext peer, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  rc = a->ctxEnablePeerAccess(peer, 0);
  if (rc == CUW_ERROR_PEER_ACCESS_ALREADY_ENABLED) rc = CUW_SUCCESS; /* another communicator did */
  if (rc != CUW_SUCCESS) *call = "cuCtxEnablePeerAccess";
  pop(a, ctx, prev);
  return rc;
}

int cuwBufferId(const cuwApi* a, cuwDevicePtr p, unsigned long long* id, const char** call)
{
  *id = 0;
  cuwResult rc = a->pointerGetAttribute(id, CUW_POINTER_ATTRIBUTE_BUFFER_ID, p);
  if (rc != CUW_SUCCESS) *call = "cuPointerGetAttribute";
  return rc;
}

int cuwStreamSync(const cuwApi* a, cuwContext ctx, uintptr_t stream, const char** call)
{
  cuwContext prev;
  cuwResult rc = push(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  FAIL_IF(a->streamSynchronize((cuwStream)stream), "cuStreamSynchronize");
out:
  pop(a, ctx, prev);
  return rc;
}

int cuwDeviceAttr(const cuwApi* a, cuwDevice dev, int attr, int* v, const char** call)
{
  *v = 0;
  cuwResult rc = a->deviceGetAttribute(v, attr, dev);
  if (rc != CUW_SUCCESS) *call = "cuDeviceGetAttribute";
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
