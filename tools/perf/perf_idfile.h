/*
 * perf_idfile.h: the unique id through a file every rank can read
 * (--id-file PATH), for launchers without a key-value store; for perf.c
 * (included once there; static functions). Safe on a file system other
 * users share (/tmp, NFS home directories).
 *
 * The file is PATH.JOB, JOB the job's id: --job-id (or MSCCLPP_PERF_JOB_ID),
 * else SLURM_JOB_ID.SLURM_STEP_ID, the PMIx namespace, or Open MPI's job id;
 * PATH itself when none is known. Its one line: "mscclpp-perf-id 3 JOB
 * NRANKS TOKEN NONCE HEX" (TOKEN: the job's launcher token, idfile_token;
 * NONCE: 16 random hex digits of this run of rank 0; HEX: the
 * mscclppUniqueId).
 *  - Rank 0 creates PATH.JOB with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600. Where
 *    something is already there it never follows or removes it blindly: a
 *    symbolic link, something not a regular file, or a file of another user
 *    is refused (rank 0 exits saying so); a file of its own user is watched
 *    for 0.8 s: if it changes (another live run rewrites it: two jobs on one
 *    path) rank 0 refuses and says so, else it is an earlier run's leftover
 *    and is removed. It then rewrites the file every 200 ms (a temporary
 *    file of an unpredictable name, mkostemp, renamed over it) until its
 *    init returns (every rank has joined by then), then removes it; also
 *    when perf exits early or dies of SIGTERM, SIGINT or SIGHUP. Each
 *    rewrite and the removal first check that the file still holds this
 *    run's line (its nonce): a file another run put there is left alone.
 *  - A reader first creates and removes a probe file of its own beside it
 *    (mkostemp: an unpredictable name, created exclusively, never through a
 *    link): the probe's mtime is "now" on the file system's clock (the
 *    server's on NFS, so no clock skew between nodes counts). It opens the
 *    id file with O_NOFOLLOW and takes it only when it is a regular file of
 *    its own user with mode 0600, written at or after its probe (never a
 *    file an earlier or crashed run left, which nobody rewrites) and not
 *    after the file system's "now" (a future-dated file is refused), naming
 *    the same job and rank count. A refusal is said once, on stderr, with
 *    its reason; the reader keeps waiting for a file it may take. A file
 *    of the same job id but another launcher token is another job's (two
 *    jobs given one job id): the reader fails at once, saying so, rather
 *    than join that job.
 *  - The launcher token is what only one job's ranks share:
 *    MSCCLPP_PERF_JOB_NONCE (a launcher sets it to one random value per
 *    job; perf's own local ranks get one from their parent), else the
 *    launcher's own job identity (Slurm's job and step, the PMIx namespace,
 *    Open MPI's job id), else "-". perf.c checks it again once the
 *    communicator exists (job_check), on every rank against every other.
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

#define IDFILE_MAGIC "mscclpp-perf-id 3"

static char idfilePath[4096], idfileTmp[4200], idfileLine[640];
static volatile sig_atomic_t idfileStop;
static pthread_t idfileThread;
static int idfileThreadOn;

/* Replaces '/' and odd characters of s with '_'. */
static void idfile_sanitise(char* s)
{
  for (char* p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
          *p == '-' || *p == '_'))
      *p = '_';
}

/* The launcher's own job identity: Slurm's job and step, the PMIx namespace or Open MPI's job id; "". */
static void idfile_launcher_job(char* out, size_t len)
{
  const char *sj = getenv("SLURM_JOB_ID"), *ss = getenv("SLURM_STEP_ID"), *s = NULL;
  if (sj != NULL && *sj) {
    snprintf(out, len, "%s.%s", sj, ss != NULL && *ss ? ss : "0");
  } else {
    s = getenv("PMIX_NAMESPACE");
    if (s == NULL || *s == '\0') s = getenv("OMPI_MCA_ess_base_jobid");
    snprintf(out, len, "%s", s != NULL ? s : "");
  }
  idfile_sanitise(out);
}

