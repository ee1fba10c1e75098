/*
 * kernels.cc: "kernels" whose threads are CPU threads running the device
 * methods of mscclpp.h through shim.h. Linked into the stand-in driver
 * (cuda/testdata/fakecuda.c) by impl/devthreads_test.go and called through
 * its int f(const char*) test hook. A launch copies the mscclppDevConn, as an
 * application copies the array to the device, and gives the kernel the view a
 * GPU would have of every pointer in it (fakeKernelView): device memory is
 * reached where the driver keeps it, never through the host address.
 *
 *   devCheckConn("conn=ADDR size=N")  which of the connection's pointers a
 *       kernel cannot reach: a bit per field (names on stderr), 0 when all can
 *   devSend("conn=ADDR size=N threads=T")  T threads; thread i writes its
 *       chunk of my buffer [0, N) and pushes it to the peer's buffer at N + its
 *       offset, with every trigger type and zero-size puts (see sendOne)
 *   devRecv("conn=ADDR size=N threads=T")  one thread waits for every signal
 *       of the peer's devSend, then checks [N, 2N) of my buffer
 *   devAllgather("conns=ADDR n=K rank=R nranks=N chunk=C peers=P0,P1,...")
 *       upstream's allgather over K connections (entry i to rank Pi): thread i
 *       writes part i of my chunk [R*C, (R+1)*C), pushes it to every peer with
 *       putWithSignal, waits for the K signals of connection i and checks Pi's
 *       chunk
 *   devFault("conn=ADDR size=N put=P")  one thread on a connection whose communicator is
 *       about to fail: a putWithSignalAndFlush of P bytes (P > 0), a wait() for a signal the
 *       peer never sends, then 300 puts (more than the FIFO holds) and a flush; each must
 *       return with failed() true instead of spinning (a missing error hangs it until the
 *       deadline)
 *   devFlushOK("conn=ADDR size=N")  one thread flushes a connection whose proxy runs: the flush
 *       must be served, failed() false
 *   devWaitFails("conn=ADDR size=N")  one thread waits for a signal the peer never sends: the
 *       wait must return with failed() true
 * Each returns 0, or a negative count of what failed (reported on stderr).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

extern "C" uint64_t fakeKernelView(uint64_t p, uint64_t n);

thread_local devOrder devTls;

void devViolation(const char* fmt, ...)
{
  devKernel* k = devTls.k;
  pthread_mutex_lock(&k->mu);
  if (k->violations++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->first, sizeof(k->first), fmt, ap);
    va_end(ap);
  }
  pthread_mutex_unlock(&k->mu);
}

void devHang(const void* where)
{
  devKernel* k = devTls.k;
  pthread_mutex_lock(&k->mu);
  if (k->hung++ == 0 && !k->abort) {
    size_t n = strlen(k->first);
    snprintf(k->first + n, sizeof(k->first) - n, "%sa thread still polled %p at the deadline", n ? "; " : "", where);
  }
  __atomic_store_n(&k->abort, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&k->mu);
  pthread_exit(NULL);
}

void devStoreTrigger(uint64_t* slot, uint64_t w0, uint64_t w1)
{
  if (w0 == 0) devViolation("a trigger with word 0 = 0 (it reads as an empty slot: the proxy stops there)");
  if (devTls.dirty) devViolation("a trigger stored before the thread's data writes were released (no fence)");
  __atomic_store_n(&slot[1], w1, __ATOMIC_RELAXED);
  __atomic_store_n(&slot[0], w0, __ATOMIC_RELAXED);
}

struct args {
  uint64_t conn, size;
  int threads;
};

static int parse(const char* spec, args* a)
{
  memset(a, 0, sizeof(*a));
  a->threads = 1;
  if (sscanf(spec, "conn=%lx size=%lu threads=%d", &a->conn, &a->size, &a->threads) < 2) {
    fprintf(stderr, "devthreads: bad spec %s\n", spec);
    return -1;
  }
  return 0;
}

/* What a GPU thread would see: the fields of the device copy, each pointer in the kernel's view. */
static const char* fieldNames[] = {"fifo.triggerFifo", "fifo.triggerFifoTail", "fifo.triggerFifoHead",
                                   "localSignalEpochId", "remoteSignalEpochId", "waitEpochId",
                                   "localBuff", "remoteBuff"};

