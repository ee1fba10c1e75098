/*
 * perf.c: an allgather bandwidth tool over SHM connections, in the manner of
 * nccl-tests' all_gather_perf, for libmscclpp in host mode.
 *
 *   perf [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes] [-n iters]
 *        [-w warmup_iters] [-c 0|1] [-T timeout_s] [--nranks N] [--malloc]
 *        [--id-file PATH] [--transport NAME]
 *
 * The size options mean what they mean in nccl-tests (long forms too:
 * --minbytes --maxbytes --stepfactor --stepbytes --iters --warmup_iters
 * --check --timeout):
 *   -b, -e   the smallest and largest size: the bytes gathered in all, as
 *            nccl-tests counts an all_gather (size = nranks * count, count
 *            the bytes each rank sends); K, M, G suffixes are powers of
 *            1024. Defaults 8 and 256M.
 *   -f       each size is the last one times this factor (default 2); 1 or
 *            less: each size is the last one plus -i instead
 *   -i       the step in bytes when -f is 1 (default 1M; K/M/G suffixes)
 *   -n       timed iterations per size (default 20)
 *   -w       warm-up iterations per size (default 5)
 *            Without -n (or -w) big sizes run fewer iterations (about
 *            512 MiB gathered per size, at least 2) and one warm-up; a -n
 *            or -w given is always used as given.
 *   -c       1 (default): check every byte of every slot after each size,
 *            and fail on any wrong byte; 0: no check ("#wrong" is N/A)
 *   -T       seconds before perf kills the local ranks it started (600)
 *   -t, -g   nccl-tests' threads per process and GPUs per thread: only 1 is
 *            accepted (one rank per process)
 * Our own options:
 *   --nranks N   how many local ranks perf starts (default 4; a launcher's
 *                count wins). tests/c/perf.sh passes its NRANKS argument here.
 *   --malloc     plain malloc buffers instead of mscclppHostAlloc
 *   --id-file P  hand the unique id over through the file P (see below)
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
 * Ranks:
 *  - started by tests/c/launch (MSCCLPP_TEST_RANK / _NRANKS / _ADDR), or
 *  - under Open MPI (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/PMI_SIZE) or
 *    Slurm (SLURM_PROCID/SLURM_NTASKS); the root address then comes from
 *    MSCCLPP_COMM_ID=ip:port, or rank 0 writes a mscclppUniqueId to the file
 *    named by --id-file (or MSCCLPP_PERF_ID_FILE) that the others read;
 *  - otherwise perf starts N local ranks itself (default 4): it posix_spawns
 *    its own binary N times with the rank in the environment, before any
 *    library call (fork after the library is loaded is unusable: the Go
 *    runtime behind it does not survive fork), waits for them, and kills the
 *    rest if one fails or after the timeout (-T, default 600 s).
 *
 * Sizes: minbytes, then each step as above while the size is at most
 * maxbytes; each rank's chunk (count) is size / nranks bytes (at least 1),
 * and a size whose chunk equals the last one is skipped. Each size: poison
 * every peer's slot (with -c 1), warm-up, timed iterations, then every byte
 * of every slot is checked against the pattern its owner wrote (with -c 1).
 * Every rank puts its chunk
 * straight into every peer's buffer (putWithSignal) and waits for every
 * peer's signal: "direct-memcpy" when the peers' buffers are mapped (they
 * come from mscclppHostAlloc, the default), "direct-vm_writev" for plain
 * malloc buffers (--malloc). time is the slowest rank's average per
 * iteration; algbw = size / time; busbw = algbw * (N-1)/N.
 * Exit status: 0 only when no byte was wrong and nothing failed; 2 for bad
 * options; 3 when the library does not provide the cross-node transport.
 */
#define _GNU_SOURCE
#include <mscclpp.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static int rank = 0, nranks = 1;
static mscclppComm_t comm = NULL;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

