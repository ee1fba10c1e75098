/*
 * fakecuda.c: a stand-in libcuda.so.1 for the tests on machines without a
 * GPU. Built by the tests with cc -shared.
 *
 * It is strict where a real GPU would be, so that the tests catch what only a
 * GPU would show:
 *   - "Device memory" is not host-addressable: cuMemAlloc returns the address
 *     of a PROT_NONE reservation, so a host dereference faults, while the data
 *     lives in a hidden shadow buffer the fake's copies use. Tests read and
 *     write it with fakeRead / fakeWrite (as cuMemcpyDtoH would).
 *   - Like the real driver, cuMemAlloc carves requests under 2 MiB (that fit
 *     one) out of 2 MiB chunks at 256-byte alignment; a chunk's first piece
 *     sits 512 bytes in, so no such allocation is page-aligned.
 *     cuMemGetAddressRange reports the piece. Larger requests get a mapping
 *     of their own (whole 2 MiB chunks) on a 2 MiB boundary.
 *   - cuMemAllocAsync (cudaMallocAsync) allocates from the device's memory
 *     pool (a mapping of its own per allocation, here): as for the real
 *     driver, cuPointerGetAttribute says CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
 *     (non-NULL) and CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE 0, and
 *     cuIpcGetMemHandle refuses it (CUDA_ERROR_INVALID_VALUE).
 *   - The VMM API, as far as an application maps memory with it
 *     (cuMemAddressReserve, cuMemCreate, cuMemMap of a whole handle at offset
 *     0): the mapping is device memory that is not legacy-IPC capable, with no
 *     memory pool, and cuIpcGetMemHandle refuses it too.
 *   - Streams are queues: an operation runs at once unless its stream is
 *     stalled (fakeStall) or has work queued; cuStreamSynchronize (or
 *     releasing the stall) runs the queue in order. A copy reads its source
 *     when it runs, as a DMA engine does.
 *   - Two contexts exist (fakeCtx[0] is current on every thread until one sets
 *     another); fakeFail(name) makes the named entry point fail with
 *     CUDA_ERROR_OUT_OF_MEMORY (2).
 *   - Every call that matters for ordering is written, one line each, to the
 *     log file named by FAKECUDA_LOG (or fakeLogTo), e.g. "cuStreamSynchronize
 *     stream=2" or "cuIpcCloseMemHandle".
 *   - It knows what a kernel may touch: fakeKernelView(p, n) is where a GPU
 *     thread would find p..p+n (the shadow of device memory, pinned host
 *     memory itself), or 0 where a kernel could not reach it (pageable host
 *     memory, a freed allocation). tests/devthreads runs the header's device
 *     methods on CPU threads through it.
 *   - cuMemGetHandleForAddressRange exports device memory as a "dma-buf": a memfd named
 *     "fakecuda-dmabuf:<start address>", from which the libibverbs double
 *     (tests/ib/double) learns the range and reaches its bytes through
 *     fakeKernelView. As the real driver, it exports whole host pages of memory
 *     it mapped: the range may run past the allocation into the rest of its
 *     2 MiB chunk, and is refused (CUDA_ERROR_INVALID_VALUE) where its start or
 *     length is not page-aligned or it leaves the chunk (into memory the driver
 *     did not map, or another mapping, or one imported through IPC);
 *     cuDeviceGetAttribute answers CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED.
 *     fakeFail("cuMemGetHandleForAddressRange") is a driver without the entry
 *     point working, fakeNoDmabuf("1") a device that says it has no dma-buf
 *     (the export then fails with CUDA_ERROR_NOT_SUPPORTED).
 *   - CUDA IPC works between processes of one host: the shadow of each
 *     allocation is a shared mapping of a memfd, and a handle names the
 *     owner's pid and fd, so cuIpcOpenMemHandle in another process maps the
 *     same bytes (through /proc/<pid>/fd) behind a reservation of its own.
 *     As the real driver, it refuses a handle the calling process exported
 *     (CUDA_ERROR_INVALID_CONTEXT, "invalid device context"); fakeIpcForeign("1")
 *     makes it map such a handle as another process would (for tests of the
 *     IPC path that run in one process).
 *   - cuCtxEnablePeerAccess between the two contexts (devices 0 and 1), with the
 *     real driver's results (already enabled: CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
 *     the current context itself: CUDA_ERROR_INVALID_CONTEXT); logged, and
 *     fakePeerAccess("01") reads whether context 0 may access context 1's memory.
 *   - cuPointerGetAttribute answers for pinned host memory (cuMemHostAlloc) as for device
 *     memory, as the real driver does: its context (CU_POINTER_ATTRIBUTE_CONTEXT) and a
 *     buffer id; only CU_POINTER_ATTRIBUTE_MEMORY_TYPE tells them apart.
 *   - Primary contexts are reference counted (cuDevicePrimaryCtxRetain /
 *     Release); fakePrimaryRefs reads the count.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct {
  char reserved[64];
} CUipcMemHandle;

static char fakeCtx[2];
static __thread void* cur = &fakeCtx[0];
static __thread int curSet = 0;
static char failing[64];
static int noCtx, noUva, noDmabuf, ipcForeign;
static int rdmaOrdering = 100; /* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING: OWNER, as sm_80+ */
static int peerOn[2][2]; /* peerOn[a][b]: context a may access context b's memory */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* allocations, streams, log */
static int syncs, streams, ipcOpen, primaryRefs[2];

