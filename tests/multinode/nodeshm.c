/*
 * nodeshm.c: the SHM data path inside each simulated node while the nodes
 * stay apart. Run by tests/multinode/cluster.sh, which places the ranks on
 * nodes (MSCCLPP_TEST_NODE, MSCCLPP_TEST_PLACEMENT) with a private /dev/shm
 * and /tmp per node and a distinct MSCCLPP_HOSTID.
 *
 *   nodeshm [--malloc] [--rounds N] [--chunk BYTES]
 *
 *  1. One communicator over all ranks (its bootstrap crosses the nodes over
 *     TCP).
 *  2. Privacy: every rank puts a marker into /dev/shm (shm_open) and /tmp;
 *     after a barrier each rank must see exactly the markers of its own
 *     node's ranks in both, none of another node's.
 *  3. SHM to a rank on another node is refused: mscclppConnect(..., SHM)
 *     to every such rank returns mscclppInvalidUsage with a message (on the
 *     communicator and process-wide), and leaves nothing declared behind.
 *  4. An allgather within each node over SHM: each rank connects to the
 *     other ranks of its node only, mscclppConnectionSetup (all ranks; a
 *     rank alone on its node declares nothing), then rounds of
 *     putWithSignal into every node peer's buffer and a wait per peer,
 *     every byte checked; with mscclppHostAlloc buffers (default) the peers'
 *     buffers must be mapped (remoteBuff set: the node's segment works).
 *  5. The per-rank results are gathered over the bootstrap and rank 0 prints
 *     one line per node.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../c/check.h"

static int rank, nranks, node, nnodes;
static int* nodeOf; /* by rank */

static uint64_t mix(uint64_t a, uint64_t b)
{
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b * 0xBF58476D1CE4E5B9ull + 0x632BE59BD9B4E019ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 29);
}

static unsigned char pattern(int r, int round, size_t i)
{
  return (unsigned char)(mix((uint64_t)r * 1000003u + (uint64_t)round, i >> 3) >> ((i & 7) * 8));
}

static void parse_placement(void)
{
  const char* s = getenv("MSCCLPP_TEST_PLACEMENT");
  REQUIRE(s != NULL && *s, "MSCCLPP_TEST_PLACEMENT is not set: run me with tests/multinode/cluster.sh");
  nodeOf = calloc((size_t)nranks, sizeof(int));
  nnodes = 0;
  for (int r = 0; r < nranks; r++) {
    char* end;
    long k = strtol(s, &end, 10);
    REQUIRE(end != s && k >= 0, "MSCCLPP_TEST_PLACEMENT '%s': no node for rank %d", getenv("MSCCLPP_TEST_PLACEMENT"),
            r);
    nodeOf[r] = (int)k;
    if (k + 1 > nnodes) nnodes = (int)k + 1;
    s = *end == ',' ? end + 1 : end;
  }
  node = nodeOf[rank];
  REQUIRE(node == test_env_int("MSCCLPP_TEST_NODE", -1), "placement says node %d, MSCCLPP_TEST_NODE %d", node,
          test_env_int("MSCCLPP_TEST_NODE", -1));
}

/* ---- 2. privacy of /dev/shm and /tmp ---- */

static const char* run_tag(void)
{
  /* the run's host id prefix "mn<ID>-node<k>" without the node: a marker of
   * an unrelated run never counts */
  static char tag[128];
  const char* h = getenv("MSCCLPP_HOSTID");
  const char* dash = h ? strrchr(h, '-') : NULL;
  snprintf(tag, sizeof tag, "%.*s", dash ? (int)(dash - h) : 0, h ? h : "");
  return tag;
}

/* Lists dir; for each marker "mscclpp-mnmark.<tag>.<node>.<rank>" sets
 * seen[rank] = 1 and checks it came from this node. Returns how many
 * markers of other nodes were visible. */
static int scan_markers(const char* dir, int* seen)
{
  char prefix[160];
  snprintf(prefix, sizeof prefix, "mscclpp-mnmark.%s.", run_tag());
  DIR* d = opendir(dir);
  REQUIRE(d != NULL, "opendir %s: %s", dir, strerror(errno));
  int foreign = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    int k = -1, r = -1;
    if (sscanf(e->d_name + strlen(prefix), "%d.%d", &k, &r) != 2 || r < 0 || r >= nranks) continue;
    seen[r] = 1;
    if (k != node) {
      printf("rank %d on node %d sees %s/%s of node %d\n", rank, node, dir, e->d_name, k);
      foreign++;
    }
  }
  closedir(d);
  return foreign;
}

