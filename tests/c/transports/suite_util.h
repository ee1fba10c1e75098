/*
 * suite_util.h: helpers shared by the data-path suite (tests/c/transports), run over every transport.
 *
 * Works from C11 and C++11. The program defines _GNU_SOURCE before any
 * include. Rank information comes from the launcher (tests/c/launch.c):
 * MSCCLPP_TEST_RANK, MSCCLPP_TEST_NRANKS, MSCCLPP_TEST_ADDR.
 *
 *   su_init(name)               read the environment, line-buffer stdout
 *   su_comm_init()              mscclppCommInitRank into su_comm
 *   SU_CK(call)                 call must succeed, else print and exit(1)
 *   SU_CHECK(cond, fmt, ...)    count a failure (printing the first ones)
 *   SU_REQUIRE(cond, fmt, ...)  the same, then exit(1)
 *   su_wait(conn, ms, what)     a bounded mscclppDevConnWaitTimeout that must succeed
 *   su_fill / su_verify         a per-(seed, index) byte pattern
 *   su_shm_*                    find /dev/shm/mscclpp.* files this job left behind
 *   su_finish()                 print the summary; the exit status
 */
#ifndef SUITE_UTIL_H_
#define SUITE_UTIL_H_

#include <mscclpp.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__GNUC__)
#define SU_UNUSED __attribute__((unused))
#else
#define SU_UNUSED
#endif

static int su_rank SU_UNUSED = 0;
static int su_nranks SU_UNUSED = 1;
static const char* su_addr SU_UNUSED = "127.0.0.1:29500";
static const char* su_name SU_UNUSED = "shm";
static mscclppComm_t su_comm SU_UNUSED = NULL;
static long su_failures SU_UNUSED = 0;
static long su_checks SU_UNUSED = 0;

static SU_UNUSED double su_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static SU_UNUSED void su_sleep_ms(int ms)
{
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static SU_UNUSED const char* su_lasterr(mscclppComm_t comm)
{
  const char* s = mscclppGetLastError(comm);
  return s ? s : "(NULL)";
}

static SU_UNUSED void su_init(const char* name)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  setvbuf(stderr, NULL, _IOLBF, 0);
  su_name = name;
  const char* s = getenv("MSCCLPP_TEST_RANK");
  if (s) su_rank = atoi(s);
  s = getenv("MSCCLPP_TEST_NRANKS");
  if (s) su_nranks = atoi(s);
  s = getenv("MSCCLPP_TEST_ADDR");
  if (s) su_addr = s;
}

static SU_UNUSED void su_exit_fail(void)
{
  printf("%s rank %d: FAILED (%ld of %ld checks failed)\n", su_name, su_rank, su_failures, su_checks);
  fflush(stdout);
  exit(1);
}

static SU_UNUSED void su_die_res(const char* file, int line, const char* expr, mscclppResult_t r)
{
  printf("%s rank %d: %s:%d: %s returned %d (%s); comm last error: \"%s\"; global: \"%s\"\n", su_name, su_rank, file,
         line, expr, (int)r, mscclppGetErrorString(r), su_comm ? su_lasterr(su_comm) : "", su_lasterr(NULL));
  su_failures++;
  su_exit_fail();
}