#define MAX_ALLOCS 1024
/* A mapping allocations live in: a PROT_NONE reservation (the device addresses) and the shadow
 * bytes behind it, a shared mapping of a memfd (so that another process can open it: IPC). */
struct chunk {
  char* dev;
  char* shadow;
  size_t len;
  int fd;
  size_t used; /* small chunks: bytes handed out so far (bump allocation, never reused) */
  int live;    /* allocations still in it */
  int small;   /* 1: sub-allocated by cuMemAlloc */
  void* ctx;
  int imported; /* 1: another process's, mapped by cuIpcOpenMemHandle */
};
static struct chunk chunks[MAX_ALLOCS];

struct alloc {
  char* dev;    /* the device address */
  char* shadow; /* where the bytes live */
  size_t size;
  void* ctx;   /* the context it was allocated in */
  int chunk;   /* the mapping it lives in */
  size_t off;  /* its offset there */
  int ipc;     /* 1: another process's allocation, mapped by cuIpcOpenMemHandle */
  int pool;    /* 1: from the device's memory pool (cuMemAllocAsync); 2: mapped by cuMemMap (VMM) */
  unsigned long long id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID: never reused in the process */
};
static struct alloc allocs[MAX_ALLOCS];
static unsigned long long nextBufferId;

#define FAKE_CHUNK (2u << 20)
#define FAKE_CHUNK_START 512

struct hostAlloc {
  char* p;
  size_t len;
  void* ctx;             /* the context current when it was allocated */
  unsigned long long id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
};
static struct hostAlloc hostAllocs[MAX_ALLOCS];

static FILE* logf_;

static int fail(const char* name) { return failing[0] != 0 && strcmp(failing, name) == 0; }
#define FAILS(name) \
  if (fail(name)) return 2

static void logLine(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void logLine(const char* fmt, ...)
{
  if (logf_ == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(logf_, fmt, ap);
  va_end(ap);
  fputc('\n', logf_);
  fflush(logf_);
}

__attribute__((constructor)) static void fakeInit(void)
{
  const char* p = getenv("FAKECUDA_LOG");
  if (p != NULL && p[0] != 0) logf_ = fopen(p, "ae");
}

/* The shadow bytes behind device address p (n bytes must fit), p itself when p is not device
 * memory (pinned or other host memory: unified addressing), or NULL when p..p+n straddles the
 * end of an allocation. Call with mu held. */
static char* translate(CUdeviceptr p, size_t n)
{
  char* a = (char*)(uintptr_t)p;
  for (int i = 0; i < MAX_ALLOCS; i++) {
    struct alloc* al = &allocs[i];
    if (al->dev != NULL && a >= al->dev && a < al->dev + (al->size ? al->size : 1)) {
      if (n > al->size || (size_t)(a - al->dev) > al->size - n) return NULL;
      return al->shadow + (a - al->dev);
    }
  }
  return a;
}

/* ---- streams ---- */
struct op {
  CUdeviceptr dst, src;
  size_t n;
};
typedef struct fakeStream {
  void* ctx; /* first: the context the stream belongs to */
  int id;
  int stalled;
  struct op* q;
  int nq, cap;
} fakeStream;
static int nextStreamId = 1;

static int runOp(const struct op* o)
{
  char* d = translate(o->dst, o->n);
  char* s = translate(o->src, o->n);
  if (d == NULL || s == NULL) return 1;
  memmove(d, s, o->n);
  return 0;
}

static void runQueue(fakeStream* s)
{
  for (int i = 0; i < s->nq; i++) runOp(&s->q[i]);
  s->nq = 0;
}

/* Runs o now when s is free, else queues it. Call with mu held. */
static CUresult enqueue(fakeStream* s, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  struct op o = {dst, src, n};
  if (translate(dst, n) == NULL || translate(src, n) == NULL) return 1;
  if (!s->stalled && s->nq == 0) return (CUresult)runOp(&o);
  if (s->nq == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 16;
    s->q = realloc(s->q, (size_t)s->cap * sizeof(*s->q));
  }
  s->q[s->nq++] = o;
  return 0;
}

#define MAX_STREAMS 64
static fakeStream* liveStreams[MAX_STREAMS];

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
int fakeNoDmabuf(const char* on) { noDmabuf = on != NULL && on[0] == '1'; return 0; }
/* The value of CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING ("0": none, as before sm_80). */
int fakeRdmaOrdering(const char* v) { rdmaOrdering = atoi(v); return 0; }
int fakeIpcForeign(const char* on) { ipcForeign = on != NULL && on[0] == '1'; return 0; }
/* Whether context a may access context b's memory ("ab", e.g. "01"). */
int fakePeerAccess(const char* ab) { return peerOn[ab[0] == '1'][ab[1] == '1']; }
int fakeSyncs(const char* unused) { (void)unused; return syncs; }
int fakeStreams(const char* unused) { (void)unused; return streams; }
int fakeIpcOpen(const char* unused) { (void)unused; return ipcOpen; }
int fakeLiveAllocs(const char* unused)
{
  (void)unused;
  int n = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++) n += allocs[i].dev != NULL;
  pthread_mutex_unlock(&mu);
  return n;
}
/* The id of stream s (its address, as strtoull reads it), or -1. */
int fakeStreamId(const char* s)
{
  fakeStream* st = (fakeStream*)(uintptr_t)strtoull(s, NULL, 0);
  int id = -1;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_STREAMS; i++)
    if (liveStreams[i] == st && st != NULL) id = st->id;
  pthread_mutex_unlock(&mu);
  return id;
}
/* Stalls the stream whose address is s (as strtoull reads it), or every live stream for "all":
 * its operations wait in its queue until cuStreamSynchronize. "" releases every stall and runs
 * what waited. */
