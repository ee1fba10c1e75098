/*
 * calls.h: the C side of the Go wrappers (contexts and devices calls.c,
 * memory and streams mem.c, NUMA placement numa.c, IPC, dma-buf and peer
 * access ipc.c), of a CUDA-mode proxy's state (proxystate.c) and of the
 * staging copies (stage.c).
 */
#ifndef MSCCLPP_CUDA_CALLS_H_
#define MSCCLPP_CUDA_CALLS_H_

#include <stdint.h>

#include "cuapi.h"

/* Makes ctx current, remembering the calling thread's context in *prev (on failure *call names
 * the call); cuwPop makes prev current again. Every wrapper with a context runs between them. */
int cuwPush(const cuwApi* a, cuwContext ctx, cuwContext* prev, const char** call);
void cuwPop(const cuwApi* a, cuwContext ctx, cuwContext prev);

/* The whole body of a wrapper that makes one driver call, expr, with ctx current: pushes ctx,
 * runs expr, names the call in *call on failure, pops, and returns the CUresult. */
#define CUW_ONE_CALL(a, ctx, call, expr, name)         \
  do {                                                 \
    cuwContext prev_;                                  \
    cuwResult rc_ = cuwPush(a, ctx, &prev_, call);     \
    if (rc_ != CUW_SUCCESS) return rc_;                \
    rc_ = (expr);                                      \
    if (rc_ != CUW_SUCCESS) *call = name;              \
    cuwPop(a, ctx, prev_);                             \
    return rc_;                                        \
  } while (0)

/* In a wrapper between cuwPush and an `out:` label that pops: runs expr into rc and, on failure,
 * names the call in *call and jumps to out. */
#define CUW_FAIL_IF(expr, name) \
  do {                          \
    rc = (expr);                \
    if (rc != CUW_SUCCESS) {    \
      *call = name;             \
      goto out;                 \
    }                           \
  } while (0)

int cuwProbe(const cuwApi* a, int* ordinal, cuwContext* ctx, char* busId, int len, const char** call);
int cuwInit(const cuwApi* a);
int cuwSetCurrent(const cuwApi* a, cuwContext ctx);
int cuwMemAlloc(const cuwApi* a, cuwContext ctx, size_t size, cuwDevicePtr* out, const char** call);
int cuwMemFree(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, const char** call);
int cuwMemset(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, unsigned char v, size_t n, const char** call);
/* Pinned, portable, mapped host memory; numaNode >= 0 asks for its pages on that node (the calling
 * thread prefers it during the allocation; *placed says whether the kernel took the preference). */
int cuwHostAlloc(const cuwApi* a, cuwContext ctx, size_t size, int numaNode, void** out, cuwDevicePtr* dev,
                 int* placed, const char** call);
/* The device and context of the allocation holding device pointer p (CU_POINTER_ATTRIBUTE_CONTEXT);
 * *ctx NULL when p is not device memory of a context. *memType: p's CU_POINTER_ATTRIBUTE_MEMORY_TYPE
 * where p has a context (pinned host memory has one too), else 0. */
int cuwProbePointer(const cuwApi* a, cuwDevicePtr p, int* ordinal, cuwContext* ctx, char* busId, int len,
                    int* memType, const char** call);
/* cuMemHostAlloc(out, size, flags) in the current context, its pages preferably on numaNode (>= 0). */
int cuwPinnedOnNode(const cuwApi* a, void** out, size_t size, unsigned int flags, int numaNode, int* placed);
/* The NUMA node of the page at p (get_mempolicy), or -1. */
int cuwPageNode(const void* p);
/* The calling thread's memory policy mode, or -1. */
int cuwPolicyMode(void);
int cuwHostFree(const cuwApi* a, cuwContext ctx, void* p, const char** call);
int cuwIpcHandleOf(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, cuwIpcMemHandle* h, cuwDevicePtr* base,
                   size_t* size, const char** call);
/* The base and size of the allocation holding p (an IPC-opened one too). */
int cuwAddressRange(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, cuwDevicePtr* base, size_t* size, const char** call);
int cuwIpcOpen(const cuwApi* a, cuwContext ctx, const cuwIpcMemHandle* h, cuwDevicePtr* base, const char** call);
int cuwCopyAsync(const cuwApi* a, cuwContext ctx, cuwDevicePtr dst, cuwDevicePtr src, size_t n, uintptr_t stream,
                 const char** call);
int cuwIpcClose(const cuwApi* a, cuwContext ctx, cuwDevicePtr base, const char** call);
/* A dma-buf fd for exactly [p, p+n) (cuMemGetHandleForAddressRange; the caller page-aligns the
 * range inside one allocation, which the driver requires). */
int cuwDmabufFd(const cuwDmabufApi* b, const cuwApi* a, cuwContext ctx, cuwDevicePtr p, size_t n, int* fd,
                const char** call);
/* Lets ctx access the memory of peer (cuCtxEnablePeerAccess); already enabled is success. */
int cuwEnablePeer(const cuwApi* a, cuwContext ctx, cuwContext peer, const char** call);
/* The id of the allocation holding p (CU_POINTER_ATTRIBUTE_BUFFER_ID: never reused in a process). */
int cuwBufferId(const cuwApi* a, cuwDevicePtr p, unsigned long long* id, const char** call);
/* Waits, with ctx current, for everything enqueued on stream (a CUstream; 0: the default stream). */
int cuwStreamSync(const cuwApi* a, cuwContext ctx, uintptr_t stream, const char** call);
/* Device attribute attr of dev (cuDeviceGetAttribute). */
int cuwDeviceAttr(const cuwApi* a, cuwDevice dev, int attr, int* v, const char** call);
/* A reference on device dev's primary context (cuDevicePrimaryCtxRetain) when ctx is that
 * context (*retained = 1), else nothing (*retained = 0: ctx is one the application created);
 * cuwPrimaryRelease gives a reference back. */
