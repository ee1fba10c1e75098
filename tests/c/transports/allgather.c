/*
 * allgather.c: an allgather through host-driven SHM connections, in C (the
 * mscclppDevConn* inline functions), on every rank of the launcher's job.
 *
 *   allgather [--malloc] [--iters N] [--chunk B] [--big-iters N] [--big-chunk B]
 *
 * Each rank connects to every other rank (tag 0) with one buffer of
 * 2 * nranks * (largest chunk) bytes (mscclppHostAlloc, or malloc with
 * --malloc) and,
 * per iteration, writes a fresh pattern into its own chunk and puts it into
 * every peer's buffer at the same place, signals, waits for every peer's
 * signal and checks every byte of every chunk. Iterations alternate between
 * the two halves of the buffer, so a fast rank's next iteration never
 * overwrites what a slow rank still checks. The ways of putting rotate:
 * putWithSignal; put + signal; two puts + signal; putWithSignalAndFlush.
 * Rank 0 prints the time per round; how fast an oversubscribed round is, is a
 * benchmark's question (make bench: the 4-rank allgather row against
 * MPI_Allgather), not a bound here, where the machine's load is not known.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "suite_util.h"

static size_t bufBytes, halfBytes; /* halfBytes = nranks * the largest chunk */
static char* buf;
static mscclppDevConn_t** peerConn; /* by rank; NULL for me */

static void round_once(long it, size_t chunk, int check)
{
  int n = su_nranks, me = su_rank;
  size_t base = (size_t)(it & 1) * halfBytes;
  uint64_t mySeed = su_seed((uint64_t)it, (uint64_t)me, chunk);
  su_fill(buf + base + (size_t)me * chunk, chunk, mySeed);
  size_t off = base + (size_t)me * chunk;
  for (int k = 1; k < n; k++) {
    int p = (me + k) % n; /* everybody starts with a different peer */
    mscclppDevConn_t* c = peerConn[p];
    mscclppResult_t r = mscclppSuccess;
    switch (it % 4) {
    case 0:
      r = mscclppDevConnPutWithSignal(c, off, off, chunk);
      break;
    case 1:
      r = mscclppDevConnPut(c, off, off, chunk);
      if (r == mscclppSuccess) r = mscclppDevConnSignal(c);
      break;
    case 2: {
      size_t h = chunk / 2;
      if (h) r = mscclppDevConnPut(c, off, off, h);
      if (r == mscclppSuccess) r = mscclppDevConnPut(c, off + h, off + h, chunk - h);
      if (r == mscclppSuccess) r = mscclppDevConnSignal(c);
      break;
    }
    default:
      r = mscclppDevConnPutWithSignalAndFlush(c, off, off, chunk);
      break;
    }
    if (r != mscclppSuccess) su_die_res(__FILE__, __LINE__, "put to peer", r);
  }
  for (int k = 1; k < n; k++) {
    int p = (me + n - k) % n;
    su_wait(peerConn[p], 30000, "allgather round");
  }
  for (int k = 1; k < n; k++) SU_CK(mscclppDevConnFlush(peerConn[(me + k) % n]));
  if (check) {
    for (int p = 0; p < n; p++) {
      char what[96];
      snprintf(what, sizeof what, "iteration %ld chunk of rank %d (%zu bytes)", it, p, chunk);
      su_verify(buf + base + (size_t)p * chunk, chunk, su_seed((uint64_t)it, (uint64_t)p, chunk), what);
    }
    if (su_failures) su_exit_fail();
  }
}

