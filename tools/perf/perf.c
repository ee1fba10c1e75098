/*
 * perf.c: an allgather bandwidth tool over SHM connections, in the manner of
 * nccl-tests' all_gather_perf, for libmscclpp in host mode.
 *
 *   perf [nccl-tests flags] [--nranks N] [--malloc] [--id-file PATH [--job-id ID]]
 *        [--transport NAME] [-F results.csv] [-J results.json]
 *
 * nccl-tests' flags, with their meanings (long forms too, as in nccl-tests):
 *   -b, -e   the smallest and largest size: the bytes gathered in all, as
 *            nccl-tests counts an all_gather (size = nranks * count *
 *            element size); K, M, G suffixes are powers of 1024. Defaults 8
 *            and 256M.
 *   -f       each size is the last one times this factor (default 2); 1 or
 *            less: each size is the last one plus -i instead
 *   -i       the step in bytes when -f is 1 (default 1M; K/M/G suffixes)
 *   -n       timed iterations per size (default 20)
 *   -w       warm-up iterations per size (default 5)
 *            Without -n (or -w) sizes above 25 MiB run fewer iterations
 *            (about 512 MiB gathered per size, at least 2) and one warm-up;
 *            the iters column shows what each row ran; a -n or -w given is
 *            always used as given.
 *   -m       aggregated iterations: each timed iteration issues m allgathers
 *            back to back (default 1); time is per allgather
 *   -c       1 (default): check every element of every slot after each
 *            size, and fail on any wrong one; 0: no check (#wrong is N/A).
 *            nccl-tests' N check iterations: any N > 0 checks once
 *   -d       the element type: int8 uint8 int32 uint32 int64 uint64 half
 *            float double bfloat16 (default float) or all (one pass each);
 *            count is in elements, sizes are multiples of nranks elements
 *   -o, -r   reduction op and root: accepted (sum prod max min avg mulsum
 *            all; a rank), but an allgather has neither: like nccl-tests'
 *            all_gather_perf the rows read redop "none" and root -1, and a
 *            header line says so
 *   -a       the time a row reports from the ranks' mean times per
 *            collective: 0 rank 0's, 1 the average (default), 2 the
 *            minimum, 3 the maximum
 *   -z       1: a barrier (mscclppBootstrapBarrier) after each collective
 *   -G N     host mode has no CUDA graph: the timed loop is run N times
 *            over (as N graph launches would) and time divided by N
 *   -p       parallel init: accepted; one rank per process, so it changes
 *            nothing (a header line says so)
 *   -C, -y   report_cputime (the column reads "cputime"; the same figure:
 *            a collective completes on the CPU) and stream_null (no
 *            streams in host mode): accepted
 *   -F FILE  also write the rows to FILE as CSV (rank 0; one header row,
 *            see perf_report.h)
 *   -T       seconds before perf kills the local ranks it started (600)
 *   -t, -g   threads per process and GPUs per thread: only 1 is accepted
 * Our own options:
 *   -J FILE, --json FILE  also write the run as one JSON object to FILE
 *   --nranks N   how many local ranks perf starts (default 4; a launcher's
 *                count wins). tests/c/perf.sh passes its NRANKS argument here.
 *   --malloc     plain malloc buffers instead of mscclppHostAlloc
 *   --id-file P  hand the unique id over through a file (perf_idfile.h):
 *                P.JOB, created exclusively (never through a link) with
 *                mode 0600 by rank 0, kept fresh until every rank joined,
 *                then removed; rank 0 refuses a link, another user's file or
 *                another live job's, and readers take only a regular 0600
 *                file of their own user written after they started and not
 *                future-dated (each refusal says why)
 *   --job-id ID  the JOB of --id-file (also MSCCLPP_PERF_JOB_ID; default the
 *                launcher's: SLURM_JOB_ID.SLURM_STEP_ID, PMIX_NAMESPACE,
 *                Open MPI's job id)
 *   --transport NAME  the transport to peers on other nodes (default
 *                ethernet; also MSCCLPP_PERF_TRANSPORT): ethernet
 *                (mscclppTransportEthernet, the extension value 3), ib
 *                (device from MSCCLPP_PERF_IB_DEV, default mlx5_0), shm, p2p,
 *                or a number. Peers on this rank's node always use SHM. The
 *                node of every rank is its MSCCLPP_HOSTID, else host name and
 *                boot id (what the library uses), gathered over the bootstrap.
 *                When mscclppConnect refuses that transport (e.g. ib with
 *                no such RDMA device here), every rank says why on one line
 *                (the library's message) and perf exits 3.
 *
 * Ranks and the unique id (perf_spawn.h, perf_kvs.h):
 *  - `mpirun -np 4 perf ...` (Open MPI) and `srun -n 4 perf ...` (Slurm with
 *    MpiDefault=pmix, or `srun --mpi=pmix`): rank, size and rank 0's unique
 *    id through the launcher's PMIx store; `srun --mpi=pmi2`: through PMI-2.
 *    perf loads libpmix.so.2 / libpmi2.so.0 at run time; nothing else to
 *    set. On a host with fewer cores than ranks: `mpirun --oversubscribe`,
 *    `srun -O`.
 *  - other launchers give rank and size in the environment
 *    (OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS); the
 *    id then comes from --id-file, or MSCCLPP_COMM_ID=ip:port names rank 0's
 *    address for every rank;
 *  - tests/c/launch (MSCCLPP_TEST_RANK / _NRANKS / _ADDR);
 *  - otherwise perf starts --nranks local ranks itself (posix_spawn of its
 *    own binary), waits for them, and kills the rest if one fails or after
 *    -T seconds.
 *
 * Sizes: minbytes, then each step as above while the size is at most
 * maxbytes; each rank's chunk (count elements) is size / nranks (at least
 * one element), and a size whose chunk equals the last one is skipped. Each
 * size runs twice: out of place (each rank's chunk starts in a separate send
 * buffer: copied into its slot of the receive buffer, then sent) and in place
 * (the chunk already sits at its slot). Each: poison every peer's slot (and
 * out of place also its own), warm-up, timed iterations, then every element
 * of every slot is checked against the pattern its owner wrote (with -c 1).
 * Every rank puts its chunk straight into every peer's buffer
 * (putWithSignal) and waits for every peer's signal: "direct-memcpy" when
 * the peers' buffers are mapped (mscclppHostAlloc, the default),
 * "direct-vm_writev" for plain malloc buffers (--malloc). algbw = size /
 * time; busbw = algbw * (N-1)/N. The closing "Avg bus bandwidth" averages
 * busbw over both column sets, as nccl-tests does.
 * Exit status: 0 only when no element was wrong and nothing failed; 2 for bad
 * options or no way to learn the unique id; 3 when the library does not
 * provide the cross-node transport.
 */
