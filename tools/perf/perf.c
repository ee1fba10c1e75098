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
 *                or a number. Peers on this rank's node use SHM, except when
 *                every rank is on one node and a transport was named: then
 *                every pair of ranks uses it (Ethernet between local ranks
 *                measured on one machine). The node of every rank is its
 *                MSCCLPP_HOSTID, else host name and boot id (what the library
 *                uses), gathered over the bootstrap. The header line names
 *                the transports used.
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
#include "perf_pattern.h" /* after perf_spawn.h: chunk_of reads nranks */

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

/* Every rank's launcher token (idfile_token), gathered once the communicator exists: ranks of
 * two jobs that met anyway (one job id, or one address, given to both) all fail here, each
 * naming a rank of the other job, instead of benchmarking across two jobs. */
static void job_check(void)
{
  enum { TOKEN = 128 };
  char* all = calloc((size_t)nranks, TOKEN);
  if (all == NULL) {
    fprintf(stderr, "perf rank %d: out of memory\n", rank);
    exit(1);
  }
  char* mine = all + (size_t)rank * TOKEN;
  idfile_token(mine, TOKEN);
  CK(mscclppBootstrapAllGather(comm, all, TOKEN));
  int bad = 0;
  for (int r = 0; r < nranks; r++) {
    char* theirs = all + (size_t)r * TOKEN;
    theirs[TOKEN - 1] = '\0';
    if (strcmp(theirs, mine) == 0) continue;
    fprintf(stderr,
            "perf rank %d: rank %d of this communicator is another job's (launcher token %s; this rank's is %s): two "
            "jobs were given one job id or address; failing\n",
            rank, r, theirs, mine);
    bad = 1;
    break;
  }
  free(all);
  if (bad) exit(1);
}

static void init_comm(const struct perf_opts* o)
{
  const char* addr = getenv("MSCCLPP_TEST_ADDR");
  if (addr == NULL || *addr == '\0') addr = getenv("MSCCLPP_COMM_ID");
  if (addr != NULL && *addr != '\0') {
    snprintf(idSource, sizeof idSource, "rank 0's address %s", addr);
    CK(mscclppCommInitRank(&comm, nranks, addr, rank));
  } else {
    if (o->idFile == NULL && getenv("MSCCLPP_PERF_ID_FILE") != NULL && *getenv("MSCCLPP_PERF_ID_FILE"))
      ((struct perf_opts*)o)->idFile = getenv("MSCCLPP_PERF_ID_FILE");
    init_from_id(o);
  }
  job_check();
}

/* ---- nodes and connections ---- */

/* The transport to peers on other nodes. mscclppTransportEthernet is an
 * extension value (3, after IB = 2) that older headers do not declare. */
static mscclppTransport_t crossTransport = mscclppTransportEthernet;
static const char* crossName = "ethernet";
/* --transport (or MSCCLPP_PERF_TRANSPORT) named one: on one node every peer uses it */
static int transportAsked;

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
static char over[160] = "SHM"; /* the transports used, for the header line */

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
  /* one node and a transport named: it is what the run measures, between every pair */
  int every = transportAsked && nnodes == 1;
  const char* ibDev = getenv("MSCCLPP_PERF_IB_DEV");
  if (ibDev == NULL || *ibDev == '\0') ibDev = "mlx5_0";
  int nremote = 0, nlocal = 0;
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    if (!every && memcmp(keys + (size_t)p * HOSTKEY_BYTES, keys + (size_t)rank * HOSTKEY_BYTES, HOSTKEY_BYTES) == 0) {
      nlocal++;
      CK(mscclppConnect(comm, p, 0, buf, bufBytes, mscclppTransportSHM, NULL));
      continue;
    }
    nremote++;
    mscclppResult_t r = mscclppConnect(comm, p, 0, buf, bufBytes, crossTransport,
                                       crossTransport == mscclppTransportIB ? ibDev : NULL);
    if (r != mscclppSuccess) {
      fprintf(stderr, "perf rank %d: cannot connect to rank %d over the %s transport %s (%d): %s: %s\n", rank, p,
              every ? "requested" : "cross-node", crossName, (int)crossTransport, mscclppGetErrorString(r),
              mscclppGetLastError(comm));
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
  if (every && nranks > 1)
    snprintf(over, sizeof over, "%s between every pair of ranks (--transport, one node)", crossName);
  else if (nnodes > 1)
    snprintf(over, sizeof over, "SHM within a node and %s across %d nodes", crossName, nnodes);
}

/* the measurement loop, over comm and conn above */
#include "perf_bench.h"

int main(int argc, char** argv)
{
  struct perf_opts o;
  parse_opts(&o, argc, argv);
  const char* envTransport = getenv("MSCCLPP_PERF_TRANSPORT");
  if (o.transport == NULL && envTransport != NULL && *envTransport != '\0') o.transport = envTransport;
  if (o.transport != NULL && !parse_transport(o.transport))
    bad_option("--transport", o.transport, "want ethernet, ib, shm, p2p or a number");
  transportAsked = o.transport != NULL;

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