int main(int argc, char** argv)
{
  su_init("allgather");
  int useMalloc = 0;
  long iters = 200, bigIters = 3;
  size_t chunk = 1000, bigChunk = 1 << 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--malloc")) useMalloc = 1;
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atol(argv[++i]);
    else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) chunk = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--big-iters") && i + 1 < argc) bigIters = atol(argv[++i]);
    else if (!strcmp(argv[i], "--big-chunk") && i + 1 < argc) bigChunk = (size_t)atol(argv[++i]);
    else {
      printf("usage: allgather [--malloc] [--iters N] [--chunk B] [--big-iters N] [--big-chunk B]\n");
      return 2;
    }
  }
  int n = su_nranks, me = su_rank;
  size_t maxChunk = chunk > bigChunk || bigIters == 0 ? chunk : bigChunk;
  halfBytes = (size_t)n * maxChunk;
  bufBytes = 2 * halfBytes;

  su_comm_init();
  if (useMalloc) {
    buf = (char*)malloc(bufBytes);
    SU_REQUIRE(buf != NULL, "malloc %zu", bufBytes);
  } else {
    SU_CK(mscclppHostAlloc((void**)&buf, bufBytes));
  }
  memset(buf, 0xEE, bufBytes);
  for (int p = 0; p < n; p++)
    if (p != me) SU_CK(mscclppConnect(su_comm, p, 0, buf, bufBytes, su_transport(), su_ibdev()));
  SU_CK(mscclppConnectionSetup(su_comm));
  mscclppDevConn_t* all;
  int nConns = 0;
  SU_CK(mscclppGetAllDeviceConnections(su_comm, &all, &nConns));
  SU_REQUIRE(nConns == n - 1, "%d connections, want %d", nConns, n - 1);
  peerConn = (mscclppDevConn_t**)calloc((size_t)n, sizeof *peerConn);
  for (int p = 0, i = 0; p < n; p++) {
    if (p == me) continue;
    SU_CK(mscclppGetDeviceConnection(su_comm, p, 0, &peerConn[p]));
    SU_CHECK(peerConn[p] == &all[i], "GetDeviceConnection(%d) = %p, entry %d of the array is %p", p,
             (void*)peerConn[p], i, (void*)&all[i]);
    SU_CHECK(all[i].remoteRank == p && all[i].tag == 0, "entry %d: remoteRank %d tag %d", i, all[i].remoteRank,
             all[i].tag);
    SU_CHECK(all[i].localBuff == buf, "entry %d: localBuff %p, want %p", i, all[i].localBuff, (void*)buf);
    SU_CHECK(all[i].fifo.connId == i, "entry %d: fifo.connId %d", i, all[i].fifo.connId);
    SU_CHECK(all[i].localSignalEpochId != NULL && all[i].waitEpochId != NULL, "entry %d: epoch pointers unset", i);
    if (useMalloc || !su_transport_maps())
      SU_CHECK(all[i].remoteBuff == NULL, "entry %d: remoteBuff %p for a malloc'd peer buffer", i, all[i].remoteBuff);
    else
      SU_CHECK(all[i].remoteBuff != NULL, "entry %d: remoteBuff NULL for a mscclppHostAlloc'd peer buffer", i);
    i++;
  }
  SU_CK(mscclppProxyLaunch(su_comm));

  double t0 = su_now();
  for (long it = 0; it < iters; it++) round_once(it, chunk, 1);
  double tSmall = su_now() - t0;
  double t1 = su_now();
  for (long it = 0; it < bigIters; it++) round_once(iters + it, bigChunk, 1);
  double tBig = su_now() - t1;

  printf("allgather rank %d: n=%d %s: %ld rounds of %zu B/rank in %.3f s (%.1f us/round); %ld rounds of %zu B/rank "
         "in %.3f s\n",
         me, n, useMalloc ? "malloc" : "hostalloc", iters, chunk, tSmall, iters ? tSmall / (double)iters * 1e6 : 0.0,
         bigIters, bigChunk, tBig);

  mscclppResult_t async = mscclppSuccess;
  SU_CK(mscclppCommGetAsyncError(su_comm, &async));
  SU_CHECK(async == mscclppSuccess, "async error %s: %s", mscclppGetErrorString(async), su_lasterr(su_comm));
  SU_CK(mscclppProxyStop(su_comm));
  SU_CK(mscclppCommDestroy(su_comm));
  su_comm = NULL;
  if (useMalloc)
    free(buf);
  else
    SU_CK(mscclppHostFree(buf));
  free(peerConn);
  return su_finish();
}