static void privacy_check(mscclppComm_t comm)
{
  char name[200], path[300];
  snprintf(name, sizeof name, "mscclpp-mnmark.%s.%d.%d", run_tag(), node, rank);
  char shmName[210];
  snprintf(shmName, sizeof shmName, "/%s", name);
  int fd = shm_open(shmName, O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0, "shm_open(%s): %s", shmName, strerror(errno));
  close(fd);
  snprintf(path, sizeof path, "/tmp/%s", name);
  fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
  REQUIRE(fd >= 0, "open(%s): %s", path, strerror(errno));
  close(fd);
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));

  const char* dirs[2] = {"/dev/shm", "/tmp"};
  for (int i = 0; i < 2; i++) {
    int* seen = calloc((size_t)nranks, sizeof(int));
    int foreign = scan_markers(dirs[i], seen);
    int missing = 0;
    for (int r = 0; r < nranks; r++) {
      if (nodeOf[r] == node && !seen[r]) {
        printf("rank %d on node %d does not see the %s marker of rank %d of its own node\n", rank, node, dirs[i], r);
        missing++;
      }
    }
    CHECK(foreign == 0, "%d markers of other nodes visible in %s", foreign, dirs[i]);
    CHECK(missing == 0, "%d markers of this node's ranks missing from %s", missing, dirs[i]);
    if (foreign == 0 && missing == 0)
      printf("ok   %s is the node's own: the markers of node %d's ranks only\n", dirs[i], node);
    free(seen);
  }
  /* anything else there is the library's or another test's: name it */
  DIR* d = opendir("/dev/shm");
  struct dirent* e;
  while (d != NULL && (e = readdir(d)) != NULL)
    if (e->d_name[0] != '.' && strncmp(e->d_name, "mscclpp-mnmark.", 15) != 0)
      printf("note: /dev/shm/%s exists on node %d\n", e->d_name, node);
  if (d != NULL) closedir(d);

  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  CHECK(shm_unlink(shmName) == 0, "shm_unlink(%s): %s", shmName, strerror(errno));
  CHECK(unlink(path) == 0, "unlink(%s): %s", path, strerror(errno));
}

/* ---- 3. SHM across nodes is refused ---- */

static void cross_node_refused(mscclppComm_t comm, void* buf, size_t bytes)
{
  int n = 0;
  for (int p = 0; p < nranks; p++) {
    if (nodeOf[p] == node) continue;
    test_prime(comm, 1);
    mscclppResult_t r = mscclppConnect(comm, p, 0, buf, bytes, mscclppTransportSHM, NULL);
    char expr[96];
    snprintf(expr, sizeof expr, "mscclppConnect(rank %d on node %d, SHM)", p, nodeOf[p]);
    if (test_expect_res(__FILE__, __LINE__, expr, r, mscclppInvalidUsage, comm, 1)) {
      CHECK(test_mentions_rank(test_last_error(comm), p), "the message does not name rank %d: \"%s\"", p,
            test_last_error(comm));
    }
    n++;
  }
  if (n == 0) printf("ok   no rank on another node (one node)\n");
}

/* ---- 4. allgather within the node ---- */

