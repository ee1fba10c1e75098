/*
 * perf_idfile.h: the unique id through a file every rank can read
 * (--id-file PATH), for launchers without a key-value store; for perf.c
 * (included once there; static functions).
 *
 * The file is PATH.JOB, JOB the job's id: --job-id (or MSCCLPP_PERF_JOB_ID),
 * else SLURM_JOB_ID.SLURM_STEP_ID, the PMIx namespace, or Open MPI's job id;
 * PATH itself when none is known. Its one line: "mscclpp-perf-id 1 JOB
 * NRANKS HEX" (HEX: the mscclppUniqueId).
 *  - Rank 0 removes whatever an earlier run left at that name, writes the id
 *    to PATH.JOB.tmp.PID (O_CREAT|O_EXCL, mode 0600) and renames it over
 *    PATH.JOB: a reader sees the whole file or none. It rewrites it so every
 *    200 ms until its init returns (every rank has joined by then), then
 *    removes it; also when perf exits early or dies of SIGTERM, SIGINT or
 *    SIGHUP.
 *  - A reader first creates and removes a probe file of its own beside it:
 *    the probe's mtime is "now" on the file system's clock (the server's on
 *    NFS, so no clock skew between nodes counts). It takes only a file whose
 *    mtime is not older than its probe, i.e. one written after it started:
 *    never a file an earlier or crashed run left, which nobody rewrites. The
 *    line must also name the same job and rank count.
 *
 *   idfile_job(explicit, out, len)     the job id used in the name
 *   idfile_publish(path, job, n, id)   rank 0: write, keep fresh (a thread)
 *   idfile_done()                      rank 0: stop and remove
 *   idfile_read(path, job, n, rank, timeout, id)   the others
 * Each int function returns 0 or -1 after printing why (stderr).
 */
#ifndef PERF_IDFILE_H_
#define PERF_IDFILE_H_

#include <mscclpp.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IDFILE_MAGIC "mscclpp-perf-id 1"

static char idfilePath[4096], idfileTmp[4200], idfileLine[512];
static volatile sig_atomic_t idfileStop;
static pthread_t idfileThread;
static int idfileThreadOn;

/* The job id: the explicit one, else the launcher's; '/' and odd characters become '_'. */
static void idfile_job(const char* explicitJob, char* out, size_t len)
{
  const char* s = explicitJob != NULL && *explicitJob ? explicitJob : getenv("MSCCLPP_PERF_JOB_ID");
  char slurm[128];
  const char *sj = getenv("SLURM_JOB_ID"), *ss = getenv("SLURM_STEP_ID");
  if ((s == NULL || *s == '\0') && sj != NULL && *sj) {
    snprintf(slurm, sizeof slurm, "%s.%s", sj, ss != NULL && *ss ? ss : "0");
    s = slurm;
  }
  if (s == NULL || *s == '\0') s = getenv("PMIX_NAMESPACE");
  if (s == NULL || *s == '\0') s = getenv("OMPI_MCA_ess_base_jobid");
  if (s == NULL) s = "";
  snprintf(out, len, "%s", s);
  for (char* p = out; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
          *p == '-' || *p == '_'))
      *p = '_';
}

static void idfile_name(const char* path, const char* job, char* out, size_t len)
{
  if (*job)
    snprintf(out, len, "%s.%s", path, job);
  else
    snprintf(out, len, "%s", path);
}

static void idfile_remove(void)
{
  if (idfilePath[0]) unlink(idfilePath);
  if (idfileTmp[0]) unlink(idfileTmp);
}

