/*
 * perf_spawn.h: where perf's ranks come from, for perf.c (included once
 * there; static functions).
 *
 *   from_launcher()   1 when a launcher started this process: sets rank,
 *                     nranks, launcherName and (PMIx / PMI-2) opens the store
 *   spawn_ranks(n, argv, timeout)   otherwise: start n local ranks of this
 *                     binary, wait for them, kill the rest when one fails or
 *                     at the timeout; the exit status for perf
 *
 * The launchers, first match wins: tests/c/launch or perf's own spawn
 * (MSCCLPP_TEST_RANK / _NRANKS), PMIx (PMIX_NAMESPACE and PMIX_RANK: Open
 * MPI's mpirun, srun --mpi=pmix; rank and size from PMIx_Init and
 * pmix.job.size), PMI-2 (PMI_FD, PMI_RANK, PMI_SIZE: srun --mpi=pmi2), then
 * the environment alone: OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE,
 * SLURM_PROCID/SLURM_NTASKS (no store: --id-file or MSCCLPP_COMM_ID then).
 * The local ranks are posix_spawn'ed before any library call: fork after the
 * library is loaded is unusable (the Go runtime behind it does not survive
 * fork).
 */
#ifndef PERF_SPAWN_H_
#define PERF_SPAWN_H_

#include "perf_kvs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static int rank = 0, nranks = 1;
static const char* launcherName = "none";

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

static int env_int(const char* a, int* out)
{
  const char* s = getenv(a);
  if (s == NULL || *s == '\0') return 0;
  *out = atoi(s);
  return 1;
}

static int from_launcher(void)
{
  static const char* pairs[][3] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI (environment only)"},
                                   {"PMI_RANK", "PMI_SIZE", "PMI (environment only)"},
                                   {"SLURM_PROCID", "SLURM_NTASKS", "Slurm (environment only)"}};
  if (env_int("MSCCLPP_TEST_RANK", &rank) && env_int("MSCCLPP_TEST_NRANKS", &nranks)) {
    launcherName = getenv("MSCCLPP_PERF_SPAWNED") ? "perf's own local ranks" : "tests/c/launch";
    return 1;
  }
  enum kvs_kind kind = kvs_detect();
  if (kind != KVS_NONE) {
    char err[512];
    if (kvs_open(kind, &rank, &nranks, err, sizeof err) == 0) {
      const char* who = getenv("SLURM_JOB_ID") ? "Slurm's srun" : getenv("OMPI_COMM_WORLD_RANK") ? "Open MPI's mpirun" : NULL;
      static char name[64];
      snprintf(name, sizeof name, "%s%s%s", who ? who : "", who ? " through " : "", kvs_name(kind));
      launcherName = name;
      return 1;
    }
    fprintf(stderr, "perf: the launcher set up %s, but: %s; going on with the environment alone\n", kvs_name(kind),
            err);
    kvs.kind = KVS_NONE;
  }
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    int r, n;
    if (env_int(pairs[i][0], &r) && env_int(pairs[i][1], &n)) {
      rank = r;
      nranks = n;
      launcherName = pairs[i][2];
      return 1;
    }
  }
  return 0;
}

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

/* Reap the children until all are gone; kill the rest 10 s after one fails, or at the deadline. */
static int wait_ranks(int n, pid_t* pids, double timeout)
{
  int* done = calloc((size_t)n, sizeof(int));
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
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
        if (WIFSIGNALED(st))
          fprintf(stderr, "perf: rank %d killed by signal %d\n", r, WTERMSIG(st));
        else
          fprintf(stderr, "perf: rank %d exited with status %d\n", r, WEXITSTATUS(st));
        if (!bad) killAt = now() + 10; /* give the others a chance to report, then stop them */
        bad = 1;
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
  free(done);
  return bad ? 1 : 0;
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
  char nonce[17];
  const char* jn = getenv("MSCCLPP_PERF_JOB_NONCE");
  if ((jn == NULL || *jn == '\0') && idfile_nonce(nonce, sizeof nonce) == 0)
    setenv("MSCCLPP_PERF_JOB_NONCE", nonce, 1); /* what only this run's ranks share (perf.c job_check) */
  pid_t* pids = calloc((size_t)n, sizeof(pid_t));
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
      free(pids);
      return 1;
    }
  }
  int rc = wait_ranks(n, pids, timeout);
  free(pids);
  return rc;
}

#endif