#define CK(call)                                                                                          \
  do {                                                                                                    \
    mscclppResult_t r_ = (call);                                                                          \
    if (r_ != mscclppSuccess) {                                                                           \
      fprintf(stderr, "perf rank %d: %s:%d: %s: %s (%s)\n", rank, __FILE__, __LINE__, #call,              \
              mscclppGetErrorString(r_), comm ? mscclppGetLastError(comm) : mscclppGetLastError(NULL));   \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

/* ---- the data pattern: byte i of the chunk rank r sends at size s ---- */

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

static size_t count_wrong(const unsigned char* p, size_t n, uint64_t seed)
{
  size_t wrong = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = mix(seed, i >> 3), got;
    memcpy(&got, p + i, 8);
    if (got != w)
      for (int k = 0; k < 8; k++) wrong += p[i + k] != (unsigned char)(w >> (k * 8));
  }
  for (; i < n; i++) wrong += p[i] != (unsigned char)(mix(seed, i >> 3) >> ((i & 7) * 8));
  return wrong;
}

static uint64_t seed_of(int r, size_t chunk) { return mix(0x5eed0000ull + (uint64_t)r, chunk); }

/* ---- options ---- */

static void usage(void)
{
  fprintf(stderr,
          "usage: perf [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes] [-n iters] [-w warmup_iters]\n"
          "            [-c 0|1] [-T timeout_s] [--nranks N] [--malloc] [--id-file PATH]\n"
          "            [--transport ethernet|ib|shm|p2p|NUMBER]   (to peers on other nodes)\n"
          "  the flags of nccl-tests (long forms: --minbytes --maxbytes --stepfactor --stepbytes --iters\n"
          "  --warmup_iters --check --timeout); sizes accept K/M/G suffixes;\n"
          "  defaults: -b 8 -e 256M -f 2 -i 1M -n 20 -w 5 -c 1 -T 600 --nranks 4 --transport ethernet\n");
  exit(2);
}

static void bad_option(const char* opt, const char* value, const char* want)
{
  fprintf(stderr, "perf: %s %s: %s\n", opt, value, want);
  usage();
}

/* A byte count: a non-negative number with an optional K, M or G (powers of 1024). */
static size_t parse_size(const char* opt, const char* s)
{
  char* end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno != 0 || v < 0) bad_option(opt, s, "want a byte count such as 8, 64K, 1M or 2G");
  switch (*end) {
  case 'k': case 'K': v *= 1024; end++; break;
  case 'm': case 'M': v *= 1024.0 * 1024; end++; break;
  case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
  default: break;
  }
  if (*end != '\0' || v >= 18446744073709551615.0) bad_option(opt, s, "want a byte count such as 8, 64K, 1M or 2G");
  return (size_t)v;
}

static int parse_int(const char* opt, const char* s, int min)
{
  char* end;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (end == s || *end != '\0' || errno != 0 || v < min || v > INT_MAX) {
    char want[64];
    snprintf(want, sizeof want, "want an integer >= %d", min);
    bad_option(opt, s, want);
  }
  return (int)v;
}

/* The size after size: times factor when factor > 1, else plus step; 0 past SIZE_MAX. */
static size_t next_size(size_t size, double factor, size_t step)
{
  double next = factor > 1 ? (double)size * factor : (double)size + (double)step;
  if (next >= 18446744073709551615.0) return 0;
  size_t n = (size_t)next;
  return n > size ? n : size + 1;
}

/* ---- starting N local ranks ---- */

static int port_free(int port)
{
  int ok = 1;
  for (int any = 0; any < 2 && ok; any++) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(any ? INADDR_ANY : INADDR_LOOPBACK);
    ok = bind(s, (struct sockaddr*)&a, sizeof a) == 0;
    close(s);
  }
  return ok;
}

static int pick_port(void)
{
  int lo = 32768;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    int hi;
    if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
    fclose(f);
  }
  if (lo < 12000) lo = 30000;
  srand((unsigned)(time(NULL) ^ (getpid() << 10)));
  for (int attempt = 0; attempt < 1000; attempt++) {
    int p = 10000 + rand() % (lo - 10000 - 16);
    if (port_free(p)) return p;
  }
  return 0;
}