int fakeStall(const char* s)
{
  fakeStream* st = (fakeStream*)(uintptr_t)strtoull(s, NULL, 0);
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_STREAMS; i++) {
    fakeStream* x = liveStreams[i];
    if (x == NULL) continue;
    if (s[0] == 0) {
      x->stalled = 0;
      runQueue(x);
    } else if (x == st || strcmp(s, "all") == 0) {
      x->stalled = 1;
    }
  }
  pthread_mutex_unlock(&mu);
  return 0;
}
/* Operations waiting in stream queues. */
int fakeQueued(const char* unused)
{
  (void)unused;
  int n = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_STREAMS; i++)
    if (liveStreams[i] != NULL) n += liveStreams[i]->nq;
  pthread_mutex_unlock(&mu);
  return n;
}
/* Starts (path) or stops ("") the call log. */
int fakeLogTo(const char* path)
{
  pthread_mutex_lock(&mu);
  if (logf_ != NULL) fclose(logf_);
  logf_ = (path != NULL && path[0] != 0) ? fopen(path, "ae") : NULL;
  pthread_mutex_unlock(&mu);
  return logf_ == NULL && path != NULL && path[0] != 0 ? -1 : 0;
}
/* Copies n bytes at device (or host) address p to out, as cuMemcpyDtoH would; -1 when p is not
 * inside one allocation. */
int fakeRead(CUdeviceptr p, void* out, size_t n)
{
  pthread_mutex_lock(&mu);
  char* s = translate(p, n);
  if (s != NULL) memcpy(out, s, n);
  pthread_mutex_unlock(&mu);
  return s == NULL ? -1 : 0;
}
/* Copies n bytes from in to device (or host) address p. */
int fakeWrite(CUdeviceptr p, const void* in, size_t n)
{
  pthread_mutex_lock(&mu);
  char* d = translate(p, n);
  if (d != NULL) memcpy(d, in, n);
  pthread_mutex_unlock(&mu);
  return d == NULL ? -1 : 0;
}
/* 1 when p lies in fake device memory (not host-addressable). */
int fakeIsDevice(CUdeviceptr p)
{
  pthread_mutex_lock(&mu);
  int dev = translate(p, 1) != (char*)(uintptr_t)p;
  pthread_mutex_unlock(&mu);
  return dev;
}

/* Where a kernel finds p..p+n: the shadow bytes of device memory, pinned host memory itself
 * (mapped for the device: unified addressing), else 0 (not reachable from a kernel). */
