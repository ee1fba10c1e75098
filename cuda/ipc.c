/*
 * ipc.c: the driver calls behind the Go wrappers (calls.h) that share device
 * memory beyond the context that allocated it: CUDA IPC handles (made,
 * opened, closed), a dma-buf fd for a range (what an RDMA NIC registers),
 * and peer access between two contexts of one process. Each runs with the
 * given context current (cuwPush/cuwPop, calls.c) and returns the CUresult,
 * naming the failing call in *call. A file of its own: these are the calls
 * of connection set-up between ranks, apart from local memory (mem.c).
 */
#define _GNU_SOURCE
#include "calls.h"

int cuwIpcHandleOf(const cuwApi* a, cuwContext ctx, cuwDevicePtr p, cuwIpcMemHandle* h, cuwDevicePtr* base,
                   size_t* size, const char** call)
{
  cuwContext prev;
  cuwResult rc = cuwPush(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  CUW_FAIL_IF(a->memGetAddressRange(base, size, p), "cuMemGetAddressRange");
  CUW_FAIL_IF(a->ipcGetMemHandle(h, *base), "cuIpcGetMemHandle");
out:
  cuwPop(a, ctx, prev);
  return rc;
}

int cuwIpcOpen(const cuwApi* a, cuwContext ctx, const cuwIpcMemHandle* h, cuwDevicePtr* base, const char** call)
{
  CUW_ONE_CALL(a, ctx, call, a->ipcOpenMemHandle(base, *h, CUW_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle");
}

int cuwIpcClose(const cuwApi* a, cuwContext ctx, cuwDevicePtr base, const char** call)
{
  CUW_ONE_CALL(a, ctx, call, a->ipcCloseMemHandle(base), "cuIpcCloseMemHandle");
}

int cuwDmabufFd(const cuwDmabufApi* b, const cuwApi* a, cuwContext ctx, cuwDevicePtr p, size_t n, int* fd,
                const char** call)
{
  CUW_ONE_CALL(a, ctx, call, b->getHandleForAddressRange(fd, p, n, CUW_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
               "cuMemGetHandleForAddressRange");
}

int cuwEnablePeer(const cuwApi* a, cuwContext ctx, cuwContext peer, const char** call)
{
  cuwContext prev;
  cuwResult rc = cuwPush(a, ctx, &prev, call);
  if (rc != CUW_SUCCESS) return rc;
  rc = a->ctxEnablePeerAccess(peer, 0);
  if (rc == CUW_ERROR_PEER_ACCESS_ALREADY_ENABLED) rc = CUW_SUCCESS; /* another communicator did */
  if (rc != CUW_SUCCESS) *call = "cuCtxEnablePeerAccess";
  cuwPop(a, ctx, prev);
  return rc;
}