#define SU_CK(call)                                                 \
  do {                                                              \
    mscclppResult_t r_ = (call);                                    \
    su_checks++;                                                    \
    if (r_ != mscclppSuccess) su_die_res(__FILE__, __LINE__, #call, r_); \
  } while (0)

static SU_UNUSED int su_check_impl(int ok, const char* file, int line, const char* expr, const char* fmt, ...)
{
  su_checks++;
  if (ok) return 1;
  su_failures++;
  if (su_failures <= 20) {
    printf("%s rank %d: %s:%d: CHECK FAILED (%s): ", su_name, su_rank, file, line, expr);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
  }
  return 0;
}

#define SU_CHECK(cond, ...) su_check_impl(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)
#define SU_REQUIRE(cond, ...)                                                  \
  do {                                                                         \
    if (!su_check_impl(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)) su_exit_fail(); \
  } while (0)

/* The transport between ranks: mscclppTransportSHM, or with MSCCLPP_TEST_TRANSPORT=ethernet|ib|p2p
 * Ethernet or IB (the same data-path checks over TCP, or RDMA on MSCCLPP_TEST_IB_DEV), or P2P
 * (in host mode: carried like SHM, as a GPU program runs on a machine without one). */
static SU_UNUSED mscclppTransport_t su_transport(void)
{
  const char* t = getenv("MSCCLPP_TEST_TRANSPORT");
  if (t != NULL && strcmp(t, "ethernet") == 0) return mscclppTransportEthernet;
  if (t != NULL && strcmp(t, "ib") == 0) return mscclppTransportIB;
  if (t != NULL && strcmp(t, "p2p") == 0) return mscclppTransportP2P;
  return mscclppTransportSHM;
}

/* The ibDev argument of mscclppConnect: MSCCLPP_TEST_IB_DEV for IB, else NULL. */
static SU_UNUSED const char* su_ibdev(void)
{
  return su_transport() == mscclppTransportIB ? getenv("MSCCLPP_TEST_IB_DEV") : NULL;
}

/* Whether peers' buffers are mapped here (remoteBuff set for mscclppHostAlloc'd buffers). */
static SU_UNUSED int su_transport_maps(void)
{
  return su_transport() == mscclppTransportSHM || su_transport() == mscclppTransportP2P;
}

static SU_UNUSED void su_comm_init(void)
{
  SU_CK(mscclppCommInitRank(&su_comm, su_nranks, su_addr, su_rank));
}

/* A wait that must succeed within ms milliseconds. */
static SU_UNUSED void su_wait_at(const char* file, int line, mscclppDevConn_t* conn, int64_t ms, const char* what)
{
  double t0 = su_now();
  mscclppResult_t r = mscclppDevConnWaitTimeout(conn, ms);
  su_checks++;
  if (r != mscclppSuccess) {
    printf("%s rank %d: %s:%d: wait for rank %d (%s): %s after %.0f ms (want %llu, have %llu); async: \"%s\"\n",
           su_name, su_rank, file, line, conn->remoteRank, what, mscclppGetErrorString(r), (su_now() - t0) * 1e3,
           (unsigned long long)*conn->waitEpochId, (unsigned long long)conn->localSignalEpochId->proxy,
           su_lasterr(su_comm));
    su_failures++;
    su_exit_fail();
  }
}
#define su_wait(conn, ms, what) su_wait_at(__FILE__, __LINE__, (conn), (ms), (what))

/* ---- data pattern: byte i of the stream named by seed ---- */

static inline uint64_t su_word(uint64_t seed, uint64_t w)
{
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + w * 0xBF58476D1CE4E5B9ull + 0x632BE59BD9B4E019ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 29;
  return z;
}

static inline uint8_t su_byte(uint64_t seed, uint64_t i)
{
  return (uint8_t)(su_word(seed, i >> 3) >> ((i & 7) * 8));
}

static SU_UNUSED uint64_t su_seed(uint64_t a, uint64_t b, uint64_t c)
{
  return su_word(su_word(a + 1, b + 0x1000), c + 0x2000);
}

/* Fill n bytes at p with stream seed starting at stream index 0. */
static SU_UNUSED void su_fill(void* p, size_t n, uint64_t seed)
{
  uint8_t* b = (uint8_t*)p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = su_word(seed, i >> 3);
    memcpy(b + i, &w, 8);
  }
  for (; i < n; i++) b[i] = su_byte(seed, i);
}

/* Count the bytes of p that differ from stream seed; print the first one. */
static SU_UNUSED size_t su_verify(const void* p, size_t n, uint64_t seed, const char* what)
{
  const uint8_t* b = (const uint8_t*)p;
  size_t wrong = 0, first = (size_t)-1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = su_word(seed, i >> 3), got;
    memcpy(&got, b + i, 8);
    if (got != w) {
      for (int k = 0; k < 8; k++)
        if (b[i + k] != (uint8_t)(w >> (k * 8))) {
          if (first == (size_t)-1) first = i + k;
          wrong++;
        }
    }
  }
  for (; i < n; i++)
    if (b[i] != su_byte(seed, i)) {
      if (first == (size_t)-1) first = i;
      wrong++;
    }
  su_checks++;
  if (wrong) {
    su_failures++;
    if (su_failures <= 20)
    {
      uint8_t now = ((const volatile uint8_t*)b)[first], want = su_byte(seed, first);
      printf("%s rank %d: %s: %zu of %zu bytes wrong, first at %zu: %s 0x%02x want 0x%02x\n", su_name, su_rank,
             what, wrong, n, first, now == want ? "was wrong when checked, arrived since: now" : "got", now, want);
    }
  }
  return wrong;
}

