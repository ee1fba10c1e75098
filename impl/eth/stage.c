/*
 * stage.c: CUDA mode's staging of the Ethernet transport (see ethconn.h):
 * device memory travels through each connection's two pinned buffers, each
 * used as two halves, with the copies on the connection's own streams, so
 * that a chunk's copy overlaps the socket transfer of the previous one and
 * no connection waits behind another's copies.
 */
#define _GNU_SOURCE
#include "ethconn.h"

#include <stdio.h>
#include <string.h>

#include "../../cuda/calls.h" /* cuda/: cudaStageAsync, cudaStageWait and the streams (linked into the same library) */

/* Records msg, a message built here, as connection c's failure: engConnFail takes a printf
 * format where impl/status's error record defines engFail (a macro), a plain message before. */
#ifdef engFail
#define stageFail(c, code, msg) engConnFail((c), (code), "%s", (msg))
#else
#define stageFail(c, code, msg) engConnFail((c), (code), (msg))
#endif

/* A put from device memory: the header, then the payload chunk by chunk through the two halves of
 * the pinned staging buffer, all under the send lock: the copy of chunk k+1 (on the connection's
 * stream) runs while chunk k is sent from the other half. A half whose copy failed is sent as
 * zeros (the header promised size bytes) and the failure recorded. */
int ethSendStaged(engConn* c, ethConn* s, unsigned char* hdr, uint64_t src, uint64_t size)
{
  struct cudaProxyState* cuda = ctxState(c)->cuda;
  if (cuda == NULL || s->sendStage == NULL || s->sendStream == NULL)
    return engConnFail(c, mscclppInvalidUsage, "Ethernet put from memory the host cannot read (not CUDA mode)");
  uint64_t half = s->stageBytes / 2;
  char why[200] = "";
  int bad[2] = {0, 0}, cudaFailed = 0;
  pthread_mutex_lock(&s->sendLock);
  struct iovec iov[1] = {{hdr, ETH_HDR_BYTES}};
  int err = ethSendAll(s, iov, 1);
  if (err == 0 && size > 0)
    bad[0] = cudaStageAsync(cuda, s->sendStream, (uint64_t)(uintptr_t)s->sendStage, src,
                            (size_t)(size < half ? size : half), 0, why, sizeof(why)) != mscclppSuccess;
  for (uint64_t off = 0, k = 0; err == 0 && off < size; off += half, k++) {
    size_t n = (size_t)(size - off < half ? size - off : half);
    char* buf = s->sendStage + (k % 2) * half;
    if (cudaStageWait(cuda, s->sendStream, why, sizeof(why)) != mscclppSuccess) bad[k % 2] = 1;
    if (off + half < size) { /* the next chunk into the other half, while this one is sent */
      uint64_t m = size - off - half < half ? size - off - half : half;
      bad[(k + 1) % 2] = cudaStageAsync(cuda, s->sendStream, (uint64_t)(uintptr_t)(s->sendStage + ((k + 1) % 2) * half),
                                        src + off + half, (size_t)m, 0, why, sizeof(why)) != mscclppSuccess;
    }
    if (bad[k % 2]) {
      memset(buf, 0, n);
      cudaFailed = 1;
    }
    struct iovec d[1] = {{buf, n}};
    err = ethSendAll(s, d, 1);
  }
  if (err != 0 && size > 0) (void)cudaStageWait(cuda, s->sendStream, why, sizeof(why)); /* nothing left in flight */
  pthread_mutex_unlock(&s->sendLock);
  if (err != 0) return ethSendFailed(c, s, err);
  if (cudaFailed) {
    char what[300];
    snprintf(what, sizeof(what), "Ethernet put from device memory: %s", why);
    return stageFail(c, mscclppUnhandledCudaError, what);
  }
  return mscclppSuccess;
}

/* A put into device memory: the payload chunk by chunk into the two halves of the pinned staging
 * buffer, each copied to the device on the connection's receive stream while the next chunk is
 * received into the other half; every copy is done before it returns (a later signal follows the
 * data). 0, or the receive error; a failed copy is recorded. */
int ethRecvStaged(engConn* c, ethConn* s, uint64_t dst, uint64_t n)
{
  struct cudaProxyState* cuda = ctxState(c)->cuda;
  uint64_t half = s->stageBytes / 2;
  char why[200] = "";
  int rc = 0, cudaFailed = 0;
  for (uint64_t off = 0, k = 0; rc == 0 && off < n; off += half, k++) {
    size_t len = (size_t)(n - off < half ? n - off : half);
    char* buf = s->recvStage + (k % 2) * half;
    rc = ethRecvAll(s, buf, len); /* the previous chunk's copy runs meanwhile */
    if (rc != 0) break;
    /* that copy, from the other half, is done before this half is handed to the next one */
    if (cudaStageWait(cuda, s->recvStream, why, sizeof(why)) != mscclppSuccess ||
        cudaStageAsync(cuda, s->recvStream, dst + off, (uint64_t)(uintptr_t)buf, len, 1, why, sizeof(why)) !=
            mscclppSuccess)
      cudaFailed = 1;
  }
  if (cudaStageWait(cuda, s->recvStream, why, sizeof(why)) != mscclppSuccess) cudaFailed = 1;
  if (cudaFailed) {
    char what[300];
    snprintf(what, sizeof(what), "put from rank %d into device memory: %s", c->peerRank, why);
    stageFail(c, mscclppUnhandledCudaError, what);
  }
  return rc;
}

/* The count of a signal into my device epoch, on the connection's receive stream after every copy
 * of the data it counts (ethRecvStaged waited for them); a failure is recorded. */
int ethFlagStaged(engConn* c, ethConn* s, uint64_t epoch, uint64_t count)
{
  struct cudaProxyState* cuda = ctxState(c)->cuda;
  char why[200];
  memcpy(s->recvStage, &count, sizeof(count));
  if (cudaStageAsync(cuda, s->recvStream, epoch, (uint64_t)(uintptr_t)s->recvStage, sizeof(count), 1, why,
                     sizeof(why)) == mscclppSuccess &&
      cudaStageWait(cuda, s->recvStream, why, sizeof(why)) == mscclppSuccess)
    return mscclppSuccess;
  char what[300];
  snprintf(what, sizeof(what), "signal from rank %d into device memory: %s", c->peerRank, why);
  return stageFail(c, mscclppUnhandledCudaError, what);
}

/* Makes a connection's two staging streams in CUDA mode (nothing otherwise). */
int ethConnStreamsNew(struct ethCtx* e, ethConn* s)
{
  char why[200];
  if (e->cuda == NULL) return mscclppSuccess;
  if (cudaStageStreamNew(e->cuda, &s->sendStream, why, sizeof(why)) == mscclppSuccess &&
      cudaStageStreamNew(e->cuda, &s->recvStream, why, sizeof(why)) == mscclppSuccess)
    return mscclppSuccess;
  ethConnStreamsFree(e, s);
  return mscclppUnhandledCudaError;
}

/* Frees a connection's staging streams (its copies done). */
void ethConnStreamsFree(struct ethCtx* e, ethConn* s)
{
  if (e->cuda == NULL) return;
  cudaStageStreamFree(e->cuda, s->sendStream);
  cudaStageStreamFree(e->cuda, s->recvStream);
  s->sendStream = s->recvStream = NULL;
}

