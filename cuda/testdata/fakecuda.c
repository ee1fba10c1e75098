/*
 * fakecuda.c: a stand-in libcuda.so.1 for the package's tests on machines
 * without a GPU. "Device memory" is host memory, copies run at once, two
 * contexts exist (fakeCtx[0] is current on every thread until one sets
 * another), and fakeFail(name) makes the named entry point fail with
 * CUDA_ERROR_OUT_OF_MEMORY (2). Built by the tests with cc -shared.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct {
  char reserved[64];
} CUipcMemHandle;

static char fakeCtx[2];
static __thread void* cur = &fakeCtx[0];
static __thread int curSet = 0;
static char failing[64];
static int noCtx, noUva;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int syncs, streams, ipcOpen;

struct alloc {
  char* base;
  size_t size;
};
static struct alloc allocs[256];

static int fail(const char* name) { return failing[0] != 0 && strcmp(failing, name) == 0; }
#define FAILS(name) \
  if (fail(name)) return 2

/* ---- test controls (called by the tests through dlsym) ---- */
int fakeFail(const char* name)
{
  strncpy(failing, name ? name : "", sizeof(failing) - 1);
  return 0;
}
int fakeNoCtx(const char* on) { noCtx = on != NULL && on[0] == '1'; return 0; }
int fakeNoUva(const char* on) { noUva = on != NULL && on[0] == '1'; return 0; }
/* Which context is current on the calling thread: 0, 1, or -1 for none. */
int fakeCurrent(const char* unused)
{
  (void)unused;
  void* c = (!curSet && noCtx) ? NULL : cur;
  return c == &fakeCtx[0] ? 0 : c == &fakeCtx[1] ? 1 : -1;
}
/* Makes context i (0, 1; else none) current on the calling thread. */
int fakeSetCurrent(const char* i)
{
  cur = i[0] == '0' ? &fakeCtx[0] : i[0] == '1' ? &fakeCtx[1] : NULL;
  curSet = 1;
  return 0;
}
int fakeSyncs(const char* unused) { (void)unused; return syncs; }
int fakeStreams(const char* unused) { (void)unused; return streams; }
int fakeIpcOpen(const char* unused) { (void)unused; return ipcOpen; }
int fakeLiveAllocs(const char* unused)
{
  (void)unused;
  int n = 0;
  for (int i = 0; i < 256; i++) n += allocs[i].base != NULL;
  return n;
}

/* ---- the driver ---- */
CUresult cuInit(unsigned int flags) { (void)flags; FAILS("cuInit"); return 0; }