static int kernelView(const args& a, mscclppDevConn* out)
{
  memcpy(out, (const void*)(uintptr_t)a.conn, sizeof(*out)); /* cudaMemcpy of the array */
  void** f[] = {(void**)&out->fifo.triggerFifo, (void**)&out->fifo.triggerFifoTail,
                (void**)&out->fifo.triggerFifoHead, (void**)&out->localSignalEpochId,
                (void**)&out->remoteSignalEpochId, (void**)&out->waitEpochId, &out->localBuff,
                &out->remoteBuff};
  uint64_t n[] = {MSCCLPP_PROXY_FIFO_SIZE * sizeof(mscclppTrigger), 8, 8, 16, 16, 8, a.size, a.size};
  int bad = 0;
  for (int i = 0; i < 8; i++) {
    /* the peer's epoch and buffer are NULL where not directly reachable: allowed */
    if (*f[i] == NULL && (i == 4 || i == 7)) continue;
    uint64_t v = fakeKernelView((uint64_t)(uintptr_t)*f[i], n[i]);
    if (v == 0) {
      fprintf(stderr, "devthreads: %s = %p (%lu bytes) is not reachable from a kernel\n", fieldNames[i], *f[i],
              (unsigned long)n[i]);
      bad |= 1 << i;
    }
    *f[i] = (void*)(uintptr_t)v;
  }
  return bad;
}

extern "C" int devCheckConn(const char* spec)
{
  args a;
  if (parse(spec, &a) != 0) return -1;
  mscclppDevConn c;
  return kernelView(a, &c);
}

struct launch {
  devKernel* k;
  mscclppDevConn* conn;
  const args* a;
  int tid;
  void (*body)(mscclppDevConn&, const args&, int);
};

static void* threadMain(void* p)
{
  launch* l = (launch*)p;
  devTls = devOrder{l->k, 0, 0, 0};
  l->body(*l->conn, *l->a, l->tid);
  return NULL;
}

/* Runs body on threads CPU threads sharing one device copy of the connection; 0 or -failures.
 * *result gets what the body reported (devKernel.result). */
static int run(const char* spec, int threads, void (*body)(mscclppDevConn&, const args&, int), long* result)
{
  args a;
  if (parse(spec, &a) != 0) return -1;
  mscclppDevConn c;
  if (kernelView(a, &c) != 0) return -1;
  devKernel* k = (devKernel*)calloc(1, sizeof(*k));
  pthread_mutex_init(&k->mu, NULL);
  k->deadline = devNowNs() + 60ull * 1000000000ull;
  int n = threads ? threads : a.threads;
  launch* ls = (launch*)calloc((size_t)n, sizeof(*ls));
  pthread_t* ts = (pthread_t*)calloc((size_t)n, sizeof(*ts));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  int started = 0;
  for (int i = 0; i < n; i++) {
    ls[i] = launch{k, &c, &a, i, body};
    if (pthread_create(&ts[i], &attr, threadMain, &ls[i]) != 0) break;
    started++;
  }
  for (int i = 0; i < started; i++) pthread_join(ts[i], NULL);
  pthread_attr_destroy(&attr);
  int failed = k->violations + k->hung + (started < n);
  if (failed)
    fprintf(stderr, "devthreads: %s: %d violations, %d hung threads, %d of %d threads started: %s\n", spec,
            k->violations, k->hung, started, n, k->first);
  if (result != NULL) *result = k->result;
  pthread_mutex_destroy(&k->mu);
  free(k);
  free(ls);
  free(ts);
  return -failed;
}

static uint8_t pattern(int tid, uint64_t j) { return (uint8_t)(tid * 31 + j * 7 + 1); }
static uint64_t chunkOf(const args& a) { return a.size / (uint64_t)a.threads; }
/* Signals a thread of devSend sends: one, two for the threads with a zero-size putWithSignal. */
static int flagsOf(int tid) { return tid % 6 == 5 ? 2 : 1; }