uint64_t fakeKernelView(uint64_t p, uint64_t n)
{
  char* a = (char*)(uintptr_t)p;
  uint64_t v = 0;
  if (a == NULL) return 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS && v == 0; i++) {
    struct alloc* al = &allocs[i];
    if (al->dev != NULL && a >= al->dev && a < al->dev + (al->size ? al->size : 1) && n <= al->size &&
        (size_t)(a - al->dev) <= al->size - n)
      v = (uint64_t)(uintptr_t)(al->shadow + (a - al->dev));
    struct hostAlloc* h = &hostAllocs[i];
    if (h->p != NULL && a >= h->p && a < h->p + h->len && n <= h->len && (size_t)(a - h->p) <= h->len - n) v = p;
  }
  pthread_mutex_unlock(&mu);
  return v;
}
/* The references held on device i's primary context ("0" or "1"). */
int fakePrimaryRefs(const char* i) { return __atomic_load_n(&primaryRefs[i[0] == '1'], __ATOMIC_ACQUIRE); }

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
  void* c = (!curSet && noCtx) ? NULL : cur;
  if (c == NULL) return 201;
  *d = c == &fakeCtx[0] ? 0 : 1;
  return 0;
}
/* Device d's primary context is fakeCtx[d]: retained and released with a count (and logged). */
CUresult cuDevicePrimaryCtxRetain(void** c, int d)
{
  FAILS("cuDevicePrimaryCtxRetain");
  if (d < 0 || d > 1) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *c = &fakeCtx[d];
  __atomic_fetch_add(&primaryRefs[d], 1, __ATOMIC_ACQ_REL);
  pthread_mutex_lock(&mu);
  logLine("cuDevicePrimaryCtxRetain dev=%d", d);
  pthread_mutex_unlock(&mu);
  return 0;
}
/* Every fake context is its device's primary context, always active. */
CUresult cuDevicePrimaryCtxGetState(int d, unsigned int* flags, int* active)
{
  FAILS("cuDevicePrimaryCtxGetState");
  if (d < 0 || d > 1) return 101;
  *flags = 0;
  *active = 1;
  return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int d)
{
  FAILS("cuDevicePrimaryCtxRelease_v2");
  if (d < 0 || d > 1 || __atomic_load_n(&primaryRefs[d], __ATOMIC_ACQUIRE) <= 0) return 201;
  __atomic_fetch_sub(&primaryRefs[d], 1, __ATOMIC_ACQ_REL);
  pthread_mutex_lock(&mu);
  logLine("cuDevicePrimaryCtxRelease dev=%d", d);
  pthread_mutex_unlock(&mu);
  return 0;
}
CUresult cuDeviceGetPCIBusId(char* s, int len, int dev)
{
  FAILS("cuDeviceGetPCIBusId");
  strncpy(s, dev == 0 ? "0000:3B:00.0" : "0000:86:00.0", (size_t)len);
  return 0;
}
static void* curCtx(void) { return (!curSet && noCtx) ? NULL : cur; }

/* A new mapping of len bytes (a multiple of 4096) whose reservation starts on an align boundary,
 * in a free slot of chunks[]; its index, or -1. Call without mu held. */
static int newChunk(size_t len, size_t align, int small)
{
  char* r = mmap(NULL, len + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return -1;
  char* dev = (char*)(((uintptr_t)r + align - 1) & ~(uintptr_t)(align - 1));
  if (dev > r) munmap(r, (size_t)(dev - r));
  if (r + len + align > dev + len) munmap(dev + len, (size_t)(r + len + align - (dev + len)));
  int fd = memfd_create("fakecuda-device", MFD_CLOEXEC);
  char* shadow = fd >= 0 && ftruncate(fd, (off_t)len) == 0
                     ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                     : MAP_FAILED;
  if (shadow == MAP_FAILED) {
    if (fd >= 0) close(fd);
    munmap(dev, len);
    return -1;
  }
  int idx = -1;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS && idx < 0; i++)
    if (chunks[i].dev == NULL) {
      chunks[i] = (struct chunk){dev, shadow, len, fd, small ? FAKE_CHUNK_START : len, 0, small, curCtx(), 0};
      idx = i;
    }
  pthread_mutex_unlock(&mu);
  if (idx < 0) {
    munmap(dev, len);
    munmap(shadow, len);
    close(fd);
  }
  return idx;
}

/* Drops one allocation's hold on chunk i, unmapping it with the last. Call with mu held. */
static void chunkPut(int i)
{
  struct chunk* c = &chunks[i];
  if (--c->live > 0) return;
  munmap(c->dev, c->len);
  munmap(c->shadow, c->len);
  close(c->fd);
  *c = (struct chunk){0};
}

/* Records an allocation of n bytes at offset off of chunk ci; 0, or 2 when the table is full.
 * Call with mu held. */
static CUresult addAlloc(int ci, size_t off, size_t n, int ipc, CUdeviceptr* p)
{
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (allocs[i].dev == NULL) {
      allocs[i] = (struct alloc){chunks[ci].dev + off, chunks[ci].shadow + off, n, curCtx(), ci, off, ipc, 0, ++nextBufferId};
      chunks[ci].live++;
      *p = (CUdeviceptr)(uintptr_t)allocs[i].dev;
      return 0;
    }
  return 2;
}