#define _GNU_SOURCE
#include <mscclpp.h>

#include "perf_idfile.h"
#include "perf_kvs.h"
#include "perf_opts.h"
#include "perf_report.h"
#include "perf_spawn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <unistd.h>

static mscclppComm_t comm = NULL;
static char idSource[4400] = "";

#define CK(call)                                                                                          \
  do {                                                                                                    \
    mscclppResult_t r_ = (call);                                                                          \
    if (r_ != mscclppSuccess) {                                                                           \
      fprintf(stderr, "perf rank %d: %s:%d: %s: %s (%s)\n", rank, __FILE__, __LINE__, #call,              \
              mscclppGetErrorString(r_), comm ? mscclppGetLastError(comm) : mscclppGetLastError(NULL));   \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

/* ---- the data pattern: byte i of the chunk rank r sends at chunk size s ---- */

static inline uint64_t mix(uint64_t seed, uint64_t w)
{
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + w * 0xBF58476D1CE4E5B9ull + 0x632BE59BD9B4E019ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 29;
  return z;
}

static void fill(unsigned char* p, size_t n, uint64_t seed)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = mix(seed, i >> 3);
    memcpy(p + i, &w, 8);
  }
  for (; i < n; i++) p[i] = (unsigned char)(mix(seed, i >> 3) >> ((i & 7) * 8));
}

/* wrong elements of ws bytes (1, 2, 4 or 8: they tile the 8-byte words) */
static long long count_wrong(const unsigned char* p, size_t n, uint64_t seed, size_t ws)
{
  long long wrong = 0;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = mix(seed, i >> 3);
    unsigned char want[8];
    memcpy(want, &w, 8);
    size_t m = n - i < 8 ? n - i : 8;
    if (memcmp(p + i, want, m) == 0) continue;
    for (size_t e = 0; e < m; e += ws) wrong += memcmp(p + i + e, want + e, ws) != 0;
  }
  return wrong;
}