/* Count the bytes of p that are not c. */
static SU_UNUSED size_t su_verify_const(const void* p, size_t n, uint8_t c, const char* what)
{
  const uint8_t* b = (const uint8_t*)p;
  size_t wrong = 0, first = (size_t)-1;
  for (size_t i = 0; i < n; i++)
    if (b[i] != c) {
      if (first == (size_t)-1) first = i;
      wrong++;
    }
  su_checks++;
  if (wrong) {
    su_failures++;
    if (su_failures <= 20)
      printf("%s rank %d: %s: %zu of %zu bytes changed, first at %zu: 0x%02x, want 0x%02x\n", su_name, su_rank,
             what, wrong, n, first, b[first], c);
  }
  return wrong;
}

/* ---- /dev/shm: files named mscclpp.* this job leaves behind ---- */

#define SU_SHM_MAX 256
typedef struct {
  int n;
  char names[SU_SHM_MAX][256];
} su_shm_list;

static SU_UNUSED void su_shm_list_now(su_shm_list* l)
{
  l->n = 0;
  DIR* d = opendir("/dev/shm");
  if (d == NULL) return;
  struct dirent* e;
  while ((e = readdir(d)) != NULL && l->n < SU_SHM_MAX) {
    if (strncmp(e->d_name, "mscclpp", 7) == 0) {
      snprintf(l->names[l->n], sizeof l->names[0], "%s", e->d_name);
      l->n++;
    }
  }
  closedir(d);
}

static SU_UNUSED int su_shm_has(const su_shm_list* l, const char* name)
{
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0) return 1;
  return 0;
}

/* Whether the file holds one of pids (as a 64-bit word at an aligned offset):
 * the library records each local rank's pid in the node segment, so this
 * tells this job's segments from those of other jobs running at the same time. */
static SU_UNUSED int su_shm_mentions(const char* name, const int* pids, int npids)
{
  char path[256];
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  FILE* f = fopen(path, "rb");
  if (f == NULL) return 0;
  uint64_t w;
  int found = 0;
  while (!found && fread(&w, 8, 1, f) == 1)
    for (int i = 0; i < npids; i++)
      if (pids[i] > 0 && w == (uint64_t)pids[i]) found = 1;
  fclose(f);
  return found;
}

/* Files that are not in before and mention one of pids, after a short grace.
 * Prints each; returns how many. */
static SU_UNUSED int su_shm_leftovers(const su_shm_list* before, const int* pids, int npids)
{
  int left = 0;
  for (int attempt = 0; attempt < 10; attempt++) {
    su_shm_list now;
    su_shm_list_now(&now);
    left = 0;
    for (int i = 0; i < now.n; i++)
      if (!su_shm_has(before, now.names[i]) && su_shm_mentions(now.names[i], pids, npids)) {
        if (attempt == 9) printf("%s rank %d: left behind: /dev/shm/%s\n", su_name, su_rank, now.names[i]);
        left++;
      }
    if (left == 0) break;
    su_sleep_ms(50);
  }
  return left;
}

/* Count mappings in /proc/self/maps whose line contains needle. */
static SU_UNUSED int su_count_maps(const char* needle)
{
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return -1;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  fclose(f);
  return n;
}

/* Number of open file descriptors. */
static SU_UNUSED int su_count_fds(void)
{
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own fd */
}

static SU_UNUSED int su_finish(void)
{
  if (su_failures == 0) {
    printf("%s rank %d: OK (%ld checks)\n", su_name, su_rank, su_checks);
    fflush(stdout);
    return 0;
  }
  printf("%s rank %d: FAILED (%ld of %ld checks failed)\n", su_name, su_rank, su_failures, su_checks);
  fflush(stdout);
  return 1;
}

#endif /* SUITE_UTIL_H_ */