/* An allocation of n bytes in whole 2 MiB chunks of its own (pool: from the memory pool). */
static CUresult ownChunks(CUdeviceptr* p, size_t n, int pool)
{
  size_t len = n == 0 ? FAKE_CHUNK : (n + FAKE_CHUNK - 1) & ~(size_t)(FAKE_CHUNK - 1);
  int ci = newChunk(len, FAKE_CHUNK, 0);
  if (ci < 0) return 2;
  pthread_mutex_lock(&mu);
  CUresult rc = addAlloc(ci, 0, n, 0, p);
  if (rc != 0) {
    chunks[ci].live = 1;
    chunkPut(ci);
  }
  for (int i = 0; i < MAX_ALLOCS && rc == 0; i++)
    if (allocs[i].dev == (char*)(uintptr_t)*p) allocs[i].pool = pool;
  pthread_mutex_unlock(&mu);
  return rc;
}
/* The devices' default memory pools (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE of their allocations). */
static char fakePool[2];

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n)
{
  FAILS("cuMemAlloc_v2");
  if (curCtx() == NULL) return 201;
  size_t need = n == 0 ? 256 : (n + 255) & ~(size_t)255;
  if (need <= FAKE_CHUNK - FAKE_CHUNK_START) {
    /* sub-allocated from the context's current small chunk, or a new one */
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_ALLOCS; i++) {
      struct chunk* c = &chunks[i];
      if (c->dev != NULL && c->small && c->ctx == curCtx() && c->used + need <= c->len) {
        size_t off = c->used;
        CUresult rc = addAlloc(i, off, n, 0, p);
        if (rc == 0) c->used += need;
        pthread_mutex_unlock(&mu);
        return rc;
      }
    }
    pthread_mutex_unlock(&mu);
    int ci = newChunk(FAKE_CHUNK, FAKE_CHUNK, 1);
    if (ci < 0) return 2;
    pthread_mutex_lock(&mu);
    CUresult rc = addAlloc(ci, chunks[ci].used, n, 0, p);
    if (rc == 0) {
      chunks[ci].used += need;
    } else {
      chunks[ci].live = 1;
      chunkPut(ci);
    }
    pthread_mutex_unlock(&mu);
    return rc;
  }
  return ownChunks(p, n, 0);
}

/* cudaMallocAsync: n bytes of the current device's memory pool, in a mapping of their own
 * (stream order is not modelled: the memory is ready at once). */
CUresult cuMemAllocAsync(CUdeviceptr* p, size_t n, void* stream)
{
  (void)stream;
  FAILS("cuMemAllocAsync");
  if (curCtx() == NULL) return 201;
  return ownChunks(p, n, 1);
}
/* VMM: a reservation is address space only; a handle is physical memory of a size (a memfd),
 * mapped into a reservation by cuMemMap. */
CUresult cuMemAddressReserve(CUdeviceptr* p, size_t n, size_t align, CUdeviceptr addr, unsigned long long flags)
{
  FAILS("cuMemAddressReserve");
  if (n == 0 || (n & (FAKE_CHUNK - 1)) != 0 || addr != 0 || flags != 0 || (align != 0 && align != FAKE_CHUNK)) return 1;
  char* r = mmap(NULL, n + FAKE_CHUNK, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return 2;
  *p = ((CUdeviceptr)(uintptr_t)r + FAKE_CHUNK - 1) & ~(CUdeviceptr)(FAKE_CHUNK - 1);
  return 0;
}
CUresult cuMemCreate(unsigned long long* h, size_t n, const void* prop, unsigned long long flags)
{
  FAILS("cuMemCreate");
  if (n == 0 || (n & (FAKE_CHUNK - 1)) != 0 || prop == NULL || flags != 0) return 1;
  int fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)n) != 0) return 2;
  *h = ((unsigned long long)n << 20) | (unsigned long long)fd; /* size and memfd */
  return 0;
}
CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, unsigned long long h, unsigned long long flags)
{
  FAILS("cuMemMap");
  int fd = (int)(h & 0xfffff);
  if (off != 0 || flags != 0 || n != (size_t)(h >> 20) || (p & (FAKE_CHUNK - 1)) != 0) return 1;
  char* shadow = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (shadow == MAP_FAILED) return 2;
  CUresult rc = 2;
  CUdeviceptr at = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS && rc != 0; i++)
    if (chunks[i].dev == NULL) {
      chunks[i] = (struct chunk){(char*)(uintptr_t)p, shadow, n, dup(fd), n, 0, 0, curCtx(), 0};
      if ((rc = addAlloc(i, 0, n, 0, &at)) != 0) {
        close(chunks[i].fd);
        chunks[i] = (struct chunk){0};
        break;
      }
    }
  for (int i = 0; i < MAX_ALLOCS && rc == 0; i++)
    if (allocs[i].dev == (char*)(uintptr_t)p) allocs[i].pool = 2;
  pthread_mutex_unlock(&mu);
  if (rc != 0) munmap(shadow, n);
  return rc;
}
CUresult cuMemFreeAsync(CUdeviceptr p, void* stream);
CUresult cuMemFree_v2(CUdeviceptr p)
{
  FAILS("cuMemFree_v2");
  int found = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (allocs[i].dev != NULL && !allocs[i].ipc && allocs[i].dev == (char*)(uintptr_t)p) {
      int ci = allocs[i].chunk;
      allocs[i] = (struct alloc){0};
      chunkPut(ci);
      found = 1;
    }
  logLine("cuMemFree ptr=%#llx", (unsigned long long)p);
  pthread_mutex_unlock(&mu);
  return found ? 0 : 1;
}
CUresult cuMemFreeAsync(CUdeviceptr p, void* stream)
{
  (void)stream;
  FAILS("cuMemFreeAsync");
  return cuMemFree_v2(p);
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n)
{
  FAILS("cuMemsetD8_v2");
  pthread_mutex_lock(&mu);
  char* d = translate(p, n);
  if (d != NULL) memset(d, v, n);
  pthread_mutex_unlock(&mu);
  return d == NULL ? 1 : 0;
}
/* Pinned host memory: mapped and touched here (as pinning does), so the pages come from the
 * calling thread's memory policy. */