static uint64_t seed_of(int r, size_t chunk, int inPlace) { return mix(0x5eed0000ull + (uint64_t)r * 2 + inPlace, chunk); }

/* The size after size: times factor when factor > 1, else plus step; 0 past SIZE_MAX. */
static size_t next_size(size_t size, double factor, size_t step)
{
  double next = factor > 1 ? (double)size * factor : (double)size + (double)step;
  if (next >= 18446744073709551615.0) return 0;
  size_t n = (size_t)next;
  return n > size ? n : size + 1;
}

/* bytes of a rank's chunk at size want for elements of ws bytes (at least one element) */
static size_t chunk_of(size_t want, size_t ws)
{
  size_t c = want / ws / (size_t)nranks;
  return (c < 1 ? 1 : c) * ws;
}

/* ---- the unique id ---- */

static void init_from_id(const struct perf_opts* o)
{
  mscclppUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) CK(mscclppGetUniqueId(&id));
  char job[256], err[512];
  if (o->idFile != NULL) {
    idfile_job(o->jobId, job, sizeof job);
    snprintf(idSource, sizeof idSource, "the file %s%s%s", o->idFile, *job ? "." : "", job);
    if (rank == 0 ? idfile_publish(o->idFile, job, nranks, &id) : idfile_read(o->idFile, job, nranks, rank, 120, &id))
      exit(1);
  } else if (kvs.kind != KVS_NONE) {
    kvs_job(job, sizeof job);
    snprintf(idSource, sizeof idSource, "%s key-value store (job %s)", kvs_name(kvs.kind), job);
    if (kvs_share_id(rank, &id, err, sizeof err) != 0) {
      fprintf(stderr, "perf rank %d: %s\n", rank, err);
      exit(1);
    }
  } else if (nranks > 1) {
    fprintf(stderr,
            "perf rank %d of %d (launcher: %s): no way to learn rank 0's unique id: run under a launcher with PMIx "
            "(Open MPI's mpirun, srun --mpi=pmix) or PMI-2 (srun --mpi=pmi2), or pass --id-file PATH on a file "
            "system every rank sees, or set MSCCLPP_COMM_ID=ip:port for every rank\n",
            rank, nranks, launcherName);
    exit(2);
  } else {
    snprintf(idSource, sizeof idSource, "mscclppGetUniqueId (one rank)");
  }
  CK(mscclppCommInitRankFromId(&comm, nranks, id, rank));
  if (rank == 0 && o->idFile != NULL) idfile_done();
}

static void init_comm(const struct perf_opts* o)
{
  const char* addr = getenv("MSCCLPP_TEST_ADDR");
  if (addr == NULL || *addr == '\0') addr = getenv("MSCCLPP_COMM_ID");
  if (addr != NULL && *addr != '\0') {
    snprintf(idSource, sizeof idSource, "rank 0's address %s", addr);
    CK(mscclppCommInitRank(&comm, nranks, addr, rank));
    return;
  }
  if (o->idFile == NULL && getenv("MSCCLPP_PERF_ID_FILE") != NULL && *getenv("MSCCLPP_PERF_ID_FILE"))
    ((struct perf_opts*)o)->idFile = getenv("MSCCLPP_PERF_ID_FILE");
  init_from_id(o);
}

/* ---- nodes and connections ---- */

/* The transport to peers on other nodes. mscclppTransportEthernet is an
 * extension value (3, after IB = 2) that older headers do not declare. */
static mscclppTransport_t crossTransport = mscclppTransportEthernet;
static const char* crossName = "ethernet";

static int parse_transport(const char* s)
{
  static const struct { const char* name; int value; } names[] = {
    {"ethernet", 3}, {"eth", 3}, {"ib", 2}, {"shm", 1}, {"p2p", 0}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcasecmp(s, names[i].name) == 0) {
      crossTransport = (mscclppTransport_t)names[i].value;
      crossName = names[i].value == 3 ? "ethernet" : names[i].name;
      return 1;
    }
  }
  char* end;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v > 255) return 0;
  crossTransport = (mscclppTransport_t)v;
  crossName = s;
  return 1;
}