/* Thread tid of devSend: writes its chunk, then moves it with one pattern of triggers out of six. */
static void sendOne(mscclppDevConn& c, const args& a, int tid)
{
  uint64_t chunk = chunkOf(a), off = (uint64_t)tid * chunk, dst = a.size + off;
  uint8_t* buf = (uint8_t*)c.localBuff;
  for (uint64_t j = 0; j < chunk; j++) devStore(buf + off + j, pattern(tid, j));
  switch (tid % 6) {
  case 0: /* Data|Flag */
    c.putWithSignal(dst, off, chunk);
    break;
  case 1: /* Data, then Flag */
    c.put(dst, off, chunk);
    c.signal();
    break;
  case 2: /* Data|Flag|Sync */
    c.putWithSignalAndFlush(dst, off, chunk);
    break;
  case 3: /* Data|Sync pushed by hand, Sync, Flag */
    c.fifo.sync(c.fifo.push(mscclppData | mscclppSync, dst, off, chunk));
    c.flush();
    c.signal();
    break;
  case 4: /* zero-size puts at source offset 0 and elsewhere (no trigger), a zero-size Data pushed
           * by hand (pushed as a Sync), then Data|Flag */
    c.put(0, 0, 0);
    c.put(dst, off, 0);
    c.fifo.sync(c.fifo.push(mscclppData, 0, 0, 0));
    c.putWithSignal(dst, off, chunk);
    break;
  default: /* a zero-size putWithSignal (a Flag), Data, a zero-size putWithSignalAndFlush (Flag|Sync) */
    c.putWithSignal(0, 0, 0);
    c.put(dst, off, chunk);
    c.putWithSignalAndFlush(0, 0, 0);
    break;
  }
}

extern "C" int devSend(const char* spec) { return run(spec, 0, sendOne, NULL); }

static void recvAll(mscclppDevConn& c, const args& a, int)
{
  int flags = 0;
  for (int t = 0; t < a.threads; t++) flags += flagsOf(t);
  for (int f = 0; f < flags; f++) c.wait();
  uint64_t chunk = chunkOf(a);
  const uint8_t* buf = (const uint8_t*)c.localBuff + a.size;
  int bad = 0;
  for (int t = 0; t < a.threads; t++)
    for (uint64_t j = 0; j < chunk; j++)
      if (devLoad(buf + (uint64_t)t * chunk + j) != pattern(t, j)) bad++;
  devTls.k->result = bad;
}

extern "C" int devRecv(const char* spec)
{
  long mismatches = 0;
  int rc = run(spec, 1, recvAll, &mismatches);
  if (mismatches) fprintf(stderr, "devthreads: %ld bytes differ from what the peer's threads wrote\n", mismatches);
  return rc - (mismatches != 0);
}

/* ---- devAllgather ---- */

#define AG_MAX 16
struct agArgs {
  int n, rank, nranks, peers[AG_MAX];
  uint64_t chunk;
  mscclppDevConn view[AG_MAX]; /* each connection as the kernel sees it */
};
struct agLaunch {
  devKernel* k;
  agArgs* a;
  int tid;
};

static uint8_t agPattern(int rank, uint64_t j) { return (uint8_t)(rank * 53 + j * 13 + 7); }

static void* agThread(void* p)
{
  agLaunch* l = (agLaunch*)p;
  agArgs* a = l->a;
  devTls = devOrder{l->k, 0, 0, 0};
  int i = l->tid;
  uint64_t part = a->chunk / (uint64_t)a->n, off = (uint64_t)a->rank * a->chunk + (uint64_t)i * part;
  uint64_t len = i == a->n - 1 ? a->chunk - (uint64_t)i * part : part;
  uint8_t* buf = (uint8_t*)a->view[i].localBuff;
  for (uint64_t j = 0; j < len; j++) devStore(buf + off + j, agPattern(a->rank, off - (uint64_t)a->rank * a->chunk + j));
  for (int c = 0; c < a->n; c++) a->view[c].putWithSignal(off, off, len);
  for (int s = 0; s < a->n; s++) a->view[i].wait();
  long bad = 0;
  const uint8_t* theirs = (const uint8_t*)a->view[i].localBuff + (uint64_t)a->peers[i] * a->chunk;
  for (uint64_t j = 0; j < a->chunk; j++) bad += devLoad(theirs + j) != agPattern(a->peers[i], j);
  __atomic_add_fetch(&l->k->result, bad, __ATOMIC_RELAXED);
  return NULL;
}

static int agParse(const char* spec, agArgs* a, uint64_t* conns)
{
  memset(a, 0, sizeof(*a));
  int used = 0;
  if (sscanf(spec, "conns=%lx n=%d rank=%d nranks=%d chunk=%lu peers=%n", conns, &a->n, &a->rank, &a->nranks,
             &a->chunk, &used) < 5 || used == 0 || a->n < 1 || a->n > AG_MAX || a->chunk < (uint64_t)a->n)
    return -1;
  const char* p = spec + used;
  for (int i = 0; i < a->n; i++) {
    char* end;
    a->peers[i] = (int)strtol(p, &end, 10);
    if (end == p || a->peers[i] < 0 || a->peers[i] >= a->nranks) return -1;
    p = *end == ',' ? end + 1 : end;
  }
  return 0;
}