/* The job id: the explicit one (--job-id, MSCCLPP_PERF_JOB_ID), else the launcher's, sanitised. */
static void idfile_job(const char* explicitJob, char* out, size_t len)
{
  const char* s = explicitJob != NULL && *explicitJob ? explicitJob : getenv("MSCCLPP_PERF_JOB_ID");
  if (s == NULL || *s == '\0') {
    idfile_launcher_job(out, len);
    return;
  }
  snprintf(out, len, "%s", s);
  idfile_sanitise(out);
}

/* The job's launcher token (see above), sanitised; "-" when nothing is known. */
static void idfile_token(char* out, size_t len)
{
  const char* s = getenv("MSCCLPP_PERF_JOB_NONCE");
  if (s != NULL && *s != '\0') {
    snprintf(out, len, "n%s", s);
    idfile_sanitise(out);
    return;
  }
  idfile_launcher_job(out, len);
  if (*out == '\0') snprintf(out, len, "-");
}

static void idfile_name(const char* path, const char* job, char* out, size_t len)
{
  if (*job)
    snprintf(out, len, "%s.%s", path, job);
  else
    snprintf(out, len, "%s", path);
}

/* 1 when the file at idfilePath holds exactly this run's line (async-signal-safe). */
static int idfile_ours(void)
{
  int fd = open(idfilePath, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[sizeof idfileLine];
  size_t len = strlen(idfileLine), got = 0;
  ssize_t n;
  while (got < sizeof buf && (n = read(fd, buf + got, sizeof buf - got)) > 0) got += (size_t)n;
  close(fd);
  return got == len && memcmp(buf, idfileLine, len) == 0;
}

/* Removes the id file if it is still this run's, and the temporary file (async-signal-safe). */
static void idfile_remove(void)
{
  if (idfilePath[0] && idfile_ours()) unlink(idfilePath);
  if (idfileTmp[0]) unlink(idfileTmp);
}

static void idfile_on_signal(int sig)
{
  idfile_remove();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Writes idfileLine to fd and closes it; 0 or -1 (errno). */
static int idfile_put(int fd)
{
  size_t len = strlen(idfileLine);
  int ok = fchmod(fd, 0600) == 0 && write(fd, idfileLine, len) == (ssize_t)len;
  int e = errno;
  ok = close(fd) == 0 && ok;
  if (!ok) errno = e;
  return ok ? 0 : -1;
}

/* One atomic rewrite: a temporary file (mkostemp: 0600, exclusive, unpredictable) renamed over the name. */
static int idfile_write(void)
{
  snprintf(idfileTmp, sizeof idfileTmp, "%s.tmp.XXXXXX", idfilePath);
  int fd = mkostemp(idfileTmp, O_CLOEXEC);
  if (fd < 0) {
    idfileTmp[0] = '\0';
    return -1;
  }
  if (idfile_put(fd) != 0 || rename(idfileTmp, idfilePath) != 0) {
    int e = errno;
    unlink(idfileTmp);
    idfileTmp[0] = '\0';
    errno = e;
    return -1;
  }
  idfileTmp[0] = '\0';
  return 0;
}

static void* idfile_refresh(void* arg)
{
  (void)arg;
  while (!idfileStop) {
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    if (idfileStop) break;
    if (!idfile_ours()) {
      fprintf(stderr,
              "perf rank 0: %s no longer holds this run's id (another job's rank 0 put its own there: two jobs on "
              "one path?); this run stops rewriting it and will not remove it\n",
              idfilePath);
      break;
    }
    if (idfile_write() != 0) fprintf(stderr, "perf rank 0: rewriting %s: %s\n", idfilePath, strerror(errno));
  }
  return NULL;
}

/* Random hex digits for the nonce. */
static int idfile_nonce(char* out, size_t len)
{
  unsigned char r[8];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  int ok = fd >= 0 && read(fd, r, sizeof r) == (ssize_t)sizeof r;
  if (fd >= 0) close(fd);
  if (!ok) return -1;
  for (size_t i = 0; i < sizeof r && 2 * i + 2 < len; i++) snprintf(out + 2 * i, len - 2 * i, "%02x", r[i]);
  return 0;
}

/* What is already at idfilePath when rank 0 cannot create it: 0 when it was an earlier run's
 * leftover, now removed (or gone); -1 after saying why it is refused. */
static int idfile_existing(void)
{
  struct stat a, b;
  if (lstat(idfilePath, &a) != 0) return errno == ENOENT ? 0 : -1;
  if (S_ISLNK(a.st_mode)) {
    fprintf(stderr, "perf rank 0: %s is a symbolic link: refusing to write through it or remove it\n", idfilePath);
    return -1;
  }
  if (!S_ISREG(a.st_mode)) {
    fprintf(stderr, "perf rank 0: %s is not a regular file: refusing to use it\n", idfilePath);
    return -1;
  }
  if (a.st_uid != geteuid()) {
    fprintf(stderr, "perf rank 0: %s belongs to uid %u, not to this user (uid %u): refusing to use or remove it\n",
            idfilePath, (unsigned)a.st_uid, (unsigned)geteuid());
    return -1;
  }
  for (int i = 0; i < 8; i++) { /* a live run rewrites it every 200 ms: a new inode each time */
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    if (lstat(idfilePath, &b) != 0) return errno == ENOENT ? 0 : -1;
    if (b.st_ino != a.st_ino || b.st_mtim.tv_sec != a.st_mtim.tv_sec || b.st_mtim.tv_nsec != a.st_mtim.tv_nsec ||
        b.st_size != a.st_size) {
      fprintf(stderr,
              "perf rank 0: %s is in use: another live job rewrites it (two jobs on one path, with the same or no "
              "job id); refusing to touch it: give each job its own --job-id or --id-file\n",
              idfilePath);
      return -1;
    }
  }
  if (unlink(idfilePath) == 0) fprintf(stderr, "perf rank 0: removed %s, left by an earlier run\n", idfilePath);
  return 0;
}

static int idfile_publish(const char* path, const char* job, int nranks, const mscclppUniqueId* id)
{
  idfile_name(path, job, idfilePath, sizeof idfilePath);
  char nonce[17] = "";
  if (idfile_nonce(nonce, sizeof nonce) != 0) {
    fprintf(stderr, "perf rank 0: no random nonce for %s: %s\n", idfilePath, strerror(errno));
    return -1;
  }
  char token[128];
  idfile_token(token, sizeof token);
  int n = snprintf(idfileLine, sizeof idfileLine, "%s %s %d %s %s ", IDFILE_MAGIC, *job ? job : "-", nranks, token, nonce);
  const unsigned char* p = (const unsigned char*)id;
  for (size_t i = 0; i < sizeof *id; i++) n += snprintf(idfileLine + n, sizeof idfileLine - (size_t)n, "%02x", p[i]);
  snprintf(idfileLine + n, sizeof idfileLine - (size_t)n, "\n");
  atexit(idfile_remove);
  signal(SIGTERM, idfile_on_signal);
  signal(SIGINT, idfile_on_signal);
  signal(SIGHUP, idfile_on_signal);
  for (int try = 0;; try++) {
    int fd = open(idfilePath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (idfile_put(fd) != 0) {
        fprintf(stderr, "perf rank 0: cannot write %s: %s\n", idfilePath, strerror(errno));
        unlink(idfilePath);
        return -1;
      }
      break;
    }
    if (errno != EEXIST || try == 3) {
      fprintf(stderr, "perf rank 0: cannot create %s: %s\n", idfilePath, strerror(errno));
      idfilePath[0] = '\0';
      return -1;
    }
    if (idfile_existing() != 0) {
      idfilePath[0] = '\0'; /* not ours: nothing to remove at exit */
      return -1;
    }
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

/* The mtime of a file this reader creates now beside the id file, on the file system's clock:
 * an unpredictable name created exclusively (mkostemp), so no link planted there is followed. */
static int idfile_probe(const char* name, int rank, struct timespec* out)
{
  char probe[4300];
  snprintf(probe, sizeof probe, "%s.probe.XXXXXX", name);
  int fd = mkostemp(probe, O_CLOEXEC);
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

static double idfile_secs(const struct timespec* a, const struct timespec* b) /* a - b */
{
  return (double)(a->tv_sec - b->tv_sec) + (double)(a->tv_nsec - b->tv_nsec) * 1e-9;
}

/* Reads name: 1 when it holds a line for this job and rank count that this reader may take;
 * 0 when not (yet), with why (empty: nothing there, or a line of another job or format);
 * -1 when it holds this job id's line with another launcher token, with why. 
 * since: the probe's mtime; elapsed: seconds since the probe. */
static int idfile_try(const char* name, const char* job, int nranks, const struct timespec* since, double elapsed,
                      mscclppUniqueId* id, char* why, size_t whyLen)
{
  why[0] = '\0';
  int fd = open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) snprintf(why, whyLen, "it is a symbolic link");
    return 0;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    snprintf(why, whyLen, "it is not a regular file");
    return 0;
  }
  double age = idfile_secs(&st.st_mtim, since); /* > 0: written after the probe */
  if (st.st_uid != geteuid())
    snprintf(why, whyLen, "it belongs to uid %u, not to this user (uid %u)", (unsigned)st.st_uid, (unsigned)geteuid());
  else if ((st.st_mode & 07777) != 0600)
    snprintf(why, whyLen, "its mode is %04o, not 0600", (unsigned)(st.st_mode & 07777));
  else if (age > elapsed + 2)
    snprintf(why, whyLen, "its mtime is %.0f s ahead of the file system's clock (future-dated)", age - elapsed);
  else if (age < 0 && elapsed > 1)
    snprintf(why, whyLen, "it was written %.1f s before this rank started (stale: an earlier run's?)", -age);
  if (why[0] || age < 0) {
    close(fd);
    return 0;
  }
  char line[700], magic[32], ver[8], fjob[256], ftoken[128], nonce[32], hex[2 * sizeof(mscclppUniqueId) + 2];
  ssize_t n = read(fd, line, sizeof line - 1);
  close(fd);
  if (n <= 0) return 0;
  line[n] = '\0';
  int fn = 0;
  if (sscanf(line, "%31s %7s %255s %d %127s %31s %257s", magic, ver, fjob, &fn, ftoken, nonce, hex) != 7 ||
      strcmp(magic, "mscclpp-perf-id") != 0 || strcmp(ver, "3") != 0 || strcmp(fjob, *job ? job : "-") != 0 ||
      fn != nranks || strlen(nonce) != 16 || strlen(hex) != 2 * sizeof *id)
    return 0;
  char token[128];
  idfile_token(token, sizeof token);
  if (strcmp(ftoken, token) != 0) {
    snprintf(why, whyLen,
             "it is another job's (launcher token %s; this rank's is %s): two jobs were given one job id; give each "
             "its own --job-id, or its launcher a MSCCLPP_PERF_JOB_NONCE",
             ftoken, token);
    return -1;
  }
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
  char name[4096], why[512], said[512] = "";
  idfile_name(path, job, name, sizeof name);
  struct timespec since, t0, t;
  if (idfile_probe(name, rank, &since) != 0) return -1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    double elapsed = idfile_secs(&t, &t0);
    int got = idfile_try(name, job, nranks, &since, elapsed, id, why, sizeof why);
    if (got > 0) return 0;
    if (got < 0) {
      fprintf(stderr, "perf rank %d: refusing %s: %s\n", rank, name, why);
      return -1;
    }
    if (why[0] && strcmp(why, said) != 0) {
      fprintf(stderr, "perf rank %d: refusing %s: %s; waiting for rank 0's\n", rank, name, why);
      snprintf(said, sizeof said, "%s", why);
    }
    if (elapsed > timeout) {
      fprintf(stderr, "perf rank %d: no id for job '%s' of %d ranks written to %s in %.0f s since this rank started%s%s\n",
              rank, *job ? job : "-", nranks, name, timeout, said[0] ? "; refused: " : "", said);
      return -1;
    }
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

#endif