enum { HOSTKEY_BYTES = 256 };

/* This process's node identity, as the library decides it: MSCCLPP_HOSTID,
 * else the host name and the boot id. */
static void host_key(char* out)
{
  memset(out, 0, HOSTKEY_BYTES);
  const char* h = getenv("MSCCLPP_HOSTID");
  if (h != NULL && *h != '\0') {
    snprintf(out, HOSTKEY_BYTES, "%s", h);
    return;
  }
  struct utsname u;
  char boot[64] = "";
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f != NULL) {
    if (fgets(boot, sizeof boot, f) == NULL) boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  snprintf(out, HOSTKEY_BYTES, "%s/%s", uname(&u) == 0 ? u.nodename : "?", boot);
}

static mscclppDevConn_t** conn; /* by peer rank */
static int nnodes = 1;
static char algo[64] = "local";

/* SHM to the ranks of this node, crossTransport to the others; sets nnodes and algo */
static void connect_all(unsigned char* buf, size_t bufBytes)
{
  conn = calloc((size_t)nranks, sizeof *conn);
  char* keys = calloc((size_t)nranks, HOSTKEY_BYTES);
  host_key(keys + (size_t)rank * HOSTKEY_BYTES);
  CK(mscclppBootstrapAllGather(comm, keys, HOSTKEY_BYTES));
  nnodes = 0;
  for (int p = 0; p < nranks; p++) {
    int first = 1;
    for (int q = 0; q < p && first; q++) first = memcmp(keys + (size_t)q * HOSTKEY_BYTES, keys + (size_t)p * HOSTKEY_BYTES, HOSTKEY_BYTES) != 0;
    nnodes += first;
  }
  const char* ibDev = getenv("MSCCLPP_PERF_IB_DEV");
  if (ibDev == NULL || *ibDev == '\0') ibDev = "mlx5_0";
  int nremote = 0, nlocal = 0;
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    if (memcmp(keys + (size_t)p * HOSTKEY_BYTES, keys + (size_t)rank * HOSTKEY_BYTES, HOSTKEY_BYTES) == 0) {
      nlocal++;
      CK(mscclppConnect(comm, p, 0, buf, bufBytes, mscclppTransportSHM, NULL));
      continue;
    }
    nremote++;
    mscclppResult_t r = mscclppConnect(comm, p, 0, buf, bufBytes, crossTransport,
                                       crossTransport == mscclppTransportIB ? ibDev : NULL);
    if (r != mscclppSuccess) {
      fprintf(stderr, "perf rank %d: cannot connect to rank %d over the cross-node transport %s (%d): %s: %s\n", rank,
              p, crossName, (int)crossTransport, mscclppGetErrorString(r), mscclppGetLastError(comm));
      exit(3);
    }
  }
  free(keys);
  CK(mscclppConnectionSetup(comm));
  if (nranks > 1) snprintf(algo, sizeof algo, "direct-memcpy");
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    CK(mscclppGetDeviceConnection(comm, p, 0, &conn[p]));
    if (conn[p]->remoteBuff == NULL && nremote == 0) snprintf(algo, sizeof algo, "direct-vm_writev");
  }
  if (nremote > 0) snprintf(algo, sizeof algo, "direct-%s%s", nlocal > 0 ? "shm+" : "", crossName);
}

/* ---- the benchmark ---- */

static void wait_peer(int p, const char* when)
{
  mscclppResult_t r = mscclppDevConnWaitTimeout(conn[p], 60000);
  if (r != mscclppSuccess) {
    fprintf(stderr, "perf rank %d: waiting for rank %d (%s): %s: %s\n", rank, p, when, mscclppGetErrorString(r),
            mscclppGetLastError(comm));
    exit(1);
  }
}

/* One allgather: out of place, the chunk first goes from send to its slot. */
static void allgather_once(unsigned char* buf, const unsigned char* send, size_t chunk, int inPlace, int blocking)
{
  size_t off = (size_t)rank * chunk;
  if (!inPlace) memcpy(buf + off, send, chunk);
  for (int k = 1; k < nranks; k++) {
    int p = (rank + k) % nranks;
    mscclppResult_t r = mscclppDevConnPutWithSignal(conn[p], off, off, chunk);
    if (r != mscclppSuccess) {
      fprintf(stderr, "perf rank %d: put of %zu bytes to rank %d: %s: %s\n", rank, chunk, p, mscclppGetErrorString(r),
              mscclppGetLastError(comm));
      exit(1);
    }
  }
  for (int k = 1; k < nranks; k++) wait_peer((rank + nranks - k) % nranks, "allgather");
  if (blocking) CK(mscclppBootstrapBarrier(comm));
}

