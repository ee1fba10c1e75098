/*
 * alltoall.c: a full all-to-all connection setup (run with N = 16).
 *
 * Every rank connects to every other rank over mscclppTransportSHM twice:
 * tag 7 with a 64-byte mscclppHostAlloc buffer and tag 9 with a malloc
 * buffer, each filled with a pattern of (this rank, the peer) before the
 * one mscclppConnectionSetup. Then, on every connection:
 *   - remoteBuff of a tag-7 connection shows the peer's pattern for this
 *     rank (the setup mapped the right peer's right buffer), and remoteBuff
 *     of a tag-9 connection is NULL (malloc memory is not mapped);
 *   - a putWithSignal of 8 bytes to every peer arrives: every rank waits on
 *     every connection (a bounded wait) and finds the sender's word.
 * A setup that paired the wrong ranks or tags fails the checks; one that
 * hangs is killed by launch's timeout.
 */
#define _GNU_SOURCE
#include "check.h"

enum { BUFSZ = 64, NTAGS = 2, WAIT_MS = 20000 };
static const int tags[NTAGS] = {7, 9};

static int rank, nranks;

static uint8_t pattern(int from, int to, int tag, int i) { return (uint8_t)(from * 31 + to * 7 + tag * 3 + i + 1); }

static uint64_t word(int from, int to, int tag) { return 0xa11700000000ull | (uint64_t)(from << 16 | to << 4 | tag); }

static void fill(uint8_t* b, int to, int tag)
{
  for (int i = 0; i < BUFSZ; i++)
    b[i] = pattern(rank, to, tag, i);
}

/* remoteBuff of every connection: the peer's pattern where mapped, else NULL. */
static void check_mapped(mscclppComm_t comm)
{
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    for (int t = 0; t < NTAGS; t++) {
      mscclppDevConn_t* dc = NULL;
      MCHECK_COMM(comm, mscclppGetDeviceConnection(comm, p, tags[t], &dc));
      const uint8_t* rb = dc->remoteBuff;
      if (t == 1) {
        CHECK(rb == NULL, "rank %d tag %d: remoteBuff %p for a malloc buffer", p, tags[t], (const void*)rb);
        continue;
      }
      if (!CHECK(rb != NULL, "rank %d tag %d: remoteBuff is NULL for a HostAlloc buffer", p, tags[t])) continue;
      int bad = -1;
      for (int i = 16; i < BUFSZ && bad < 0; i++)
        if (rb[i] != pattern(p, rank, tags[t], i)) bad = i;
      CHECK(bad < 0, "rank %d tag %d: remoteBuff byte %d is %d, want rank %d's pattern %d", p, tags[t], bad,
            bad < 0 ? 0 : rb[bad], p, bad < 0 ? 0 : pattern(p, rank, tags[t], bad));
    }
  }
}

/* Every rank puts word(rank, p, tag) at offset 8 of every peer's buffer, then waits for every peer's. */
static void check_puts(mscclppComm_t comm, uint8_t* (*bufs)[NTAGS])
{
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    for (int t = 0; t < NTAGS; t++) {
      uint64_t w = word(rank, p, tags[t]);
      memcpy(bufs[p][t], &w, sizeof(w));
      mscclppDevConn_t* dc = NULL;
      MCHECK_COMM(comm, mscclppGetDeviceConnection(comm, p, tags[t], &dc));
      MCHECK_COMM(comm, mscclppDevConnPutWithSignal(dc, 8, 0, sizeof(w)));
    }
  }
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    for (int t = 0; t < NTAGS; t++) {
      mscclppDevConn_t* dc = NULL;
      MCHECK_COMM(comm, mscclppGetDeviceConnection(comm, p, tags[t], &dc));
      MCHECK_COMM(comm, mscclppDevConnWaitTimeout(dc, WAIT_MS));
      uint64_t got;
      memcpy(&got, bufs[p][t] + 8, sizeof(got));
      CHECK(got == word(p, rank, tags[t]), "from rank %d tag %d: got %#llx, want %#llx", p, tags[t],
            (unsigned long long)got, (unsigned long long)word(p, rank, tags[t]));
    }
  }
}

int main(void)
{
  test_init("alltoall");
  rank = test_rank();
  nranks = test_nranks();
  REQUIRE(nranks >= 2 && nranks <= 64, "run with 2..64 ranks, not %d", nranks);
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, nranks, test_addr(), rank));
  uint8_t* (*bufs)[NTAGS] = calloc((size_t)nranks, sizeof(*bufs));
  REQUIRE(bufs != NULL, "out of memory");
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    MCHECK(mscclppHostAlloc((void**)&bufs[p][0], BUFSZ));
    bufs[p][1] = malloc(BUFSZ);
    REQUIRE(bufs[p][1] != NULL, "out of memory");
    for (int t = 0; t < NTAGS; t++) {
      fill(bufs[p][t], p, tags[t]);
      MCHECK_COMM(comm, mscclppConnect(comm, p, tags[t], bufs[p][t], BUFSZ, mscclppTransportSHM, NULL));
    }
  }
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  check_mapped(comm);
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm)); /* every rank read before any put lands */
  check_puts(comm, bufs);
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  MCHECK(mscclppCommDestroy(comm));
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    MCHECK(mscclppHostFree(bufs[p][0]));
    free(bufs[p][1]);
  }
  free(bufs);
  return test_finish();
}
