/*
 * bootstrap.c: the bootstrap of N ranks (run with N = 1, 2, 4, 8).
 *
 *  1. mscclppCommInitRank at MSCCLPP_TEST_ADDR; CommRank/CommSize; AllGather
 *     of distinct per-rank data for sizes 1, 4, 4096, 64 KiB, 64 KiB + 1,
 *     200001, 1 MiB + 4099 (no multiple of the node segment's chunk, 64-512
 *     KiB), 1 MiB (and 64 MiB when N = 2), every byte checked; Barrier; 50 rounds of
 *     AllGather + Barrier.
 *  2. mscclppGetUniqueId on rank 0, handed to the others through a file,
 *     mscclppCommInitRankFromId; the same checks.
 *  3. Both communicators alive at once, used alternately.
 *  4. Destroy, then re-init at the same address at once (3 times): no
 *     "address already in use".
 *  5. Several threads per process, each with its own communicator at its own
 *     port (ADDR port + 1 + i), used concurrently.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "check.h"

static int rank, nranks;

/* Slot contents: 64-bit words that depend on rank, position, size and salt
 * (cheap enough for 64 MiB slots); byte i is byte i % 8 of word i / 8. */
static uint64_t pattern_word(int r, size_t w, int size, int salt)
{
  uint64_t x = ((uint64_t)(r + 1) << 48) ^ ((uint64_t)w * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)size << 20) ^
               (uint64_t)(salt * 7919);
  return x ^ (x >> 29);
}

static void fill_slot(uint8_t* p, int r, size_t size, int salt)
{
  size_t w = 0;
  for (; (w + 1) * 8 <= size; w++) {
    uint64_t x = pattern_word(r, w, (int)size, salt);
    memcpy(p + w * 8, &x, 8);
  }
  if (w * 8 < size) {
    uint64_t x = pattern_word(r, w, (int)size, salt);
    memcpy(p + w * 8, &x, size - w * 8);
  }
}

/* Number of wrong bytes in slot r (reports the first few). */
static size_t check_slot(const uint8_t* p, int r, size_t size, int salt, const char* what)
{
  enum { CHUNK = 1 << 16 };
  static uint8_t want[CHUNK + 8];
  size_t bad = 0;
  for (size_t off = 0; off < size; off += CHUNK) {
    size_t len = size - off < CHUNK ? size - off : CHUNK;
    for (size_t w = 0; w * 8 < len; w++) {
      uint64_t x = pattern_word(r, off / 8 + w, (int)size, salt);
      memcpy(want + w * 8, &x, 8);
    }
    if (memcmp(p + off, want, len) == 0)
      continue;
    for (size_t i = 0; i < len; i++) {
      if (p[off + i] != want[i]) {
        if (bad < 5)
          printf("%s size %zu salt %d: slot %d byte %zu is 0x%02x, expected 0x%02x\n", what, size, salt, r, off + i,
                 p[off + i], want[i]);
        bad++;
      }
    }
  }
  return bad;
}

/* One AllGather of size bytes per rank on comm, every byte checked.
 * Returns 1 when right. */
static int allgather_check(mscclppComm_t comm, int r, int n, int size, int salt, int verbose)
{
  size_t total = (size_t)n * (size_t)size;
  uint8_t* buf = (uint8_t*)malloc(total);
  REQUIRE(buf != NULL, "malloc(%zu)", total);
  memset(buf, 0xA5, total);
  fill_slot(buf + (size_t)r * size, r, (size_t)size, salt);
  double t0 = test_now();
  mscclppResult_t res = mscclppBootstrapAllGather(comm, buf, size);
  double dt = test_now() - t0;
  if (res != mscclppSuccess) {
    test_report_res(__FILE__, __LINE__, "mscclppBootstrapAllGather", res, mscclppSuccess, comm, 1);
    g_test_failures++;
    free(buf);
    return 0;
  }
  size_t bad = 0;
  for (int s = 0; s < n; s++)
    bad += check_slot(buf + (size_t)s * size, s, (size_t)size, salt, "allgather");
  free(buf);
  CHECK(bad == 0, "AllGather of %d bytes: %zu wrong bytes", size, bad);
  if (verbose && bad == 0)
    printf("ok   AllGather %d ranks x %d bytes (%.3f s)\n", n, size, dt);
  return bad == 0;
}