struct phase {
  unsigned char *buf, *send;
  size_t chunk, ws;
  int inPlace, iters, warmup;
};

/* One column set: prepare, warm up, time, check; this rank's seconds per
 * collective and its wrong elements (-1 without -c) through *dt and *wrong. */
static void run_phase(const struct perf_opts* o, const struct phase* ph, double* dt, long long* wrong)
{
  size_t chunk = ph->chunk, mine = (size_t)rank * chunk;
  if (o->check) {
    for (int p = 0; p < nranks; p++)
      if (p != rank || !ph->inPlace) memset(ph->buf + (size_t)p * chunk, 0xEE, chunk);
    fill(ph->inPlace ? ph->buf + mine : ph->send, chunk, seed_of(rank, chunk, ph->inPlace));
  }
  CK(mscclppBootstrapBarrier(comm));
  for (int i = 0; i < ph->warmup; i++) allgather_once(ph->buf, ph->send, chunk, ph->inPlace, o->blocking);
  CK(mscclppBootstrapBarrier(comm));
  int launches = o->graph > 0 ? o->graph : 1;
  double t0 = now();
  for (int g = 0; g < launches; g++)
    for (int i = 0; i < ph->iters; i++)
      for (int a = 0; a < o->agg; a++) allgather_once(ph->buf, ph->send, chunk, ph->inPlace, o->blocking);
  *dt = (now() - t0) / ((double)launches * ph->iters * o->agg);
  *wrong = -1;
  if (o->check) {
    *wrong = 0;
    for (int p = 0; p < nranks; p++)
      *wrong += count_wrong(ph->buf + (size_t)p * chunk, chunk, seed_of(p, chunk, ph->inPlace), ph->ws);
  }
  mscclppResult_t async = mscclppSuccess;
  CK(mscclppCommGetAsyncError(comm, &async));
  if (async != mscclppSuccess) {
    fprintf(stderr, "perf rank %d: async error at chunk %zu: %s: %s\n", rank, chunk, mscclppGetErrorString(async),
            mscclppGetLastError(comm));
    *wrong = *wrong < 0 ? 1 : *wrong + 1;
  }
  if (*wrong > 0) fprintf(stderr, "perf rank %d: %lld wrong elements at chunk %zu bytes\n", rank, *wrong, chunk);
}

/* Every rank's time and wrong count to every rank: -a's time, the sum of wrongs. */
static void combine(const struct perf_opts* o, size_t size, double dt, long long wrong, struct perf_half* h)
{
  struct { double t; long long w; } * all = calloc((size_t)nranks, sizeof *all);
  all[rank].t = dt;
  all[rank].w = wrong;
  CK(mscclppBootstrapAllGather(comm, all, (int)sizeof *all));
  double t = all[0].t; /* -a 0: rank 0's */
  long long w = -1;     /* -1: nobody checked and nothing failed */
  for (int p = 1; p < nranks; p++) {
    if (o->average == 1) t += all[p].t;
    if (o->average == 2 && all[p].t < t) t = all[p].t;
    if (o->average == 3 && all[p].t > t) t = all[p].t;
  }
  for (int p = 0; p < nranks; p++)
    if (all[p].w >= 0) w = (w < 0 ? 0 : w) + all[p].w;
  if (o->average == 1) t /= nranks;
  free(all);
  h->timeUs = t * 1e6;
  h->algbw = t > 0 ? (double)size / t / 1e9 : 0;
  h->busbw = h->algbw * (double)(nranks - 1) / (double)nranks;
  h->wrong = w;
}

/* ---- the header lines (rank 0) ---- */