CUresult cuMemHostAlloc(void** p, size_t n, unsigned int flags)
{
  (void)flags;
  FAILS("cuMemHostAlloc");
  size_t len = (n + 4095) & ~(size_t)4095;
  if (len == 0) len = 4096;
  char* m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 2;
  memset(m, 0, len);
  CUresult rc = 2;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (hostAllocs[i].p == NULL) {
      hostAllocs[i] = (struct hostAlloc){m, len, curCtx(), ++nextBufferId};
      rc = 0;
      break;
    }
  pthread_mutex_unlock(&mu);
  if (rc != 0) {
    munmap(m, len);
    return rc;
  }
  *p = m;
  return 0;
}
CUresult cuMemFreeHost(void* p)
{
  FAILS("cuMemFreeHost");
  struct hostAlloc found = {0};
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (hostAllocs[i].p != NULL && hostAllocs[i].p == p) {
      found = hostAllocs[i];
      hostAllocs[i] = (struct hostAlloc){0};
    }
  logLine("cuMemFreeHost");
  pthread_mutex_unlock(&mu);
  if (found.p == NULL) return 1;
  munmap(found.p, found.len);
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
  for (int i = 0; i < MAX_ALLOCS; i++) {
    char* b = allocs[i].dev;
    if (b != NULL && (char*)(uintptr_t)p >= b && (char*)(uintptr_t)p < b + allocs[i].size) {
      *base = (CUdeviceptr)(uintptr_t)b;
      *size = allocs[i].size;
      rc = 0;
    }
  }
  pthread_mutex_unlock(&mu);
  return rc;
}
/* What the real driver answers, for device memory and for pinned host memory alike (it is
 * mapped into the context that allocated it): CU_POINTER_ATTRIBUTE_CONTEXT (1), the context it
 * was allocated in; CU_POINTER_ATTRIBUTE_MEMORY_TYPE (2), CU_MEMORYTYPE_DEVICE (2) or
 * CU_MEMORYTYPE_HOST (1); CU_POINTER_ATTRIBUTE_BUFFER_ID (7), its allocation's id, unique in the
 * process; CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE (10), 1 for cuMemAlloc memory only
 * (0 for pool and pinned host memory); CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE (17), the pool of a
 * cuMemAllocAsync allocation, else NULL. Pageable memory: CUDA_ERROR_INVALID_VALUE. */
CUresult cuPointerGetAttribute(void* data, int attr, CUdeviceptr p)
{
  FAILS("cuPointerGetAttribute");
  if (attr != 1 && attr != 2 && attr != 7 && attr != 10 && attr != 17) return 1;
  CUresult rc = 1; /* CUDA_ERROR_INVALID_VALUE: memory the driver does not know */
  void* ctx = NULL;
  void* pool = NULL;
  unsigned long long id = 0;
  unsigned int type = 0;
  int ipcCapable = 0;
  char* a = (char*)(uintptr_t)p;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS && rc != 0; i++) {
    char* b = allocs[i].dev;
    if (b != NULL && a >= b && a < b + allocs[i].size) {
      ctx = allocs[i].ctx, id = allocs[i].id, type = 2, rc = 0;
      ipcCapable = !allocs[i].pool;
      pool = allocs[i].pool == 1 ? &fakePool[ctx == &fakeCtx[1]] : NULL;
    } else if (hostAllocs[i].p != NULL && a >= hostAllocs[i].p && a < hostAllocs[i].p + hostAllocs[i].len) {
      ctx = hostAllocs[i].ctx, id = hostAllocs[i].id, type = 1, rc = 0;
    }
  }
  pthread_mutex_unlock(&mu);
  if (rc != 0) return rc;
  if (attr == 1)
    *(void**)data = ctx;
  else if (attr == 2)
    *(unsigned int*)data = type;
  else if (attr == 10)
    *(int*)data = ipcCapable;
  else if (attr == 17)
    *(void**)data = pool;
  else
    *(unsigned long long*)data = id;
  return 0;
}
/* Maps another process's allocation named by h (its chunk's memfd through /proc/<pid>/fd) behind
 * a fresh reservation; *p becomes the address of h's pointer in it. 0, or -1. */