extern "C" int devAllgather(const char* spec)
{
  agArgs* a = (agArgs*)calloc(1, sizeof(agArgs));
  uint64_t conns = 0;
  if (agParse(spec, a, &conns) != 0) {
    fprintf(stderr, "devthreads: bad spec %s\n", spec);
    free(a);
    return -1;
  }
  for (int i = 0; i < a->n; i++) {
    args one = {conns + (uint64_t)i * sizeof(mscclppDevConn), (uint64_t)a->nranks * a->chunk, 1};
    if (kernelView(one, &a->view[i]) != 0) {
      free(a);
      return -1;
    }
  }
  devKernel* k = (devKernel*)calloc(1, sizeof(*k));
  pthread_mutex_init(&k->mu, NULL);
  k->deadline = devNowNs() + 60ull * 1000000000ull;
  agLaunch ls[AG_MAX];
  pthread_t ts[AG_MAX];
  int started = 0;
  for (int i = 0; i < a->n; i++) {
    ls[i] = agLaunch{k, a, i};
    if (pthread_create(&ts[i], NULL, agThread, &ls[i]) != 0) break;
    started++;
  }
  for (int i = 0; i < started; i++) pthread_join(ts[i], NULL);
  int failed = k->violations + k->hung + (started < a->n) + (k->result != 0);
  if (failed)
    fprintf(stderr, "devthreads: %s: %d violations, %d hung threads, %ld bytes differ: %s\n", spec, k->violations,
            k->hung, k->result, k->first);
  pthread_mutex_destroy(&k->mu);
  free(k);
  free(a);
  return -failed;
}

/* ---- devFault ---- */

static void faultOne(mscclppDevConn& c, const args& a, int)
{
  long missed = 0; /* a bit per step that returned without failed() */
  if (a.threads > 0) {
    for (uint64_t j = 0; j < (uint64_t)a.threads; j++) devStore((uint8_t*)c.localBuff + j, (uint8_t)j);
    c.putWithSignalAndFlush(0, 0, (uint64_t)a.threads);
    if (!c.failed()) missed |= 1;
  }
  c.wait();
  if (!c.failed()) missed |= 2;
  for (int i = 0; i < 3 * MSCCLPP_PROXY_FIFO_SIZE; i++) c.put(0, 0, 8);
  c.flush();
  if (!c.failed()) missed |= 4;
  devTls.k->result = missed;
}

extern "C" int devFault(const char* spec)
{
  uint64_t conn = 0, size = 0, put = 0;
  if (sscanf(spec, "conn=%lx size=%lu put=%lu", &conn, &size, &put) != 3 || put > size) {
    fprintf(stderr, "devthreads: bad spec %s\n", spec);
    return -1;
  }
  char one[128];
  snprintf(one, sizeof(one), "conn=%#lx size=%lu threads=%lu", conn, size, put); /* threads carries P */
  long missed = 0;
  int rc = run(one, 1, faultOne, &missed);
  if (missed)
    fprintf(stderr, "devthreads: %s: returned without failed() after:%s%s%s\n", spec, (missed & 1) ? " the flush" : "",
            (missed & 2) ? " the wait" : "", (missed & 4) ? " the puts and flush" : "");
  return rc - (missed != 0);
}

/* ---- devFlushOK, devWaitFails ---- */

static void flushOne(mscclppDevConn& c, const args&, int)
{
  c.flush();
  devTls.k->result = c.failed();
}

extern "C" int devFlushOK(const char* spec)
{
  long failed = 0;
  int rc = run(spec, 1, flushOne, &failed);
  if (failed) fprintf(stderr, "devthreads: %s: the flush returned with failed()\n", spec);
  return rc - (failed != 0);
}

static void waitOne(mscclppDevConn& c, const args&, int)
{
  c.wait();
  devTls.k->result = !c.failed();
}

extern "C" int devWaitFails(const char* spec)
{
  long served = 0;
  int rc = run(spec, 1, waitOne, &served);
  if (served) fprintf(stderr, "devthreads: %s: the wait returned without failed()\n", spec);
  return rc - (served != 0);
}