static void print_header(const struct perf_opts* o, const char* bufKind)
{
  static const char* const avgNames[] = {"rank 0's time", "the average over the ranks", "the minimum over the ranks",
                                         "the maximum over the ranks"};
  int version = 0;
  mscclppGetVersion(&version);
  if (nnodes > 1)
    printf("# mscclpp all_gather_perf: host mode over SHM within a node and %s across %d nodes, library version %d\n",
           crossName, nnodes, version);
  else
    printf("# mscclpp all_gather_perf: host mode over SHM, library version %d\n", version);
  char step[64];
  if (o->factor > 1)
    snprintf(step, sizeof step, "%g(factor)", o->factor);
  else
    snprintf(step, sizeof step, "%zu(bytes)", o->stepBytes);
  printf("# nranks %d (pid %d is rank 0) nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d "
         "iters: %d agg iters: %d validation: %d graph: %d\n",
         nranks, (int)getpid(), o->minBytes, o->maxBytes, step, o->warmup, o->iters, o->agg, o->check, o->graph);
  printf("# launcher: %s; unique id: %s\n", launcherName, idSource);
  printf("# buffers: %s; algorithm: %s (each rank puts its chunk into every peer's buffer)\n", bufKind, algo);
  printf("# %s: %s (-a %d) of each rank's mean time per collective; algbw = size / time; busbw = algbw * (%d-1)/%d\n",
         o->cputime ? "cputime" : "time", avgNames[o->average], o->average, nranks, nranks);
  printf("# out-of-place: each rank's chunk starts in its own send buffer; in-place: it starts at its slot of the "
         "receive buffer\n");
  if (!o->itersGiven || !o->warmupGiven)
    printf("# iters: the timed iterations of each row; without -n sizes above 25 MiB run fewer (512 MiB gathered per "
           "size, at least 2)%s\n", o->warmupGiven ? "" : ", without -w one warm-up");
  if (o->rootGiven || strcmp(o->op, "sum") != 0 || o->root != 0)
    printf("# -o %s -r %d: an allgather has neither a reduction nor a root; like nccl-tests, redop reads none and root "
           "-1\n", o->op, o->root);
  if (o->blocking) printf("# Blocking Enabled: a barrier after each collective\n");
  if (o->parallel) printf("# Parallel Init: one rank per process, so -p 1 changes nothing\n");
  if (o->graph > 0)
    printf("# -G %d: host mode has no CUDA graph; the timed loop runs %d times over and time is divided by %d\n",
           o->graph, o->graph, o->graph);
  if (o->streamNull) printf("# -y 1: host mode has no streams; accepted, changes nothing\n");
  if (o->csv) printf("# Writing results to file: %s (CSV)\n", o->csv);
  if (o->json) printf("# Writing results to file: %s (JSON)\n", o->json);
}

static void json_params(const struct perf_opts* o, char* out, size_t len)
{
  snprintf(out, len,
           "\"minbytes\": %zu, \"maxbytes\": %zu, \"stepbytes\": %zu, \"stepfactor\": %g, \"iters\": %d, "
           "\"warmup_iters\": %d, \"agg_iters\": %d, \"check\": %d, \"average\": %d, \"blocking\": %d, "
           "\"cudagraph\": %d, \"parallel_init\": %d, \"op\": \"%s\", \"root\": %d, \"algorithm\": \"%s\", "
           "\"launcher\": \"%s\"",
           o->minBytes, o->maxBytes, o->stepBytes, o->factor, o->iters, o->warmup, o->agg, o->check, o->average,
           o->blocking, o->graph, o->parallel, o->op, o->root, algo, launcherName);
}

/* the largest chunk in bytes over the sizes and types */
static size_t top_chunk(const struct perf_opts* o)
{
  size_t top = 8;
  for (int t = 0; t < o->ntypes; t++)
    for (size_t s = o->minBytes; s != 0 && s <= o->maxBytes; s = next_size(s, o->factor, o->stepBytes)) {
      size_t c = chunk_of(s, (size_t)perf_types[o->types[t]].bytes);
      if (c > top) top = c;
    }
  return top;
}

