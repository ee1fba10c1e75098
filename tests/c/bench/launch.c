/*
 * launch: start N local ranks of a benchmark program and release them at once.
 *
 *   launch [-p] [-v] [-t seconds] N program [args...]
 *
 * Each child gets BENCH_RANK, BENCH_NRANKS, BENCH_ADDR (127.0.0.1:port, a
 * port free a moment ago), BENCH_RELEASE_FD and BENCH_REPORT_FD (see
 * bench.h). Once all N children have reported that they are up (and are
 * blocked on the release pipe), the launcher notes the time and closes the
 * pipe, which wakes them all. When every child has exited it prints
 *
 *   LAUNCH init_ns <last ready - release>
 *
 * (when every child reported ready) and exits with the first failing
 * child's status. -p pins rank r to CPU r % ncpu; -t kills the children
 * after that many seconds (default 120); -v prints each rank's ready time.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "../ports.h"
#include "bench.h"

static pid_t pids[1024];
static int npids;

static void on_alarm(int sig)
{
  (void)sig;
  static const char msg[] = "launch: timeout, killing the ranks\n";
  if (write(2, msg, sizeof(msg) - 1) < 0) {
  }
  for (int i = 0; i < npids; i++)
    if (pids[i] > 0) kill(pids[i], SIGKILL);
}

int main(int argc, char** argv)
{
  int pin = 0, timeout = 120, verbose = 0, opt;
  while ((opt = getopt(argc, argv, "+pvt:")) != -1) {
    if (opt == 'p') pin = 1;
    else if (opt == 'v') verbose = 1;
    else if (opt == 't') timeout = atoi(optarg);
    else BENCH_DIE("usage: launch [-p] [-v] [-t seconds] N program [args...]");
  }
  if (argc - optind < 2) BENCH_DIE("usage: launch [-p] [-v] [-t seconds] N program [args...]");
  int n = atoi(argv[optind]);
  if (n < 1 || n > 1024) BENCH_DIE("bad N %s", argv[optind]);
  char** prog = &argv[optind + 1];
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

  int rel[2], rep[2];
  if (pipe(rel) != 0 || pipe(rep) != 0) BENCH_DIE("pipe: %s", strerror(errno));
  fcntl(rel[1], F_SETFD, FD_CLOEXEC);
  fcntl(rep[0], F_SETFD, FD_CLOEXEC);
  char addr[64], buf[32];
  srand((unsigned)getpid() ^ (unsigned)bench_now_ns());
  int port = pick_ports(1); /* below the ephemeral range: see ports.h */
  if (port < 0) BENCH_DIE("no free port for the root");
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
  setenv("BENCH_ADDR", addr, 1);
  snprintf(buf, sizeof(buf), "%d", n);
  setenv("BENCH_NRANKS", buf, 1);
  snprintf(buf, sizeof(buf), "%d", rel[0]);
  setenv("BENCH_RELEASE_FD", buf, 1);
  snprintf(buf, sizeof(buf), "%d", rep[1]);
  setenv("BENCH_REPORT_FD", buf, 1);

  signal(SIGALRM, on_alarm);
  alarm((unsigned)timeout);
  for (int r = 0; r < n; r++) {
    pid_t p = fork();
    if (p < 0) BENCH_DIE("fork: %s", strerror(errno));
    if (p == 0) {
      snprintf(buf, sizeof(buf), "%d", r);
      setenv("BENCH_RANK", buf, 1);
      if (pin) bench_pin((int)(r % ncpu));
      execvp(prog[0], prog);
      fprintf(stderr, "launch: exec %s: %s\n", prog[0], strerror(errno));
      _exit(127);
    }
    pids[npids++] = p;
  }
  close(rel[0]);
  close(rep[1]);

  int started = 0, ready = 0;
  uint64_t t0 = 0;
  int64_t last = 0, readyAt[1024] = {0};
  bench_record rec;
  for (;;) {
    ssize_t k = read(rep[0], &rec, sizeof(rec));
    if (k < 0 && errno == EINTR) continue;
    if (k != (ssize_t)sizeof(rec)) break; /* EOF: every child exited */
    if (rec.kind == 0 && ++started == n) {
      t0 = bench_now_ns();
      close(rel[1]);
    } else if (rec.kind == 1) {
      ready++;
      if (rec.rank >= 0 && rec.rank < n) readyAt[rec.rank] = rec.value;
      if (rec.value > last) last = rec.value;
    }
  }
  if (started < n) close(rel[1]);

  int rc = 0;
  for (int i = 0; i < npids; i++) {
    int st;
    while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
    }
    pids[i] = 0;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code != 0) {
      fprintf(stderr, "launch: rank %d (%s) exited with %d\n", i, prog[0], code);
      if (rc == 0) rc = code;
    }
  }
  if (verbose && t0 != 0)
    for (int r = 0; r < n; r++)
      fprintf(stderr, "launch: rank %d ready at %.3f ms\n", r, readyAt[r] ? (double)(readyAt[r] - (int64_t)t0) * 1e-6 : -1.0);
  if (rc == 0 && ready == n && t0 != 0) printf("LAUNCH init_ns %lld\n", (long long)(last - (int64_t)t0));
  fflush(stdout);
  return rc;
}
