/*
 * launch: start N copies of a test program as the ranks of one job, no MPI.
 *
 *   launch [-n N] [-t SECONDS] [--expect-fail RANKS] [-e VAR=VALUE]... [--] prog [args...]
 *
 * Each rank r gets, in its environment:
 *   MSCCLPP_TEST_RANK=r  MSCCLPP_TEST_NRANKS=N
 *   MSCCLPP_TEST_ADDR=127.0.0.1:P   (P..P+15 were free TCP ports when picked)
 *   MSCCLPP_TEST_DIR=<a fresh temp dir, removed afterwards>
 * Each rank runs in its own process group; its stdout and stderr lines are
 * printed prefixed with "[rank r] ". After SECONDS (default 60) the ranks
 * still running are named and their whole process groups killed.
 *
 * -e sets VAR for every rank; in VALUE, {ADDR} and {ADDR+k} become
 * 127.0.0.1:P and 127.0.0.1:P+k, {PORT} and {PORT+k} the port alone,
 * {DIR} the temp dir and {RANK} the rank.
 *
 * RANKS is a comma list of ranks that are expected to die (killed by a
 * signal or a non-zero exit); every other rank must exit 0. The exit status
 * is 0 only when every rank did as expected; 124 after a timeout, else 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ports.h"

#define MAX_RANKS 256
#define NPORTS 16
#define LINE_MAX_BYTES 65536

struct rank
{
  pid_t pid;
  int fd;          /* read end of its output pipe, -1 once closed */
  int running;     /* not reaped yet */
  int status;      /* wait status once reaped */
  double exitedAt; /* when reaped */
  int expectFail;
  char* buf; /* partial line */
  size_t len;
};

static struct rank ranks[MAX_RANKS];
static int nranks = 1;
static volatile sig_atomic_t interrupted = 0;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char* fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "launch: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(2);
}

static void usage(void)
{
  fprintf(stderr, "usage: launch [-n N] [-t SECONDS] [--expect-fail RANKS] [-e VAR=VALUE]... [--] prog [args...]\n");
  exit(2);
}

#define MAX_ENVS 32
static const char* envs[MAX_ENVS];
static int nenvs;

/* VALUE with its {...} placeholders expanded (malloc'd). */
static char* expand(const char* v, int port, const char* dir, int rank)
{
  size_t cap = strlen(v) + 4096;
  char* out = malloc(cap);
  size_t o = 0;
  while (*v && o + 600 < cap) {
    int k = 0, n = 0;
    if (*v == '{') {
      if (sscanf(v, "{ADDR+%d}%n", &k, &n) == 1 && n > 0) {
        o += (size_t)snprintf(out + o, cap - o, "127.0.0.1:%d", port + k);
      } else if (strncmp(v, "{ADDR}", 6) == 0) {
        o += (size_t)snprintf(out + o, cap - o, "127.0.0.1:%d", port);
        n = 6;
      } else if (sscanf(v, "{PORT+%d}%n", &k, &n) == 1 && n > 0) {
        o += (size_t)snprintf(out + o, cap - o, "%d", port + k);
      } else if (strncmp(v, "{PORT}", 6) == 0) {
        o += (size_t)snprintf(out + o, cap - o, "%d", port);
        n = 6;
      } else if (strncmp(v, "{DIR}", 5) == 0) {
        o += (size_t)snprintf(out + o, cap - o, "%s", dir);
        n = 5;
      } else if (strncmp(v, "{RANK}", 6) == 0) {
        o += (size_t)snprintf(out + o, cap - o, "%d", rank);
        n = 6;
      }
      if (n > 0) {
        v += n;
        continue;
      }
    }
    out[o++] = *v++;
  }
  out[o] = '\0';
  return out;
}

static void on_signal(int sig)
{
  (void)sig;
  interrupted = 1;
}

static void write_all(int fd, const char* p, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    p += w;
    n -= (size_t)w;
  }
}

/* Print one line of rank r's output with its prefix, in one write. */
static void emit_line(int r, const char* s, size_t n)
{
  char prefix[32];
  int pl = snprintf(prefix, sizeof prefix, "[rank %d] ", r);
  char* out = malloc((size_t)pl + n + 1);
  if (out == NULL)
    return;
  memcpy(out, prefix, (size_t)pl);
  memcpy(out + pl, s, n);
  out[(size_t)pl + n] = '\n';
  write_all(STDOUT_FILENO, out, (size_t)pl + n + 1);
  free(out);
}