/* Every size of one type: both column sets, one row each; the bus bandwidth sum and count through busSum/nBus. */
static long long run_type(const struct perf_opts* o, struct perf_report* rep, unsigned char* buf, unsigned char* send,
                          int type, double* busSum, int* nBus)
{
  long long wrongTotal = 0;
  size_t ws = (size_t)perf_types[type].bytes, lastChunk = 0;
  for (size_t want = o->minBytes; want != 0 && want <= o->maxBytes; want = next_size(want, o->factor, o->stepBytes)) {
    size_t chunk = chunk_of(want, ws);
    if (chunk == lastChunk) continue;
    lastChunk = chunk;
    size_t size = chunk * (size_t)nranks, budget = (size_t)512 << 20;
    struct phase ph = {buf, send, chunk, ws, 0, o->iters, o->warmup};
    if (!o->itersGiven && (size_t)ph.iters * size > budget) ph.iters = budget / size < 2 ? 2 : (int)(budget / size);
    if (!o->warmupGiven && ph.warmup > 0 && (size_t)ph.warmup * size > budget / 4) ph.warmup = 1;
    struct perf_row row = {perf_types[type].name, size, chunk / ws, ph.iters, {{0, 0, 0, 0}, {0, 0, 0, 0}}};
    for (ph.inPlace = 0; ph.inPlace < 2; ph.inPlace++) {
      double dt;
      long long wrong;
      run_phase(o, &ph, &dt, &wrong);
      combine(o, size, dt, wrong, &row.h[ph.inPlace]);
      if (row.h[ph.inPlace].wrong > 0) wrongTotal += row.h[ph.inPlace].wrong;
      *busSum += row.h[ph.inPlace].busbw;
      (*nBus)++;
    }
    if (rank == 0) report_row(rep, &row);
  }
  return wrongTotal;
}

int main(int argc, char** argv)
{
  struct perf_opts o;
  parse_opts(&o, argc, argv);
  const char* envTransport = getenv("MSCCLPP_PERF_TRANSPORT");
  if (o.transport == NULL && envTransport != NULL && *envTransport != '\0') o.transport = envTransport;
  if (o.transport != NULL && !parse_transport(o.transport))
    bad_option("--transport", o.transport, "want ethernet, ib, shm, p2p or a number");

  /* No library call may come before this point: the parent only spawns. */
  if (!from_launcher()) return spawn_ranks(o.nlocal, argv, o.timeout);

  setvbuf(stdout, NULL, _IOLBF, 0);
  init_comm(&o);

  size_t topChunk = top_chunk(&o), bufBytes = topChunk * (size_t)nranks;
  unsigned char *buf = NULL, *send = malloc(topChunk);
  if (o.useMalloc)
    buf = malloc(bufBytes);
  else
    CK(mscclppHostAlloc((void**)&buf, bufBytes));
  if (buf == NULL || send == NULL) {
    fprintf(stderr, "perf rank %d: allocating %zu + %zu bytes failed\n", rank, bufBytes, topChunk);
    return 1;
  }
  memset(buf, 0, bufBytes);
  memset(send, 0, topChunk);
  connect_all(buf, bufBytes);
  CK(mscclppProxyLaunch(comm));

  struct perf_report rep = {o.cputime ? "cputime" : "time", o.csv, o.json, NULL, 0, 0};
  if (rank == 0) {
    print_header(&o, o.useMalloc ? "malloc" : "mscclppHostAlloc");
    report_header(&rep);
  }
  long long totalWrong = 0;
  double busSum = 0;
  int nBus = 0;
  for (int t = 0; t < o.ntypes; t++) totalWrong += run_type(&o, &rep, buf, send, o.types[t], &busSum, &nBus);

  CK(mscclppProxyStop(comm));
  CK(mscclppCommDestroy(comm));
  comm = NULL;
  if (o.useMalloc)
    free(buf);
  else
    CK(mscclppHostFree(buf));
  free(send);
  free(conn);
  kvs_close();
  int failed = totalWrong != 0;
  if (rank == 0) {
    double avgBus = nBus ? busSum / nBus : 0.0;
    printf("# Out of bounds values : %lld %s%s\n", totalWrong, totalWrong ? "FAILED" : "OK",
           o.check ? "" : " (not checked: -c 0)");
    printf("# Avg bus bandwidth    : %.3f\n", avgBus);
    printf("#\n");
    char params[1024];
    json_params(&o, params, sizeof params);
    if (o.csv && report_csv(&rep) != 0) failed = 1;
    if (o.json && report_json(&rep, nranks, params, totalWrong, avgBus) != 0) failed = 1;
  }
  free(rep.rows);
  return failed;
}