int main(int argc, char** argv)
{
  test_init("nodeshm");
  int useMalloc = 0, rounds = 20;
  size_t chunk = 256 << 10;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--malloc") == 0)
      useMalloc = 1;
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc)
      chunk = (size_t)atol(argv[++i]);
    else {
      fprintf(stderr, "usage: nodeshm [--malloc] [--rounds N] [--chunk BYTES]\n");
      return 2;
    }
  }
  rank = test_rank();
  nranks = test_nranks();
  parse_placement();

  /* the node's ranks, in rank order; slot i of the buffer is local[i]'s */
  int* local = calloc((size_t)nranks, sizeof(int));
  int nlocal = 0, me = -1;
  for (int r = 0; r < nranks; r++) {
    if (nodeOf[r] != node) continue;
    if (r == rank) me = nlocal;
    local[nlocal++] = r;
  }
  printf("rank %d of %d on node %d of %d (%d ranks here), host id %s, root %s\n", rank, nranks, node, nnodes, nlocal,
         getenv("MSCCLPP_HOSTID"), test_addr());

  mscclppComm_t comm = NULL;
  double t0 = test_now();
  MCHECK(mscclppCommInitRank(&comm, nranks, test_addr(), rank));
  printf("ok   mscclppCommInitRank across %d nodes (%.3f s)\n", nnodes, test_now() - t0);

  privacy_check(comm);

  /* two halves alternate between rounds, so a fast rank's next round never
   * overwrites what a slow peer still checks */
  size_t half = chunk * (size_t)nlocal, bytes = 2 * half;
  unsigned char* buf = NULL;
  if (useMalloc)
    buf = malloc(bytes);
  else
    MCHECK(mscclppHostAlloc((void**)&buf, bytes));
  REQUIRE(buf != NULL, "no buffer of %zu bytes", bytes);
  memset(buf, 0, bytes);

  cross_node_refused(comm, buf, bytes);

  mscclppDevConn_t** conn = calloc((size_t)nlocal, sizeof *conn);
  for (int i = 0; i < nlocal; i++)
    if (i != me) MCHECK_COMM(comm, mscclppConnect(comm, local[i], 0, buf, bytes, mscclppTransportSHM, NULL));
  MCHECK_COMM(comm, mscclppConnectionSetup(comm));
  mscclppDevConn_t* all = NULL;
  int nconn = -1;
  MCHECK_COMM(comm, mscclppGetAllDeviceConnections(comm, &all, &nconn));
  CHECK(nconn == nlocal - 1, "%d connections, want %d (the failed cross-node Connects must declare nothing)", nconn,
        nlocal - 1);
  for (int i = 0; i < nlocal; i++) {
    if (i == me) continue;
    MCHECK_COMM(comm, mscclppGetDeviceConnection(comm, local[i], 0, &conn[i]));
    if (!useMalloc)
      CHECK(conn[i]->remoteBuff != NULL, "rank %d's mscclppHostAlloc buffer is not mapped (remoteBuff NULL)", local[i]);
  }
  MCHECK_COMM(comm, mscclppProxyLaunch(comm));

  size_t wrong = 0;
  t0 = test_now();
  for (int it = 0; it < rounds; it++) {
    unsigned char* base = buf + (size_t)(it & 1) * half;
    size_t off = (size_t)(it & 1) * half + (size_t)me * chunk;
    for (size_t i = 0; i < chunk; i++) base[(size_t)me * chunk + i] = pattern(rank, it, i);
    for (int k = 1; k < nlocal; k++) {
      int i = (me + k) % nlocal;
      mscclppResult_t r = mscclppDevConnPutWithSignal(conn[i], off, off, chunk);
      REQUIRE(r == mscclppSuccess, "round %d: put to rank %d: %s: %s", it, local[i], mscclppGetErrorString(r),
              test_last_error(comm));
    }
    for (int k = 1; k < nlocal; k++) {
      int i = (me + nlocal - k) % nlocal;
      mscclppResult_t r = mscclppDevConnWaitTimeout(conn[i], 30000);
      REQUIRE(r == mscclppSuccess, "round %d: wait for rank %d: %s: %s", it, local[i], mscclppGetErrorString(r),
              test_last_error(comm));
    }
    for (int i = 0; i < nlocal; i++) {
      const unsigned char* s = base + (size_t)i * chunk;
      for (size_t b = 0; b < chunk; b++) {
        if (s[b] != pattern(local[i], it, b)) {
          if (wrong < 5)
            printf("round %d: slot of rank %d byte %zu is 0x%02x, want 0x%02x\n", it, local[i], b, s[b],
                   pattern(local[i], it, b));
          wrong++;
        }
      }
    }
  }
  double dt = test_now() - t0;
  CHECK(wrong == 0, "%zu wrong bytes in the node's allgather", wrong);
  if (wrong == 0)
    printf("ok   allgather over SHM within node %d: %d ranks, %d rounds of %zu bytes per rank (%.3f s)\n", node,
           nlocal, rounds, chunk, dt);

  /* 5. everybody's result, over the bootstrap (across the nodes) */
  uint64_t* res = calloc((size_t)nranks * 2, sizeof(uint64_t));
  res[2 * rank] = (uint64_t)g_test_failures;
  res[2 * rank + 1] = (uint64_t)nlocal;
  MCHECK_COMM(comm, mscclppBootstrapAllGather(comm, res, 2 * sizeof(uint64_t)));
  if (rank == 0) {
    for (int k = 0; k < nnodes; k++) {
      uint64_t fails = 0, cnt = 0;
      for (int r = 0; r < nranks; r++)
        if (nodeOf[r] == k) {
          fails += res[2 * r];
          cnt++;
        }
      printf("node %d: %llu ranks, %llu failed checks\n", k, (unsigned long long)cnt, (unsigned long long)fails);
    }
  }
  free(res);

  MCHECK_COMM(comm, mscclppProxyStop(comm));
  MCHECK(mscclppCommDestroy(comm));
  if (useMalloc)
    free(buf);
  else
    MCHECK(mscclppHostFree(buf));
  free(conn);
  free(local);
  free(nodeOf);
  return test_finish();
}