static int ipcMap(const CUipcMemHandle* h, CUdeviceptr* p)
{
  int pid, fd;
  uint64_t base, len, off;
  size_t size;
  memcpy(&pid, h->reserved + 16, 4);
  memcpy(&fd, h->reserved + 20, 4);
  memcpy(&base, h->reserved + 24, 8);
  memcpy(&len, h->reserved + 32, 8);
  memcpy(&size, h->reserved + 40, sizeof(size_t));
  memcpy(&off, h->reserved + 48, 8);
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
  int mine = open(path, O_RDWR | O_CLOEXEC);
  if (mine < 0) return -1;
  char* shadow = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  char* dev = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  int rc = -1;
  CUdeviceptr at = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS && shadow != MAP_FAILED && dev != MAP_FAILED && rc != 0; i++)
    if (chunks[i].dev == NULL) {
      chunks[i] = (struct chunk){dev, shadow, len, mine, len, 0, 0, curCtx(), 1};
      if (addAlloc(i, (size_t)off, size, 1, &at) == 0) {
        rc = 0;
      } else {
        chunks[i] = (struct chunk){0};
        break;
      }
    }
  pthread_mutex_unlock(&mu);
  if (rc != 0) {
    if (shadow != MAP_FAILED) munmap(shadow, len);
    if (dev != MAP_FAILED) munmap(dev, len);
    close(mine);
    return -1;
  }
  *p = at + (*p - base);
  return 0;
}

/* Unmaps the mapping ipcMap made at p, if p is one. */
static void ipcUnmap(CUdeviceptr p)
{
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (allocs[i].dev != NULL && allocs[i].ipc && allocs[i].dev == (char*)(uintptr_t)p) {
      int ci = allocs[i].chunk;
      allocs[i] = (struct alloc){0};
      chunkPut(ci);
    }
  pthread_mutex_unlock(&mu);
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p)
{
  FAILS("cuIpcGetMemHandle");
  memset(h, 0, sizeof(*h));
  memcpy(h->reserved, "FAKEIPC", 7);
  memcpy(h->reserved + 8, &p, sizeof(p));
  /* the owner and its allocation's chunk, for another process to map: pid, fd, base, chunk
   * length, size, offset in the chunk */
  int pid = getpid(), fd = -1;
  uint64_t base = 0, len = 0, off = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++) {
    char* b = allocs[i].dev;
    if (b != NULL && !allocs[i].ipc && !allocs[i].pool && (char*)(uintptr_t)p >= b && (char*)(uintptr_t)p < b + allocs[i].size) {
      struct chunk* c = &chunks[allocs[i].chunk];
      fd = c->fd;
      base = (uint64_t)(uintptr_t)b;
      len = c->len;
      off = allocs[i].off;
      memcpy(h->reserved + 40, &allocs[i].size, sizeof(size_t));
    }
  }
  pthread_mutex_unlock(&mu);
  memcpy(h->reserved + 16, &pid, 4);
  memcpy(h->reserved + 20, &fd, 4);
  memcpy(h->reserved + 24, &base, 8);
  memcpy(h->reserved + 32, &len, 8);
  memcpy(h->reserved + 48, &off, 8);
  return fd < 0 ? 1 : 0;
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
  if (curCtx() == NULL) return 201;
  memcpy(p, h.reserved + 8, sizeof(*p));
  int pid;
  memcpy(&pid, h.reserved + 16, 4);
  if (pid == getpid() && !ipcForeign) {
    /* the real driver refuses a handle of the calling process: CUDA_ERROR_INVALID_CONTEXT */
    pthread_mutex_lock(&mu);
    logLine("cuIpcOpenMemHandle refused: exported by this process");
    pthread_mutex_unlock(&mu);
    return 201;
  }
  if (ipcMap(&h, p) != 0) return 1;
  __atomic_fetch_add(&ipcOpen, 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&mu);
  logLine("cuIpcOpenMemHandle ptr=%#llx", (unsigned long long)*p);
  pthread_mutex_unlock(&mu);
  return 0;
}
CUresult cuIpcCloseMemHandle(CUdeviceptr p)
{
  FAILS("cuIpcCloseMemHandle");
  ipcUnmap(p);
  __atomic_fetch_sub(&ipcOpen, 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&mu);
  int pending = 0;
  for (int i = 0; i < MAX_STREAMS; i++)
    if (liveStreams[i] != NULL) pending += liveStreams[i]->nq;
  logLine("cuIpcCloseMemHandle ptr=%#llx pending=%d", (unsigned long long)p, pending);
  pthread_mutex_unlock(&mu);
  return 0;
}
/* Lets the current context access peer's memory (flags must be 0), as the real driver does. */
CUresult cuCtxEnablePeerAccess(void* peer, unsigned int flags)
{
  FAILS("cuCtxEnablePeerAccess");
  void* c = curCtx();
  if (flags != 0) return 1;
  if (c == NULL || (peer != &fakeCtx[0] && peer != &fakeCtx[1]) || peer == c) return 201;
  int a = c == &fakeCtx[1], b = peer == &fakeCtx[1];
  pthread_mutex_lock(&mu);
  int was = peerOn[a][b];
  peerOn[a][b] = 1;
  if (!was) logLine("cuCtxEnablePeerAccess from=%d to=%d", a, b);
  pthread_mutex_unlock(&mu);
  return was ? 704 : 0; /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */
}
/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (124): 1 unless fakeNoDmabuf("1");
 * CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING (118): 100 (OWNER) unless fakeRdmaOrdering. */