static int spawn_ranks(int n, char** argv, double timeout)
{
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    fprintf(stderr, "perf: readlink /proc/self/exe: %s\n", strerror(errno));
    return 1;
  }
  self[len] = 0;
  int port = pick_port();
  if (port == 0) {
    fprintf(stderr, "perf: no free TCP port found\n");
    return 1;
  }
  char addr[64], nr[16];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  snprintf(nr, sizeof nr, "%d", n);
  setenv("MSCCLPP_TEST_NRANKS", nr, 1);
  setenv("MSCCLPP_TEST_ADDR", addr, 1);
  setenv("MSCCLPP_PERF_SPAWNED", "1", 1);
  pid_t* pids = calloc((size_t)n, sizeof(pid_t));
  int* done = calloc((size_t)n, sizeof(int));
  fflush(stdout);
  for (int r = 0; r < n; r++) {
    char rs[16];
    snprintf(rs, sizeof rs, "%d", r);
    setenv("MSCCLPP_TEST_RANK", rs, 1);
    argv[0] = self;
    int e = posix_spawn(&pids[r], self, NULL, NULL, argv, environ);
    if (e != 0) {
      fprintf(stderr, "perf: posix_spawn %s: %s\n", self, strerror(e));
      for (int k = 0; k < r; k++) kill(pids[k], SIGKILL);
      return 1;
    }
  }
  int bad = 0, left = n;
  double deadline = now() + timeout, killAt = 0;
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < n; r++) {
        if (pids[r] != p || done[r]) continue;
        done[r] = 1;
        left--;
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
          if (WIFSIGNALED(st))
            fprintf(stderr, "perf: rank %d killed by signal %d\n", r, WTERMSIG(st));
          else
            fprintf(stderr, "perf: rank %d exited with status %d\n", r, WEXITSTATUS(st));
          if (!bad) killAt = now() + 10; /* give the others a chance to report, then stop them */
          bad = 1;
        }
      }
      continue;
    }
    if (p < 0 && errno != EINTR) break;
    double t = now();
    if ((killAt > 0 && t > killAt) || t > deadline) {
      if (t > deadline) fprintf(stderr, "perf: timeout after %.0f s\n", timeout);
      for (int r = 0; r < n; r++)
        if (!done[r]) {
          fprintf(stderr, "perf: killing rank %d (pid %d)\n", r, (int)pids[r]);
          kill(pids[r], SIGKILL);
        }
      bad = 1;
      killAt = 0;
      deadline = t + 1e9;
    }
    sleep_ms(5);
  }
  free(pids);
  free(done);
  return bad ? 1 : 0;
}

/* ---- where the ranks come from ---- */

static int env_int(const char* a, int* out)
{
  const char* s = getenv(a);
  if (s == NULL || *s == '\0') return 0;
  *out = atoi(s);
  return 1;
}

