/*
 * host_ref: the raw references of the host data path, two processes made
 * by fork and pinned to CPUs 0 and 1 (no library involved).
 *
 *   host_ref MODE [maxBytes]   (sizes up to maxBytes, default 256 MiB)
 *
 *   host_ref line      (a) one-way latency of a ping-pong of one shared
 *                          cache line: each side spins (pause) until the
 *                          counter in the line has its parity, then bumps it.
 *   host_ref memcpy    (b) memcpy into an inbox both processes map (shared
 *                          anonymous memory), then a release store of an
 *                          epoch the peer spins on; sizes 8 B .. 256 MiB.
 *   host_ref vmwrite   (c) the same with one process_vm_writev call into the
 *                          peer's private (malloc) inbox instead of memcpy;
 *                          also the cost of one bare 8-byte call (vmcall8).
 *
 * Prints RESULT lines (see pp.h). Epochs live in a shared page, one cache
 * line each; waits spin with a CPU pause, as the processes are pinned to
 * different CPUs.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "pp.h"

#define MAXS (256u << 20)

typedef struct {
  int rank;
  pid_t peer;
  volatile uint64_t* epoch[2]; /* epoch[r]: signals received by rank r */
  uint64_t sent, seen;
  char* src;
  char* inbox[2]; /* (b): both inboxes are mapped by both; (c): same address in both processes */
} ref;

static void spin_wait(void* c)
{
  ref* r = c;
  r->seen++;
  while (__atomic_load_n(r->epoch[r->rank], __ATOMIC_ACQUIRE) < r->seen) bench_pause();
}

static void signal_peer(ref* r) { __atomic_store_n(r->epoch[1 - r->rank], ++r->sent, __ATOMIC_RELEASE); }

static void put_memcpy(void* c, size_t size)
{
  ref* r = c;
  memcpy(r->inbox[1 - r->rank], r->src, size);
  signal_peer(r);
}

static void put_vm(void* c, size_t size)
{
  ref* r = c;
  bench_vm_write(r->peer, r->src, r->inbox[0], size); /* the peer's inbox: same address */
  signal_peer(r);
}

static void line_pingpong(volatile uint64_t* line, int rank)
{
  /* rank 0 moves the counter from even to odd, rank 1 from odd to even;
   * rank 0 times each round trip. */
  int warm = 20000, max = 2000000, k = 0;
  uint64_t* t = rank == 0 ? calloc((size_t)max, sizeof(uint64_t)) : NULL;
  uint64_t start = 0, t0 = 0;
  double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
  for (uint64_t i = 0;; i++) {
    uint64_t want = 2 * i + (uint64_t)rank, v;
    while ((v = __atomic_load_n(line, __ATOMIC_ACQUIRE)) != want && v != UINT64_MAX) bench_pause();
    if (v == UINT64_MAX) break;
    if (rank == 0) {
      uint64_t now = bench_now_ns();
      if (i > (uint64_t)warm) t[k++] = now - t0;
      if (i == (uint64_t)warm) start = now;
      if (k >= max || (i > (uint64_t)warm && (double)(now - start) * 1e-9 > budget)) {
        __atomic_store_n(line, UINT64_MAX, __ATOMIC_RELEASE);
        break;
      }
      t0 = now;
    }
    __atomic_store_n(line, want + 1, __ATOMIC_RELEASE);
  }
  if (rank == 0) {
    bench_result("line.iters", k);
    bench_result("line.oneway_ns", (double)bench_median(t, (size_t)k) / 2);
  }
}

int main(int argc, char** argv)
{
  const char* mode = argc > 1 ? argv[1] : "";
  int isLine = !strcmp(mode, "line"), isMem = !strcmp(mode, "memcpy"), isVm = !strcmp(mode, "vmwrite");
  if (!isLine && !isMem && !isVm) BENCH_DIE("usage: host_ref line|memcpy|vmwrite");
  char* ctl = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (ctl == MAP_FAILED) BENCH_DIE("mmap: %s", strerror(errno));
  memset(ctl, 0, 4096);
  ref r = {0};
  r.epoch[0] = (volatile uint64_t*)(ctl + 64);
  r.epoch[1] = (volatile uint64_t*)(ctl + 128);
  if (isMem) {
    for (int i = 0; i < 2; i++) {
      r.inbox[i] = mmap(NULL, MAXS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (r.inbox[i] == MAP_FAILED) BENCH_DIE("mmap: %s", strerror(errno));
    }
  } else if (isVm) {
    r.inbox[0] = malloc(MAXS);
  }
  if (!isLine) r.src = malloc(MAXS);
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) BENCH_DIE("fork: %s", strerror(errno));
  r.rank = child == 0;
  r.peer = child == 0 ? parent : child;
  bench_pin(r.rank);
  if (!isLine) {
    memset(r.src, 1 + r.rank, MAXS); /* private pages in both processes */
    if (isVm) memset(r.inbox[0], 0, MAXS);
    else memset(r.inbox[r.rank], 0, MAXS);
  }
  /* start together */
  __atomic_add_fetch((uint64_t*)(ctl + 192), 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n((uint64_t*)(ctl + 192), __ATOMIC_ACQUIRE) < 2) bench_pause();

  if (isLine) {
    line_pingpong((volatile uint64_t*)ctl, r.rank);
  } else {
    pp_ops o = {&r, r.rank, r.src, r.inbox[isVm ? 0 : r.rank], isMem ? put_memcpy : put_vm, spin_wait};
    pp_all(&o, isMem ? "memcpy" : "vmwrite", argc > 2 ? (size_t)atoll(argv[2]) : MAXS);
    if (isVm) {
      /* one bare 8-byte process_vm_writev call, rank 0 into rank 1 */
      if (r.rank == 0) {
        int n = 200000;
        struct iovec l = {r.src, 8}, rv = {r.inbox[0], 8};
        for (int i = 0; i < 1000; i++) process_vm_writev(r.peer, &l, 1, &rv, 1, 0);
        uint64_t t0 = bench_now_ns();
        for (int i = 0; i < n; i++)
          if (process_vm_writev(r.peer, &l, 1, &rv, 1, 0) != 8) BENCH_DIE("process_vm_writev: %s", strerror(errno));
        bench_result("vmcall8.ns", (double)(bench_now_ns() - t0) / n);
        __atomic_store_n((uint64_t*)(ctl + 256), 1, __ATOMIC_RELEASE);
      } else {
        while (!__atomic_load_n((uint64_t*)(ctl + 256), __ATOMIC_ACQUIRE)) usleep(1000);
      }
    }
  }
  if (child != 0) {
    int st;
    waitpid(child, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) BENCH_DIE("child failed");
  }
  return 0;
}