CUresult cuDeviceGetAttribute(int* v, int attr, int dev)
{
  FAILS("cuDeviceGetAttribute");
  if (dev < 0 || dev > 1) return 101;
  if (attr == 118) {
    *v = rdmaOrdering;
    return 0;
  }
  if (attr != 124) return 1;
  *v = !noDmabuf;
  return 0;
}
/* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD (1) of [p, p+n), which must lie in one mapping this
 * process's driver made (a cuMemAlloc chunk, not an IPC import), p and n page-aligned, no flags:
 * a memfd whose name carries p (see the header). */
CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr p, size_t n, int type, unsigned long long flags)
{
  FAILS("cuMemGetHandleForAddressRange");
  pthread_mutex_lock(&mu);
  logLine("cuMemGetHandleForAddressRange ptr=%#llx size=%zu", (unsigned long long)p, n);
  pthread_mutex_unlock(&mu);
  if (noDmabuf) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
  if (type != 1 || flags != 0 || (p & 4095) != 0 || (n & 4095) != 0 || n == 0) return 1;
  int ok = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++) {
    struct chunk* c = &chunks[i];
    char* a = (char*)(uintptr_t)p;
    if (c->dev != NULL && !c->imported && a >= c->dev && a < c->dev + c->len && n <= c->len - (size_t)(a - c->dev)) ok = 1;
  }
  pthread_mutex_unlock(&mu);
  if (!ok) return 1;
  char name[64];
  snprintf(name, sizeof(name), "fakecuda-dmabuf:%#llx", (unsigned long long)p);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return 2;
  *(int*)handle = fd;
  return 0;
}

/* A stream remembers its context: copies on it need that context current. */
CUresult cuStreamCreate(void** s, unsigned int flags)
{
  FAILS("cuStreamCreate");
  if (flags != 1 || curCtx() == NULL) return 1;
  fakeStream* st = calloc(1, sizeof(*st));
  st->ctx = curCtx();
  pthread_mutex_lock(&mu);
  st->id = nextStreamId++;
  int slot = -1;
  for (int i = 0; i < MAX_STREAMS && slot < 0; i++)
    if (liveStreams[i] == NULL) slot = i;
  if (slot >= 0) liveStreams[slot] = st;
  logLine("cuStreamCreate stream=%d", st->id);
  pthread_mutex_unlock(&mu);
  if (slot < 0) {
    free(st);
    return 2;
  }
  *s = st;
  __atomic_fetch_add(&streams, 1, __ATOMIC_RELAXED);
  return 0;
}
/* Like the driver, lets queued work finish; logs how much there was. */
CUresult cuStreamDestroy_v2(void* s)
{
  FAILS("cuStreamDestroy_v2");
  fakeStream* st = s;
  pthread_mutex_lock(&mu);
  logLine("cuStreamDestroy stream=%d pending=%d", st->id, st->nq);
  runQueue(st);
  for (int i = 0; i < MAX_STREAMS; i++)
    if (liveStreams[i] == st) liveStreams[i] = NULL;
  pthread_mutex_unlock(&mu);
  free(st->q);
  free(st);
  __atomic_fetch_sub(&streams, 1, __ATOMIC_RELAXED);
  return 0;
}
CUresult cuStreamSynchronize(void* s)
{
  FAILS("cuStreamSynchronize");
  __atomic_fetch_add(&syncs, 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&mu);
  if (s != NULL) {
    fakeStream* st = s;
    runQueue(st);
    logLine("cuStreamSynchronize stream=%d", st->id);
  } else {
    logLine("cuStreamSynchronize stream=0");
  }
  pthread_mutex_unlock(&mu);
  return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void* st)
{
  FAILS("cuMemcpyDtoDAsync_v2");
  if (st == NULL) return 1;
  if (((fakeStream*)st)->ctx != cur) return 201;
  pthread_mutex_lock(&mu);
  CUresult rc = enqueue(st, d, s, n);
  pthread_mutex_unlock(&mu);
  return rc;
}
/* Any stream, the default one (NULL: at once) too; no context check. */
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, void* st)
{
  FAILS("cuMemcpyAsync");
  pthread_mutex_lock(&mu);
  CUresult rc;
  if (st == NULL) {
    struct op o = {d, s, n};
    rc = (CUresult)runOp(&o);
  } else {
    rc = enqueue(st, d, s, n);
    logLine("cuMemcpyAsync stream=%d bytes=%zu", ((fakeStream*)st)->id, n);
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

#ifndef FAKE_NO_HTOD
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void* st)
{
  FAILS("cuMemcpyHtoDAsync_v2");
  if (st == NULL) return 1;
  if (((fakeStream*)st)->ctx != cur) return 201;
  pthread_mutex_lock(&mu);
  CUresult rc = enqueue(st, d, (CUdeviceptr)(uintptr_t)s, n);
  logLine("cuMemcpyHtoDAsync stream=%d", ((fakeStream*)st)->id);
  pthread_mutex_unlock(&mu);
  return rc;
}
#endif