/* 1 when some launcher started us; sets rank and nranks. */
static int from_launcher(void)
{
  static const char* pairs[][2] = {{"MSCCLPP_TEST_RANK", "MSCCLPP_TEST_NRANKS"},
                                   {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                   {"PMI_RANK", "PMI_SIZE"},
                                   {"PMIX_RANK", "PMIX_SIZE"},
                                   {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    int r, n;
    if (env_int(pairs[i][0], &r) && env_int(pairs[i][1], &n)) {
      rank = r;
      nranks = n;
      return 1;
    }
  }
  return 0;
}

static void init_comm(const char* idFile)
{
  const char* addr = getenv("MSCCLPP_TEST_ADDR");
  if (addr == NULL || *addr == '\0') addr = getenv("MSCCLPP_COMM_ID");
  if (addr != NULL && *addr != '\0') {
    CK(mscclppCommInitRank(&comm, nranks, addr, rank));
    return;
  }
  if (idFile == NULL) idFile = getenv("MSCCLPP_PERF_ID_FILE");
  if (idFile == NULL || *idFile == '\0') {
    fprintf(stderr, "perf rank %d: no root address: set MSCCLPP_COMM_ID=ip:port for every rank, or pass "
                    "--id-file PATH (or MSCCLPP_PERF_ID_FILE) on a file system all ranks share\n", rank);
    exit(2);
  }
  mscclppUniqueId id;
  if (rank == 0) {
    CK(mscclppGetUniqueId(&id));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", idFile, (int)getpid());
    FILE* f = fopen(tmp, "wb");
    if (f == NULL || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, idFile) != 0) {
      fprintf(stderr, "perf rank 0: cannot write %s: %s\n", idFile, strerror(errno));
      exit(1);
    }
  } else {
    double deadline = now() + 120;
    for (;;) {
      FILE* f = fopen(idFile, "rb");
      if (f != NULL) {
        size_t got = fread(&id, sizeof id, 1, f);
        fclose(f);
        if (got == 1) break;
      }
      if (now() > deadline) {
        fprintf(stderr, "perf rank %d: %s did not appear in 120 s\n", rank, idFile);
        exit(1);
      }
      sleep_ms(20);
    }
  }
  CK(mscclppCommInitRankFromId(&comm, nranks, id, rank));
}

/* ---- nodes and the cross-node transport ---- */

/* The transport to peers on other nodes. mscclppTransportEthernet is an
 * extension value (3, after IB = 2) that older headers do not declare. */
#define PERF_TRANSPORT_ETHERNET mscclppTransportEthernet
static mscclppTransport_t crossTransport = PERF_TRANSPORT_ETHERNET;
static const char* crossName = "ethernet";

static int parse_transport(const char* s)
{
  static const struct { const char* name; int value; } names[] = {
    {"ethernet", 3}, {"eth", 3}, {"ib", 2}, {"shm", 1}, {"p2p", 0}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcasecmp(s, names[i].name) == 0) {
      crossTransport = (mscclppTransport_t)names[i].value;
      crossName = names[i].name;
      if (names[i].value == 3) crossName = "ethernet";
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

/* ---- the benchmark ---- */

static mscclppDevConn_t** conn; /* by peer rank */

static void wait_peer(int p, const char* when)
{
  mscclppResult_t r = mscclppDevConnWaitTimeout(conn[p], 60000);
  if (r != mscclppSuccess) {
    fprintf(stderr, "perf rank %d: waiting for rank %d (%s): %s: %s\n", rank, p, when, mscclppGetErrorString(r),
            mscclppGetLastError(comm));
    exit(1);
  }
}

static void allgather_once(unsigned char* buf, size_t chunk)
{
  (void)buf;
  size_t off = (size_t)rank * chunk;
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
}

int main(int argc, char** argv)
{
  int n = 4, iters = 20, warmup = 5, check = 1, useMalloc = 0, itersGiven = 0, warmupGiven = 0;
  size_t minBytes = 8, maxBytes = (size_t)256 << 20, stepBytes = (size_t)1 << 20;
  double factor = 2, timeout = 600;
  const char* idFile = NULL;
  enum { OPT_NRANKS = 256, OPT_MALLOC, OPT_ID_FILE, OPT_TRANSPORT };
  static const struct option longopts[] = {
    {"minbytes", required_argument, 0, 'b'},   {"maxbytes", required_argument, 0, 'e'},
    {"stepfactor", required_argument, 0, 'f'}, {"stepbytes", required_argument, 0, 'i'},
    {"iters", required_argument, 0, 'n'},      {"warmup_iters", required_argument, 0, 'w'},
    {"check", required_argument, 0, 'c'},      {"timeout", required_argument, 0, 'T'},
    {"nthreads", required_argument, 0, 't'},   {"ngpus", required_argument, 0, 'g'},
    {"nranks", required_argument, 0, OPT_NRANKS}, {"malloc", no_argument, 0, OPT_MALLOC},
    {"id-file", required_argument, 0, OPT_ID_FILE}, {"help", no_argument, 0, 'h'},
    {"transport", required_argument, 0, OPT_TRANSPORT},
    {0, 0, 0, 0}};
  const char* envTransport = getenv("MSCCLPP_PERF_TRANSPORT");
  if (envTransport != NULL && *envTransport != '\0' && !parse_transport(envTransport))
    bad_option("MSCCLPP_PERF_TRANSPORT=", envTransport, "want ethernet, ib, shm, p2p or a number");
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:T:t:g:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'b': minBytes = parse_size("-b", optarg); break;
    case 'e': maxBytes = parse_size("-e", optarg); break;
    case 'f': {
      char* end;
      factor = strtod(optarg, &end);
      if (end == optarg || *end != '\0' || factor < 0) bad_option("-f", optarg, "want a factor such as 2");
      break;
    }
    case 'i': stepBytes = parse_size("-i", optarg); break;
    case 'n': iters = parse_int("-n", optarg, 1); itersGiven = 1; break;
    case 'w': warmup = parse_int("-w", optarg, 0); warmupGiven = 1; break;
    case 'c': check = parse_int("-c", optarg, 0) != 0; break;
    case 'T': timeout = parse_int("-T", optarg, 1); break;
    case 't':
    case 'g':
      if (parse_int(c == 't' ? "-t" : "-g", optarg, 1) != 1)
        bad_option(c == 't' ? "-t" : "-g", optarg, "perf runs one rank per process: only 1 is supported");
      break;
    case OPT_NRANKS: n = parse_int("--nranks", optarg, 1); break;
    case OPT_MALLOC: useMalloc = 1; break;
    case OPT_ID_FILE: idFile = optarg; break;
    case OPT_TRANSPORT:
      if (!parse_transport(optarg)) bad_option("--transport", optarg, "want ethernet, ib, shm, p2p or a number");
      break;
    default: usage();
    }
  }
  if (optind < argc) {
    fprintf(stderr, "perf: unexpected argument '%s'\n", argv[optind]);
    usage();
  }
  if (maxBytes < 1 || minBytes > maxBytes) {
    fprintf(stderr, "perf: invalid sizes: -b %zu -e %zu (want 1 <= maxbytes, minbytes <= maxbytes)\n", minBytes,
            maxBytes);
    usage();
  }
  if (factor <= 1 && stepBytes == 0) {
    fprintf(stderr, "perf: -f %g needs -i stepbytes > 0\n", factor);
    usage();
  }

  /* No library call may come before this point: the parent only spawns. */
  if (!from_launcher()) return spawn_ranks(n, argv, timeout);

  setvbuf(stdout, NULL, _IOLBF, 0);
  int quiet = rank != 0;
  init_comm(idFile);

  /* the largest chunk of the sequence */
  size_t topChunk = 1;
  for (size_t size = minBytes; size != 0 && size <= maxBytes; size = next_size(size, factor, stepBytes)) {
    size_t chunk = size / (size_t)nranks;
    if (chunk > topChunk) topChunk = chunk;
  }
  size_t bufBytes = topChunk * (size_t)nranks;

  unsigned char* buf = NULL;
  if (useMalloc) {
    buf = malloc(bufBytes);
    if (buf == NULL) {
      fprintf(stderr, "perf rank %d: malloc of %zu bytes failed\n", rank, bufBytes);
      return 1;
    }
  } else {
    CK(mscclppHostAlloc((void**)&buf, bufBytes));
  }
  memset(buf, 0, bufBytes);
  conn = calloc((size_t)nranks, sizeof *conn);
  /* which ranks share this rank's node: SHM to those, crossTransport to the rest */
  char* keys = calloc((size_t)nranks, HOSTKEY_BYTES);
  host_key(keys + (size_t)rank * HOSTKEY_BYTES);
  CK(mscclppBootstrapAllGather(comm, keys, HOSTKEY_BYTES));
  int nnodes = 0, nremote = 0, nlocal = 0;
  for (int p = 0; p < nranks; p++) {
    int first = 1;
    for (int q = 0; q < p && first; q++) first = memcmp(keys + (size_t)q * HOSTKEY_BYTES, keys + (size_t)p * HOSTKEY_BYTES, HOSTKEY_BYTES) != 0;
    nnodes += first;
  }
  const char* ibDev = getenv("MSCCLPP_PERF_IB_DEV");
  if (ibDev == NULL || *ibDev == '\0') ibDev = "mlx5_0";
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    int same = memcmp(keys + (size_t)p * HOSTKEY_BYTES, keys + (size_t)rank * HOSTKEY_BYTES, HOSTKEY_BYTES) == 0;
    if (same) {
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
  const char* algo = nranks == 1 ? "local" : "direct-memcpy";
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    CK(mscclppGetDeviceConnection(comm, p, 0, &conn[p]));
    if (conn[p]->remoteBuff == NULL && nremote == 0) algo = "direct-vm_writev";
  }
  char algoBuf[64];
  if (nremote > 0) {
    snprintf(algoBuf, sizeof algoBuf, "direct-%s%s", nlocal > 0 ? "shm+" : "", crossName);
    algo = algoBuf;
  }
  CK(mscclppProxyLaunch(comm));

  if (!quiet) {
    int version = 0;
    mscclppGetVersion(&version);
    if (nnodes > 1)
      printf("# mscclpp all_gather_perf: host mode over SHM within a node and %s across %d nodes, library version %d\n",
             crossName, nnodes, version);
    else
      printf("# mscclpp all_gather_perf: host mode over SHM, library version %d\n", version);
    char step[64];
    if (factor > 1)
      snprintf(step, sizeof step, "%g(factor)", factor);
    else
      snprintf(step, sizeof step, "%zu(bytes)", stepBytes);
    printf("# nranks %d (pid %d is rank 0), %s buffers, minBytes %zu maxBytes %zu step: %s warmup iters: %d%s "
           "iters: %d%s validation: %d\n",
           nranks, (int)getpid(), useMalloc ? "malloc" : "mscclppHostAlloc", minBytes, maxBytes, step, warmup,
           warmupGiven ? "" : " (1 for big sizes)", iters, itersGiven ? "" : " (fewer for big sizes)", check);
    printf("# count: bytes per rank (size = count * nranks); time: the slowest rank's average per iteration\n");
    printf("#\n");
    printf("# %12s %12s %12s %12s %12s  %-18s %8s\n", "size(B)", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
           "algo", "#wrong");
  }

  size_t totalWrong = 0;
  double busSum = 0;
  int nSizes = 0;
  double* times = calloc((size_t)nranks, sizeof(double));
  size_t* wrongs = calloc((size_t)nranks, sizeof(size_t));
  size_t lastChunk = 0;
  for (size_t want = minBytes; want != 0 && want <= maxBytes; want = next_size(want, factor, stepBytes)) {
    size_t chunk = want / (size_t)nranks;
    if (chunk < 1) chunk = 1;
    if (chunk == lastChunk) continue;
    lastChunk = chunk;
    size_t size = chunk * (size_t)nranks;
    /* unless -n / -w were given, fewer iterations for big sizes: about 512 MiB gathered per size at most */
    int it = iters, wu = warmup;
    size_t budget = (size_t)512 << 20;
    if (!itersGiven && (size_t)it * size > budget) it = (int)(budget / size) < 2 ? 2 : (int)(budget / size);
    if (!warmupGiven && wu > 0 && (size_t)wu * size > budget / 4) wu = 1;

    if (check) {
      /* poison the peers' slots, fill mine */
      for (int p = 0; p < nranks; p++)
        if (p != rank) memset(buf + (size_t)p * chunk, 0xEE, chunk);
      fill(buf + (size_t)rank * chunk, chunk, seed_of(rank, chunk));
    }
    CK(mscclppBootstrapBarrier(comm));
    for (int i = 0; i < wu; i++) allgather_once(buf, chunk);
    CK(mscclppBootstrapBarrier(comm));
    double t0 = now();
    for (int i = 0; i < it; i++) allgather_once(buf, chunk);
    double dt = (now() - t0) / it;

    /* every byte of every slot */
    size_t wrong = 0;
    if (check)
      for (int p = 0; p < nranks; p++) wrong += count_wrong(buf + (size_t)p * chunk, chunk, seed_of(p, chunk));
    mscclppResult_t async = mscclppSuccess;
    CK(mscclppCommGetAsyncError(comm, &async));
    if (async != mscclppSuccess) {
      fprintf(stderr, "perf rank %d: async error at size %zu: %s: %s\n", rank, size, mscclppGetErrorString(async),
              mscclppGetLastError(comm));
      wrong += 1;
    }
    memset(times, 0, (size_t)nranks * sizeof(double));
    memset(wrongs, 0, (size_t)nranks * sizeof(size_t));
    times[rank] = dt;
    wrongs[rank] = wrong;
    CK(mscclppBootstrapAllGather(comm, times, sizeof(double)));
    CK(mscclppBootstrapAllGather(comm, wrongs, sizeof(size_t)));
    double tmax = 0;
    size_t wsum = 0;
    for (int p = 0; p < nranks; p++) {
      if (times[p] > tmax) tmax = times[p];
      wsum += wrongs[p];
    }
    totalWrong += wsum;
    double algbw = tmax > 0 ? (double)size / tmax / 1e9 : 0;
    double busbw = algbw * (double)(nranks - 1) / (double)nranks;
    busSum += busbw;
    nSizes++;
    if (!quiet && (check || wsum))
      printf("  %12zu %12zu %12.2f %12.3f %12.3f  %-18s %8zu\n", size, chunk, tmax * 1e6, algbw, busbw, algo, wsum);
    else if (!quiet)
      printf("  %12zu %12zu %12.2f %12.3f %12.3f  %-18s %8s\n", size, chunk, tmax * 1e6, algbw, busbw, algo, "N/A");
    if (wrong && rank != 0)
      fprintf(stderr, "perf rank %d: %zu wrong bytes at size %zu\n", rank, wrong, size);
  }

  CK(mscclppProxyStop(comm));
  CK(mscclppCommDestroy(comm));
  comm = NULL;
  if (useMalloc)
    free(buf);
  else
    CK(mscclppHostFree(buf));
  if (!quiet) {
    printf("# Out of bounds values : %zu %s%s\n", totalWrong, totalWrong ? "FAILED" : "OK",
           check ? "" : " (bytes not checked: -c 0)");
    printf("# Avg bus bandwidth    : %.3f\n", nSizes ? busSum / nSizes : 0.0);
    printf("#\n");
  }
  free(times);
  free(wrongs);
  free(conn);
  return totalWrong ? 1 : 0;
}
