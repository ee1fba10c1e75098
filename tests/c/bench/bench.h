/*
 * bench.h: helpers shared by the benchmark programs of tests/c/bench.
 *
 * Every multi-process program here is started by `launch` (launch.c), which
 * execs N copies with BENCH_RANK, BENCH_NRANKS, BENCH_ADDR (a free
 * 127.0.0.1:port), BENCH_RELEASE_FD and BENCH_REPORT_FD in the environment.
 * A child calls bench_start() once it is loaded: that tells the launcher it
 * is up and blocks until the launcher releases all N at once (so process
 * start-up, dynamic loading and the Go runtime's start are not timed).
 * bench_ready() reports the moment the child considers itself initialised;
 * the launcher prints max(ready) - release as the init time.
 *
 * Rank 0 prints one `RESULT key value` line per figure (times in ns,
 * bandwidths in GB/s); bench.sh collects them into tables.
 */
#ifndef MSCCLPP_BENCH_H_
#define MSCCLPP_BENCH_H_

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t bench_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void bench_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#define BENCH_DIE(...)                                   \
  do {                                                   \
    fprintf(stderr, "bench: " __VA_ARGS__);              \
    fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);   \
    exit(2);                                             \
  } while (0)

/* For the programs that link the library (they include mscclpp.h): dies naming the call, its
 * result's text and comm's last error (NULL: the process's) unless it returned mscclppSuccess. */
#define BENCH_CK(comm, call)                                                                     \
  do {                                                                                           \
    mscclppResult_t r_ = (call);                                                                 \
    if (r_ != mscclppSuccess)                                                                    \
      BENCH_DIE("%s: %s: %s", #call, mscclppGetErrorString(r_), mscclppGetLastError(comm));      \
  } while (0)

static int bench_cmp_u64(const void* a, const void* b)
{
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v). */
static inline uint64_t bench_median(uint64_t* v, size_t n)
{
  if (n == 0) return 0;
  qsort(v, n, sizeof(*v), bench_cmp_u64);
  return v[n / 2];
}

static inline int bench_env_int(const char* name, int def)
{
  const char* s = getenv(name);
  return (s && *s) ? atoi(s) : def;
}

static inline double bench_env_double(const char* name, double def)
{
  const char* s = getenv(name);
  return (s && *s) ? atof(s) : def;
}

/* Pin the calling thread (and what it starts later) to one CPU. */
static inline void bench_pin(int cpu)
{
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) BENCH_DIE("sched_setaffinity(%d): %s", cpu, strerror(errno));
}

typedef struct {
  int32_t rank;
  int32_t kind; /* 0: started, 1: ready (value: CLOCK_MONOTONIC ns) */
  int64_t value;
} bench_record;

static inline void bench_report(int kind, int64_t value)
{
  int fd = bench_env_int("BENCH_REPORT_FD", -1);
  if (fd < 0) return;
  bench_record r = {bench_env_int("BENCH_RANK", 0), kind, value};
  if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r)) BENCH_DIE("report: %s", strerror(errno));
}

/* Tell the launcher this child is up, then block until it releases all. */
/* The entries of directory path other than "." and ".." (of /proc/self/task: the
 * process's threads; of /proc/self/fd: its descriptors, one of them the directory's
 * own), or -1. */
static inline int bench_count_entries(const char* path)
{
  DIR* d = opendir(path);
  if (d == NULL) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static inline void bench_start(void)
{
  int fd = bench_env_int("BENCH_RELEASE_FD", -1);
  bench_report(0, 0);
  if (fd < 0) return;
  char c;
  ssize_t n;
  do n = read(fd, &c, 1);
  while (n < 0 && errno == EINTR);
  close(fd);
}

static inline void bench_ready(void) { bench_report(1, (int64_t)bench_now_ns()); }

static inline void bench_result(const char* key, double value)
{
  printf("RESULT %s %.6g\n", key, value);
  fflush(stdout);
}

/* Writes size bytes from src to dst in process pid with process_vm_writev, as many calls as it
 * takes (one, unless the kernel stops short); dies on a failure. */
static inline void bench_vm_write(pid_t pid, const void* src, void* dst, size_t size)
{
  size_t done = 0;
  while (done < size) {
    struct iovec l = {(char*)src + done, size - done}, rv = {(char*)dst + done, size - done};
    ssize_t n = process_vm_writev(pid, &l, 1, &rv, 1, 0);
    if (n <= 0) BENCH_DIE("process_vm_writev: %s", strerror(errno));
    done += (size_t)n;
  }
}

#endif