static void rank_size_check(mscclppComm_t comm, const char* what)
{
  int r = -1, s = -1;
  MCHECK_COMM(comm, mscclppCommRank(comm, &r));
  MCHECK_COMM(comm, mscclppCommSize(comm, &s));
  CHECK(r == rank, "%s: CommRank = %d, expected %d", what, r, rank);
  CHECK(s == nranks, "%s: CommSize = %d, expected %d", what, s, nranks);
  if (r == rank && s == nranks)
    printf("ok   %s: CommRank = %d, CommSize = %d\n", what, r, s);
}

static void sizes_check(mscclppComm_t comm, int big)
{
  const int sizes[] = {1, 4, 4096, 65536, 65537, 200001, (1 << 20) + 4099, 1 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    allgather_check(comm, rank, nranks, sizes[i], (int)i, 1);
  if (big)
    allgather_check(comm, rank, nranks, 64 << 20, 99, 1);
  double t0 = test_now();
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  printf("ok   Barrier (%.3f s)\n", test_now() - t0);
}

static void rounds_check(mscclppComm_t comm, int rounds, int salt)
{
  double t0 = test_now();
  int good = 0;
  for (int it = 0; it < rounds; it++) {
    good += allgather_check(comm, rank, nranks, 4, salt + it, 0);
    MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  }
  CHECK(good == rounds, "%d of %d rounds right", good, rounds);
  printf("ok   %d rounds of AllGather + Barrier (%.3f s)\n", rounds, test_now() - t0);
}

/* ---- threads ---- */
struct thread_arg
{
  int index;
  int failures;
  char msg[512];
};

static void* thread_main(void* p)
{
  struct thread_arg* a = (struct thread_arg*)p;
  mscclppComm_t comm = NULL;
  const char* addr = test_addr_plus(1 + a->index);
  mscclppResult_t res = mscclppCommInitRank(&comm, nranks, addr, rank);
  if (res != mscclppSuccess) {
    snprintf(a->msg, sizeof a->msg, "thread %d: mscclppCommInitRank(%s) = %s: %s", a->index, addr,
             mscclppGetErrorString(res), test_last_error(NULL));
    a->failures++;
    return NULL;
  }
  for (int it = 0; it < 20 && a->failures == 0; it++) {
    int size = 64 + a->index * 8 + it;
    size_t total = (size_t)nranks * size;
    uint8_t* buf = (uint8_t*)malloc(total);
    memset(buf, 0, total);
    fill_slot(buf + (size_t)rank * size, rank, (size_t)size, 1000 + a->index);
    res = mscclppBootstrapAllGather(comm, buf, size);
    if (res != mscclppSuccess) {
      snprintf(a->msg, sizeof a->msg, "thread %d iteration %d: AllGather = %s: %s", a->index, it,
               mscclppGetErrorString(res), test_last_error(comm));
      a->failures++;
    } else {
      for (int s = 0; s < nranks && a->failures == 0; s++) {
        const uint8_t* slot = buf + (size_t)s * size;
        for (int i = 0; i < size; i++) {
          uint8_t want[8];
          uint64_t x = pattern_word(s, (size_t)i / 8, size, 1000 + a->index);
          memcpy(want, &x, 8);
          if (slot[i] != want[i % 8]) {
            snprintf(a->msg, sizeof a->msg, "thread %d iteration %d: slot %d byte %d wrong", a->index, it, s, i);
            a->failures++;
            break;
          }
        }
      }
    }
    free(buf);
    if (a->failures == 0 && (res = mscclppBootstrapBarrier(comm)) != mscclppSuccess) {
      snprintf(a->msg, sizeof a->msg, "thread %d iteration %d: Barrier = %s: %s", a->index, it,
               mscclppGetErrorString(res), test_last_error(comm));
      a->failures++;
    }
  }
  res = mscclppCommDestroy(comm);
  if (res != mscclppSuccess && a->failures == 0) {
    snprintf(a->msg, sizeof a->msg, "thread %d: CommDestroy = %s", a->index, mscclppGetErrorString(res));
    a->failures++;
  }
  return NULL;
}

int main(void)
{
  test_init("bootstrap");
  rank = test_rank();
  nranks = test_nranks();
  const char* addr = test_addr();
  printf("rank %d of %d, root at %s\n", rank, nranks, addr);

  /* 1. by address */
  mscclppComm_t comm1 = NULL;
  double t0 = test_now();
  MCHECK(mscclppCommInitRank(&comm1, nranks, addr, rank));
  printf("ok   mscclppCommInitRank(%d, %s, %d) (%.3f s)\n", nranks, addr, rank, test_now() - t0);
  REQUIRE(comm1 != NULL, "InitRank succeeded but left comm NULL");
  rank_size_check(comm1, "InitRank comm");
  sizes_check(comm1, nranks == 2);
  rounds_check(comm1, 50, 200);

  /* 2. by unique id */
  mscclppUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) {
    MCHECK(mscclppGetUniqueId(&id));
    REQUIRE(test_publish_id("uid", &id) == 0, "publishing the unique id: %s", strerror(errno));
  } else {
    REQUIRE(test_fetch_id("uid", &id, 30) == 0, "no unique id from rank 0 within 30 s");
  }
  mscclppComm_t comm2 = NULL;
  t0 = test_now();
  MCHECK(mscclppCommInitRankFromId(&comm2, nranks, id, rank));
  printf("ok   mscclppCommInitRankFromId (%.3f s)\n", test_now() - t0);
  REQUIRE(comm2 != NULL && comm2 != comm1, "InitRankFromId gave %p (comm1 %p)", (void*)comm2, (void*)comm1);
  rank_size_check(comm2, "InitRankFromId comm");
  sizes_check(comm2, 0);

  /* 3. both alive, used alternately */
  int good = 0;
  for (int it = 0; it < 20; it++) {
    good += allgather_check(comm1, rank, nranks, 16 + it, 300 + it, 0);
    good += allgather_check(comm2, rank, nranks, 16 + it, 400 + it, 0);
    if (it % 5 == 0) {
      MCHECK_COMM(comm2, mscclppBootstrapBarrier(comm2));
      MCHECK_COMM(comm1, mscclppBootstrapBarrier(comm1));
    }
  }
  CHECK(good == 40, "two communicators alternately: %d of 40 right", good);
  if (good == 40)
    printf("ok   two communicators alive at once, 20 alternating rounds\n");
  MCHECK(mscclppCommDestroy(comm2));
  MCHECK(mscclppCommDestroy(comm1));
  printf("ok   both destroyed\n");

  /* 4. re-init at the same address right after destroy. Rank 0 (the root,
   * who binds the address) re-inits at once; the others first wait for rank
   * 0's destroy to be over, so that they cannot reach the old listener. */
  for (int gen = 0; gen < 3; gen++) {
    char marker[32];
    snprintf(marker, sizeof marker, "reinit.%d", gen);
    if (rank == 0)
      REQUIRE(test_publish(marker, "", 0) == 0, "publish %s", marker);
    else
      REQUIRE(test_wait_file(marker, 30) == 0, "rank 0 did not destroy in 30 s (%s)", marker);
    mscclppComm_t c = NULL;
    t0 = test_now();
    MCHECK(mscclppCommInitRank(&c, nranks, addr, rank));
    printf("ok   re-init %d at %s right after destroy (%.3f s)\n", gen, addr, test_now() - t0);
    allgather_check(c, rank, nranks, 100, 500 + gen, 1);
    MCHECK_COMM(c, mscclppBootstrapBarrier(c));
    MCHECK(mscclppCommDestroy(c));
  }

  /* 5. threads, one communicator each */
  enum { NTHREADS = 3 };
  pthread_t th[NTHREADS];
  struct thread_arg args[NTHREADS];
  t0 = test_now();
  for (int i = 0; i < NTHREADS; i++) {
    memset(&args[i], 0, sizeof args[i]);
    args[i].index = i;
    REQUIRE(pthread_create(&th[i], NULL, thread_main, &args[i]) == 0, "pthread_create");
  }
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].failures == 0, "%s", args[i].msg);
  }
  printf("ok   %d threads with a communicator each, 20 rounds (%.3f s)\n", NTHREADS, test_now() - t0);

  return test_finish();
}
