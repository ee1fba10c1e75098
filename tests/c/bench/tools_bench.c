/*
 * tools_bench.c: the cost of the tool dispatch in front of the API.
 *
 *   tools_bench            (run with MSCCLPP_TOOLS naming 0, 1 or 2 pass-through tools)
 *
 * Times, interleaved block by block in this one process and pinned to CPU 0:
 *   plain    a call of a noinline function in this program (the same table
 *            lookup as mscclppGetErrorString)
 *   libref   the same function in another shared library (tools_ref.so):
 *            what mscclppGetErrorString costs without the tool dispatch
 *   errstr   mscclppGetErrorString, through whatever tools are loaded
 *   version  mscclppGetVersion (diagnostic: it enters the Go runtime)
 * Prints "RESULT tools.<key>_ns <median ns per call>" for each, and
 * "RESULT tools.layers <n>". In C: the figures are nanoseconds.
 */
#include "bench.h"
#include "errstrings.h"
#include "mscclpp_tools.h"

#define ITERS 20000
#define MAX_BLOCKS 4096

const char* refErrorString(int code);

#if defined(__clang__)
__attribute__((noinline))
#else
__attribute__((noinline, noipa))
#endif
static const char* plainErrorString(int code)
{
  return benchErrString(code);
}

static volatile uintptr_t sink;

/* ns per call of one block of ITERS calls of EXPR (i is the loop index) */
#define BLOCK(EXPR)                                       \
  ({                                                      \
    uintptr_t s_ = 0;                                     \
    uint64_t t0_ = bench_now_ns();                        \
    for (int i = 0; i < ITERS; i++) s_ += (uintptr_t)(EXPR); \
    uint64_t t1_ = bench_now_ns();                        \
    sink += s_;                                           \
    (t1_ - t0_);                                          \
  })

static uint64_t plain[MAX_BLOCKS], libref[MAX_BLOCKS], errstr[MAX_BLOCKS], version[MAX_BLOCKS];

int main(void)
{
  bench_pin(0);
  double budget = bench_env_double("BENCH_BUDGET_S", 0.3) * 4; /* four figures */
  int v = 0;
  if (mscclppGetVersion(&v) != mscclppSuccess || v != MSCCLPP_VERSION) BENCH_DIE("mscclppGetVersion: %d", v);
  /* warm up: page in, train the predictors, start the Go runtime's threads */
  for (int w = 0; w < 20; w++) {
    (void)BLOCK(plainErrorString(i & 7));
    (void)BLOCK(refErrorString(i & 7));
    (void)BLOCK(mscclppGetErrorString((mscclppResult_t)(i & 7)));
  }
  int n = 0;
  uint64_t start = bench_now_ns();
  while (n < MAX_BLOCKS && (n < 16 || (double)(bench_now_ns() - start) * 1e-9 < budget)) {
    plain[n] = BLOCK(plainErrorString(i & 7));
    libref[n] = BLOCK(refErrorString(i & 7));
    errstr[n] = BLOCK(mscclppGetErrorString((mscclppResult_t)(i & 7)));
    version[n] = n % 8 == 0 ? BLOCK(mscclppGetVersion(&v)) : 0; /* slower: one block in eight */
    n++;
  }
  int nv = 0;
  for (int k = 0; k < n; k++)
    if (version[k] != 0) version[nv++] = version[k];
  bench_result("tools.layers", mscclppToolNumLayers());
  bench_result("tools.plain_ns", (double)bench_median(plain, n) / ITERS);
  bench_result("tools.libref_ns", (double)bench_median(libref, n) / ITERS);
  bench_result("tools.errstr_ns", (double)bench_median(errstr, n) / ITERS);
  bench_result("tools.version_ns", (double)bench_median(version, nv) / ITERS);
  bench_result("tools.blocks", n);
  return 0;
}
