/*
 * boot_gofloor: the Go floor of the bootstrap's init, a reference for
 * bench.sh. Started by launch:
 *
 *   launch N boot_gofloor
 *
 * Runs boot_tcp.c's init exchange in Go (gofloor/gofloor.go, linked as
 * libgofloor.so) and reports the time from the release to the ring formed,
 * as boot_tcp and boot_mscclpp do. Like boot_mscclpp, it makes one cheap
 * call into the Go library before the release, so the Go runtime's start is
 * not timed. Ranks listen on 127.0.0.1, or MSCCLPP_TEST_NODE_ADDR.
 */
#include "bench.h"
#include "libgofloor.h"

int main(void)
{
  int rank = bench_env_int("BENCH_RANK", 0), n = bench_env_int("BENCH_NRANKS", 1);
  const char* addr = getenv("BENCH_ADDR");
  if (!addr) BENCH_DIE("run me through launch");
  const char* mine = getenv("MSCCLPP_TEST_NODE_ADDR");
  if (!mine || !*mine) mine = "127.0.0.1";
  gofloorWarm();
  bench_start();
  int step = gofloorInit(n, rank, (char*)addr, (char*)mine);
  if (step != 0) BENCH_DIE("rank %d: gofloor init failed at step %d", rank, step);
  bench_ready();
  return 0;
}