static void idfile_on_signal(int sig)
{
  idfile_remove();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* One atomic write of idfileLine: temp file (0600, exclusive) renamed over the name. */
static int idfile_write(void)
{
  unlink(idfileTmp);
  int fd = open(idfileTmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return -1;
  size_t len = strlen(idfileLine);
  int ok = write(fd, idfileLine, len) == (ssize_t)len;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(idfileTmp, idfilePath) != 0) {
    unlink(idfileTmp);
    return -1;
  }
  return 0;
}

static void* idfile_refresh(void* arg)
{
  (void)arg;
  while (!idfileStop) {
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    if (!idfileStop && idfile_write() != 0)
      fprintf(stderr, "perf rank 0: rewriting %s: %s\n", idfilePath, strerror(errno));
  }
  return NULL;
}

static int idfile_publish(const char* path, const char* job, int nranks, const mscclppUniqueId* id)
{
  idfile_name(path, job, idfilePath, sizeof idfilePath);
  snprintf(idfileTmp, sizeof idfileTmp, "%s.tmp.%d", idfilePath, (int)getpid());
  int n = snprintf(idfileLine, sizeof idfileLine, "%s %s %d ", IDFILE_MAGIC, *job ? job : "-", nranks);
  const unsigned char* p = (const unsigned char*)id;
  for (size_t i = 0; i < sizeof *id; i++) n += snprintf(idfileLine + n, sizeof idfileLine - (size_t)n, "%02x", p[i]);
  snprintf(idfileLine + n, sizeof idfileLine - (size_t)n, "\n");
  atexit(idfile_remove);
  signal(SIGTERM, idfile_on_signal);
  signal(SIGINT, idfile_on_signal);
  signal(SIGHUP, idfile_on_signal);
  if (unlink(idfilePath) == 0) fprintf(stderr, "perf rank 0: removed %s, left by an earlier run\n", idfilePath);
  if (idfile_write() != 0) {
    fprintf(stderr, "perf rank 0: cannot write %s: %s\n", idfilePath, strerror(errno));
    return -1;
  }
  idfileStop = 0;
  idfileThreadOn = pthread_create(&idfileThread, NULL, idfile_refresh, NULL) == 0;
  return 0;
}

static void idfile_done(void)
{
  idfileStop = 1;
  if (idfileThreadOn) pthread_join(idfileThread, NULL);
  idfileThreadOn = 0;
  idfile_remove();
  idfilePath[0] = idfileTmp[0] = '\0'; /* nothing left for the exit and signal handlers */
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
}

/* The mtime of a file this reader creates now beside the id file, on the file system's clock. */
static int idfile_probe(const char* name, int rank, struct timespec* out)
{
  char probe[4300];
  snprintf(probe, sizeof probe, "%s.probe.%d.%d", name, rank, (int)getpid());
  int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    fprintf(stderr, "perf rank %d: cannot create %s (the id file's directory must be writable): %s\n", rank, probe,
            strerror(errno));
    return -1;
  }
  struct stat st;
  int rc = fstat(fd, &st);
  close(fd);
  unlink(probe);
  if (rc != 0) return -1;
  *out = st.st_mtim;
  return 0;
}

/* 1 when name holds a line for this job and rank count written at or after since. */
static int idfile_try(const char* name, const char* job, int nranks, const struct timespec* since, mscclppUniqueId* id)
{
  FILE* f = fopen(name, "r");
  if (f == NULL) return 0;
  struct stat st;
  char magic[32], ver[8], fjob[256], hex[2 * sizeof(mscclppUniqueId) + 2];
  int fn = 0, ok = fstat(fileno(f), &st) == 0 &&
                   (st.st_mtim.tv_sec > since->tv_sec ||
                    (st.st_mtim.tv_sec == since->tv_sec && st.st_mtim.tv_nsec >= since->tv_nsec)) &&
                   fscanf(f, "%31s %7s %255s %d %257s", magic, ver, fjob, &fn, hex) == 5;
  fclose(f);
  if (!ok || strcmp(magic, "mscclpp-perf-id") != 0 || strcmp(ver, "1") != 0 || strcmp(fjob, *job ? job : "-") != 0 ||
      fn != nranks || strlen(hex) != 2 * sizeof *id)
    return 0;
  unsigned char* p = (unsigned char*)id;
  for (size_t i = 0; i < sizeof *id; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 0;
    p[i] = (unsigned char)v;
  }
  return 1;
}

static int idfile_read(const char* path, const char* job, int nranks, int rank, double timeout, mscclppUniqueId* id)
{
  char name[4096];
  idfile_name(path, job, name, sizeof name);
  struct timespec since, t0, t;
  if (idfile_probe(name, rank, &since) != 0) return -1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (idfile_try(name, job, nranks, &since, id)) return 0;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > timeout) {
      fprintf(stderr, "perf rank %d: no id for job '%s' of %d ranks written to %s in %.0f s since this rank started\n",
              rank, *job ? job : "-", nranks, name, timeout);
      return -1;
    }
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

#endif