int cuwPrimaryRetain(const cuwApi* a, cuwDevice dev, cuwContext ctx, int* retained, const char** call);
int cuwPrimaryRelease(const cuwApi* a, cuwDevice dev, const char** call);
/* The driver's name / description of code, or NULL when it has none. */
const char* cuwErrorName(const cuwApi* a, int code);
const char* cuwErrorString(const cuwApi* a, int code);

/* The state of one CUDA-mode proxy context, whatever transport it serves (P2P stores it as
 * engCtx.transport and every engConn.transport of that context; Ethernet and IB reach it
 * through their own context state). */
/* Pinned words a signal value is copied from; a slot is reused only after a
 * stream synchronize, forced every CUDA_PROXY_FLAG_RING signals. */
#define CUDA_PROXY_FLAG_RING 4096

typedef struct cudaProxyState {
  const cuwApi* api;
  cuwContext ctx;       /* made current on the proxy thread */
  cuwStream stream;     /* every copy of this context, in trigger order */
  cuwStream tailStream; /* the FIFO tail's copies only, so publishing never waits behind data */
  cuwDevicePtr devTail; /* the FIFO tail initiators read (device memory) */
  uint64_t* hostTail;   /* pinned staging word for devTail, followed by flagRing */
  uint64_t* flagRing;   /* pinned staging words for signal values (CUDA_PROXY_FLAG_RING of them) */
  uint64_t flagPos;     /* signals sent through flagRing (proxy thread only) */
  void* cpus;           /* cpu_set_t* to bind the proxy thread to, or NULL */
  size_t cpusSize;      /* its size in bytes */
  int bindDone;         /* 1 once the proxy thread ran threadInit */
  int bindErr;          /* pthread_setaffinity_np's result (an errno), 0 when bound or not asked */
} cudaProxyState;

/* Allocates the state: two non-blocking streams and the tail words in ctx
 * (the pinned ones on numaNode when >= 0), and the cpu set from cpus[0..nCpus). */
int cudaProxyStateNew(const cuwApi* a, cuwContext ctx, const int* cpus, int nCpus, int numaNode, cudaProxyState** out,
                    const char** call);
/* Waits for both streams: every copy and tail publication enqueued so far is done. */
int cudaProxyStateSync(cudaProxyState* st, const char** call);
/* Waits for both streams, then frees everything of st. */
int cudaProxyStateFree(cudaProxyState* st, const char** call);
/* What any CUDA-mode proxy context (impl/cudaproxy) needs of its state, on the proxy thread:
 * its setup (st's context current, the thread bound near the GPU; the binding's result is
 * kept for cudaProxyStateBindResult) and the FIFO tail's publication in device memory on the tail
 * stream. Return a cuwResult; cudaProxyStateEnter names the failing call. */
int cudaProxyStateEnter(cudaProxyState* st, const char** call);
int cudaProxyStatePushTail(cudaProxyState* st, uint64_t tail);
/* cudaProxyStatePushTail, then a wait until the tail is in device memory (the tail stream synchronized). */
int cudaProxyStatePushTailNow(cudaProxyState* st, uint64_t tail);
/* Synchronous copies through pinned host memory for host-side transports (Ethernet in CUDA
 * mode): device src to host dst on st's stream, host src to device dst on its tail stream,
 * with st's context current for the call. Return a mscclppResult_t; err says what failed. */
int cudaStageToHost(cudaProxyState* st, void* dst, uint64_t src, size_t n, char* err, int errLen);
int cudaStageToDevice(cudaProxyState* st, uint64_t dst, const void* src, size_t n, char* err, int errLen);

/* A connection's own staging stream (stage.c), in st's context: created, freed (after its copies),
 * a copy enqueued on it without waiting (toDevice: host src to device dst, else device src to
 * host dst), and a wait for everything enqueued on it. Return a mscclppResult_t; err says why. */
int cudaStageStreamNew(cudaProxyState* st, void** stream, char* err, int errLen);
void cudaStageStreamFree(cudaProxyState* st, void* stream);
int cudaStageAsync(cudaProxyState* st, void* stream, uint64_t dst, uint64_t src, size_t n, int toDevice, char* err,
                   int errLen);
int cudaStageWait(cudaProxyState* st, void* stream, char* err, int errLen);

/* NVML's CPU affinity of the GPU at busId into set[0..words) (bit i of word
 * w: cpu 64*w+i); init and shutdown around it. On failure: the call and
 * NVML's text of the error. */
int cuwNvmlCpuAffinity(const cuwNvml* n, const char* busId, unsigned long* set, unsigned int words,
                       const char** call, const char** msg);

/* Whether the proxy thread ran threadInit, and pthread_setaffinity_np's result. */
void cudaProxyStateBindResult(const cudaProxyState* st, int* done, int* err);

/* Whether device memory at p can be shared with a peer (memkind.c): *kind CUW_SHARE_OK (cuMemAlloc
 * memory, memory that is not device memory, or the driver does not say), CUW_SHARE_POOL (a memory
 * pool's: cudaMallocAsync) or CUW_SHARE_VMM (not legacy-IPC capable otherwise: cuMemCreate/cuMemMap). */
#define CUW_SHARE_OK 0
#define CUW_SHARE_POOL 1
#define CUW_SHARE_VMM 2
int cuwShareKind(const cuwApi* a, cuwDevicePtr p, int* kind);

#endif