static const char* names[][2] = {
    {"CUDA_SUCCESS", "no error"},
    {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
};
/* Knows 0..2 and 201 (as "FAKE_INVALID_CONTEXT", to tell its names from the built-in table's). */
CUresult cuGetErrorName(CUresult e, const char** s)
{
  if (e == 201) { *s = "FAKE_INVALID_CONTEXT"; return 0; }
  if (e < 0 || e > 2) { *s = NULL; return 1; }
  *s = names[e][0];
  return 0;
}
CUresult cuGetErrorString(CUresult e, const char** s)
{
  if (e == 201) { *s = "fake: wrong context"; return 0; }
  if (e < 0 || e > 2) { *s = NULL; return 1; }
  *s = names[e][1];
  return 0;
}
CUresult cuCtxGetCurrent(void** c)
{
  FAILS("cuCtxGetCurrent");
  *c = (!curSet && noCtx) ? NULL : cur;
  return 0;
}
CUresult cuCtxSetCurrent(void* c)
{
  FAILS("cuCtxSetCurrent");
  cur = c;
  curSet = 1;
  return 0;
}
CUresult cuCtxGetDevice(int* d)
{
  FAILS("cuCtxGetDevice");
  if (cur == NULL) return 201;
  *d = cur == &fakeCtx[0] ? 0 : 1;
  return 0;
}
CUresult cuDeviceGetPCIBusId(char* s, int len, int dev)
{
  FAILS("cuDeviceGetPCIBusId");
  strncpy(s, dev == 0 ? "0000:3B:00.0" : "0000:86:00.0", (size_t)len);
  return 0;
}
static int needCtx(void) { return cur == NULL ? 201 : 0; }

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n)
{
  FAILS("cuMemAlloc_v2");
  if (needCtx()) return 201;
  char* b = calloc(1, n ? n : 1);
  pthread_mutex_lock(&mu);
  for (int i = 0; i < 256; i++)
    if (allocs[i].base == NULL) {
      allocs[i].base = b;
      allocs[i].size = n;
      break;
    }
  pthread_mutex_unlock(&mu);
  *p = (CUdeviceptr)(uintptr_t)b;
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p)
{
  FAILS("cuMemFree_v2");
  pthread_mutex_lock(&mu);
  int found = 0;
  for (int i = 0; i < 256; i++)
    if (allocs[i].base == (char*)(uintptr_t)p) {
      allocs[i].base = NULL;
      found = 1;
    }
  pthread_mutex_unlock(&mu);
  if (!found) return 1;
  free((void*)(uintptr_t)p);
  return 0;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n)
{
  FAILS("cuMemsetD8_v2");
  memset((void*)(uintptr_t)p, v, n);
  return 0;
}
CUresult cuMemHostAlloc(void** p, size_t n, unsigned int flags)
{
  (void)flags;
  FAILS("cuMemHostAlloc");
  *p = calloc(1, n ? n : 1);
  return 0;
}
CUresult cuMemFreeHost(void* p)
{
  FAILS("cuMemFreeHost");
  free(p);
  return 0;
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned int flags)
{
  (void)flags;
  FAILS("cuMemHostGetDevicePointer_v2");
  *d = (CUdeviceptr)(uintptr_t)p + (noUva ? 4096 : 0);
  return 0;
}
CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p)
{
  FAILS("cuMemGetAddressRange_v2");
  CUresult rc = 1;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < 256; i++) {
    char* b = allocs[i].base;
    if (b != NULL && (char*)(uintptr_t)p >= b && (char*)(uintptr_t)p < b + allocs[i].size) {
      *base = (CUdeviceptr)(uintptr_t)b;
      *size = allocs[i].size;
      rc = 0;
    }
  }
  pthread_mutex_unlock(&mu);
  return rc;
}
CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p)
{
  FAILS("cuIpcGetMemHandle");
  memset(h, 0, sizeof(*h));
  memcpy(h->reserved, "FAKEIPC", 7);
  memcpy(h->reserved + 8, &p, sizeof(p));
  return 0;
}
#ifdef FAKE_OLD_IPC
CUresult cuIpcOpenMemHandle(
#else
CUresult cuIpcOpenMemHandle_v2(
#endif
CUdeviceptr* p, CUipcMemHandle h, unsigned int flags)
{
  FAILS("cuIpcOpenMemHandle_v2");
  if (memcmp(h.reserved, "FAKEIPC", 7) != 0 || flags != 1) return 1;
  memcpy(p, h.reserved + 8, sizeof(*p));
  __atomic_fetch_add(&ipcOpen, 1, __ATOMIC_RELAXED);
  return 0;
}
CUresult cuIpcCloseMemHandle(CUdeviceptr p)
{
  (void)p;
  FAILS("cuIpcCloseMemHandle");
  __atomic_fetch_sub(&ipcOpen, 1, __ATOMIC_RELAXED);
  return 0;
}
/* A stream remembers its context: copies on it need that context current. */
CUresult cuStreamCreate(void** s, unsigned int flags)
{
  FAILS("cuStreamCreate");
  if (flags != 1 || needCtx()) return 1;
  void** st = malloc(sizeof(void*));
  *st = cur;
  *s = st;
  __atomic_fetch_add(&streams, 1, __ATOMIC_RELAXED);
  return 0;
}
CUresult cuStreamDestroy_v2(void* s)
{
  FAILS("cuStreamDestroy_v2");
  free(s);
  __atomic_fetch_sub(&streams, 1, __ATOMIC_RELAXED);
  return 0;
}
CUresult cuStreamSynchronize(void* s)
{
  (void)s;
  FAILS("cuStreamSynchronize");
  __atomic_fetch_add(&syncs, 1, __ATOMIC_RELAXED);
  return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void* st)
{
  FAILS("cuMemcpyDtoDAsync_v2");
  if (st == NULL) return 1;
  if (*(void**)st != cur) return 201;
  memcpy((void*)(uintptr_t)d, (const void*)(uintptr_t)s, n);
  return 0;
}
/* Any stream, the default one (NULL) too; no context check. */
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, void* st)
{
  (void)st;
  FAILS("cuMemcpyAsync");
  memmove((void*)(uintptr_t)d, (const void*)(uintptr_t)s, n);
  return 0;
}

#ifndef FAKE_NO_HTOD
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void* st)
{
  FAILS("cuMemcpyHtoDAsync_v2");
  if (st == NULL) return 1;
  if (*(void**)st != cur) return 201;
  memcpy((void*)(uintptr_t)d, s, n);
  return 0;
}
#endif