static void flush_lines(int r, int all)
{
  struct rank* k = &ranks[r];
  size_t start = 0;
  for (size_t i = 0; i < k->len; i++) {
    if (k->buf[i] == '\n') {
      emit_line(r, k->buf + start, i - start);
      start = i + 1;
    }
  }
  if (all && start < k->len) {
    emit_line(r, k->buf + start, k->len - start);
    start = k->len;
  }
  memmove(k->buf, k->buf + start, k->len - start);
  k->len -= start;
}

static void close_rank_fd(int r)
{
  if (ranks[r].fd >= 0) {
    flush_lines(r, 1);
    close(ranks[r].fd);
    ranks[r].fd = -1;
  }
}

/* Read what is there; close on EOF. */
static void drain(int r)
{
  struct rank* k = &ranks[r];
  for (;;) {
    if (k->len >= LINE_MAX_BYTES) { /* an endless line: cut it */
      emit_line(r, k->buf, k->len);
      k->len = 0;
    }
    ssize_t n = read(k->fd, k->buf + k->len, 4096);
    if (n > 0) {
      k->len += (size_t)n;
      flush_lines(r, 0);
      continue;
    }
    if (n == 0) {
      close_rank_fd(r);
      return;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      close_rank_fd(r);
    return;
  }
}

static int rm_entry(const char* path, const struct stat* sb, int flag, struct FTW* ftw)
{
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static void parse_ranks(const char* s)
{
  char* copy = strdup(s);
  char* save = NULL;
  for (char* tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char* end;
    long r = strtol(tok, &end, 10);
    if (*end != '\0' || r < 0 || r >= MAX_RANKS)
      die("bad rank '%s' in --expect-fail", tok);
    ranks[r].expectFail = 1;
  }
  free(copy);
}

static void describe(int status, char* out, size_t n)
{
  if (WIFEXITED(status))
    snprintf(out, n, "exit %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(out, n, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    snprintf(out, n, "status 0x%x", status);
}

int main(int argc, char** argv)
{
  double timeout = 60;
  int i = 1;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
      nranks = atoi(argv[++i]);
    } else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
      timeout = atof(argv[++i]);
    } else if (strcmp(argv[i], "--expect-fail") == 0 && i + 1 < argc) {
      parse_ranks(argv[++i]);
    } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc) {
      if (strchr(argv[i + 1], '=') == NULL || nenvs == MAX_ENVS)
        usage();
      envs[nenvs++] = argv[++i];
    } else if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (argv[i][0] == '-') {
      usage();
    } else {
      break;
    }
  }
  if (i >= argc)
    usage();
  if (nranks < 1 || nranks > MAX_RANKS)
    die("-n must be in 1..%d", MAX_RANKS);
  if (timeout <= 0)
    die("-t must be positive");
  char** progArgv = argv + i;

  srand((unsigned)time(NULL) ^ ((unsigned)getpid() << 8));
  int port = pick_ports(NPORTS);
  if (port < 0)
    die("could not find %d free consecutive ports", NPORTS);

  const char* tmpRoot = getenv("TMPDIR");
  if (tmpRoot == NULL || *tmpRoot == '\0')
    tmpRoot = "/tmp";
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/mscclpp-test-XXXXXX", tmpRoot);
  if (mkdtemp(dir) == NULL)
    die("mkdtemp %s: %s", dir, strerror(errno));

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  char addr[64], nr[16];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  snprintf(nr, sizeof nr, "%d", nranks);
  fflush(stdout);

  for (int r = 0; r < nranks; r++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
      die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
      die("fork: %s", strerror(errno));
    if (pid == 0) {
      setpgid(0, 0);
      signal(SIGPIPE, SIG_DFL);
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      dup2(p[1], STDOUT_FILENO);
      dup2(p[1], STDERR_FILENO);
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        close(devnull);
      }
      char rs[16];
      snprintf(rs, sizeof rs, "%d", r);
      setenv("MSCCLPP_TEST_RANK", rs, 1);
      setenv("MSCCLPP_TEST_NRANKS", nr, 1);
      setenv("MSCCLPP_TEST_ADDR", addr, 1);
      setenv("MSCCLPP_TEST_DIR", dir, 1);
      for (int e = 0; e < nenvs; e++) {
        char* name = strdup(envs[e]);
        char* eq = strchr(name, '=');
        *eq = '\0';
        setenv(name, expand(eq + 1, port, dir, r), 1);
      }
      execvp(progArgv[0], progArgv);
      fprintf(stderr, "launch: exec %s: %s\n", progArgv[0], strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid); /* also in the parent: no race with kill(-pid) */
    close(p[1]);
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    ranks[r].pid = pid;
    ranks[r].fd = p[0];
    ranks[r].running = 1;
    ranks[r].buf = malloc(LINE_MAX_BYTES + 8192);
    if (ranks[r].buf == NULL)
      die("out of memory");
  }

  double start = now();
  double deadline = start + timeout;
  int timedOut = 0;
  double killDeadline = 0; /* after a kill: how long we still wait */
  const double grace = 2.0; /* output grace after a rank exited */

  for (;;) {
    /* reap */
    for (;;) {
      int st;
      pid_t pid = waitpid(-1, &st, WNOHANG);
      if (pid <= 0)
        break;
      for (int r = 0; r < nranks; r++) {
        if (ranks[r].pid == pid && ranks[r].running) {
          ranks[r].running = 0;
          ranks[r].status = st;
          ranks[r].exitedAt = now();
        }
      }
    }
    double t = now();
    int alive = 0, open = 0;
    for (int r = 0; r < nranks; r++) {
      if (ranks[r].running)
        alive++;
      if (ranks[r].fd >= 0) {
        /* a rank that has exited but whose pipe is still held (by a
         * descendant): stop listening after the grace, kill the group */
        if (!ranks[r].running && t > ranks[r].exitedAt + grace) {
          drain(r);
          close_rank_fd(r);
          kill(-ranks[r].pid, SIGKILL);
        } else {
          open++;
        }
      }
    }
    if (alive == 0 && open == 0)
      break;

    if (!timedOut && (t > deadline || interrupted)) {
      timedOut = 1;
      char list[4096] = "";
      size_t off = 0;
      for (int r = 0; r < nranks; r++) {
        if (ranks[r].running)
          off += (size_t)snprintf(list + off, sizeof list - off, " %d", r);
        if (off >= sizeof list)
          break;
      }
      char msg[4400];
      int n = snprintf(msg, sizeof msg, "launch: %s after %.0f s; ranks still running:%s; killing them\n",
                       interrupted ? "interrupted" : "TIMEOUT", t - start, list);
      write_all(STDOUT_FILENO, msg, (size_t)n);
      for (int r = 0; r < nranks; r++) {
        if (ranks[r].running) {
          kill(-ranks[r].pid, SIGKILL);
          kill(ranks[r].pid, SIGKILL);
        }
      }
      killDeadline = t + 5;
    }
    if (timedOut && t > killDeadline) {
      /* children do not go away: give up on them */
      for (int r = 0; r < nranks; r++)
        close_rank_fd(r);
      break;
    }

    struct pollfd pfds[MAX_RANKS];
    int idx[MAX_RANKS];
    int np = 0;
    for (int r = 0; r < nranks; r++) {
      if (ranks[r].fd >= 0) {
        pfds[np].fd = ranks[r].fd;
        pfds[np].events = POLLIN;
        pfds[np].revents = 0;
        idx[np] = r;
        np++;
      }
    }
    int wait_ms = 50;
    if (np > 0) {
      int n = poll(pfds, (nfds_t)np, wait_ms);
      if (n > 0) {
        for (int k = 0; k < np; k++)
          if (pfds[k].revents)
            drain(idx[k]);
      }
    } else {
      struct timespec ts = {0, 20 * 1000000L};
      nanosleep(&ts, NULL);
    }
  }

  for (int r = 0; r < nranks; r++)
    close_rank_fd(r);

  int ok = !timedOut;
  char summary[8192];
  size_t off = (size_t)snprintf(summary, sizeof summary, "launch: %.1f s;", now() - start);
  for (int r = 0; r < nranks; r++) {
    char d[128];
    int good;
    if (ranks[r].running) {
      snprintf(d, sizeof d, "did not exit");
      good = 0;
    } else {
      describe(ranks[r].status, d, sizeof d);
      int exited0 = WIFEXITED(ranks[r].status) && WEXITSTATUS(ranks[r].status) == 0;
      good = ranks[r].expectFail ? !exited0 : exited0;
    }
    if (!good)
      ok = 0;
    if (off < sizeof summary)
      off += (size_t)snprintf(summary + off, sizeof summary - off, " rank %d: %s%s%s;", r, d,
                              ranks[r].expectFail ? " (expected to fail)" : "", good ? "" : " <- BAD");
  }
  if (off < sizeof summary)
    snprintf(summary + off, sizeof summary - off, " %s\n", ok ? "OK" : "FAILED");
  write_all(STDOUT_FILENO, summary, strlen(summary));

  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (timedOut)
    return 124;
  return ok ? 0 : 1;
}
