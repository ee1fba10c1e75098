/*
 * host_mscclpp: the library's host data path (SHM transport, host mode),
 * interleaved with raw references run by the same two processes.
 *
 * Built twice from this file:
 *   host_mscclpp (cc)                 started by launch (see bench.h)
 *   host_mpi     (mpicc -DBENCH_MPI)  started by mpirun; ranks and the root
 *                                     address come from MPI, and the Open MPI
 *                                     references join the interleaving
 *
 *   launch -p 2 host_mscclpp pair hostalloc|malloc [maxBytes]
 *   mpirun -np 2 --bind-to core host_mpi pair hostalloc|malloc [maxBytes]
 *       The pp.h ping-pong (pp_multi) at 8 B .. maxBytes (default 256 MiB)
 *       with putWithSignal / wait on a connection whose buffers come from
 *       mscclppHostAlloc (a put is a memcpy into the peer's mapped buffer)
 *       or malloc (a put is process_vm_writev), interleaved block by block
 *       (odd cycles in reverse order, pp.h) with, in the same processes:
 *         line     (a) a ping-pong of one cache line of shared memory, spin
 *         memcpy   (b) memcpy into the peer's mapped buffer + a release store
 *                      of an epoch the peer spins on (hostalloc)
 *         checked  (e) (b) behind two checked calls into a library of its own
 *                      (checked_ref.h; hostalloc, 8 B)
 *         ring     (f) a one-line ring: the bytes and their count in one
 *                      64-byte slot of a ring in the peer's aux buffer; the
 *                      receiver copies them into its buffer (hostalloc, 8 B)
 *         vmwrite  (c) one process_vm_writev into the peer's malloc buffer +
 *                      the same epoch store (malloc)
 *         sendrecv (d) MPI_Send / MPI_Recv (host_mpi, malloc, up to 16 MiB)
 *         rma      (d) MPI_Put + MPI_Win_flush + flag MPI_Put + MPI_Win_flush
 *                      on an MPI_Win_allocate_shared window, the target
 *                      spinning on the flag (host_mpi, hostalloc, <= 16 MiB)
 *       Figures: <hostalloc|malloc>.<size>.<way>.oneway_ns or .gbps.
 *   launch 4 host_mscclpp ag  /  mpirun -np 4 --bind-to none host_mpi ag
 *       An 8-byte allgather round: each rank putWithSignal's its 8 bytes
 *       into every other rank's buffer, then waits on each connection
 *       (ag.ours.round_ns), alternating in batches of 100 rounds with
 *       MPI_Allgather of 8 B (ag.mpi.round_ns, host_mpi only). The figure is
 *       the median over batches of rank 0's time per round; an untimed
 *       collective after each pair of batches carries rank 0's stop decision.
 *
 * The raw references use the library only to find each other: a second
 * connection (tag 1) on a small mscclppHostAlloc buffer gives each rank a
 * mapping of the peer's, which holds the epochs, the cache line and (f)'s ring, and a
 * bootstrap allgather exchanges pids and buffer addresses.
 */
#define _GNU_SOURCE
#include <mscclpp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#ifdef BENCH_MPI
#include <mpi.h>
#endif

#include "checked_ref.h"
#include "pp.h"

static mscclppComm_t comm;

/* mscclppHostAlloc buffers a connection registered: mscclppHostFree refuses them while the
 * communicator lives, so they are freed after mscclppCommDestroy. */
static void* hostBufs[4];
static int nHostBufs;
static void freeAfterDestroy(void* p) { hostBufs[nHostBufs++] = p; }

#define CK(call) BENCH_CK(comm, call)

/* ---- ours ---- */
static void ours_put(void* c, size_t size) { CK(mscclppDevConnPutWithSignal((mscclppDevConn_t*)c, 0, 0, size)); }
static void ours_wait(void* c) { CK(mscclppDevConnWait((mscclppDevConn_t*)c)); }

/* ---- raw references ---- */
typedef struct {
  int rank;
  pid_t peerPid;
  char* buf;                  /* my main buffer */
  char* peerBuf;              /* the peer's main buffer: mapped (hostalloc) or its address (malloc) */
  volatile uint64_t* myEpoch; /* in my aux buffer; the peer stores into it */
  volatile uint64_t* peerEpoch;
  volatile uint64_t* line; /* one line of rank 0's aux buffer, mapped by both */
  uint64_t sent, seen, lsent, lseen;
} raw;

static void raw_signal(raw* r) { __atomic_store_n(r->peerEpoch, ++r->sent, __ATOMIC_RELEASE); }

static void raw_wait(void* c)
{
  raw* r = c;
  r->seen++;
  while (__atomic_load_n(r->myEpoch, __ATOMIC_ACQUIRE) < r->seen) bench_pause();
}

static void memcpy_put(void* c, size_t size)
{
  raw* r = c;
  memcpy(r->peerBuf, r->buf, size);
  raw_signal(r);
}

static void vm_put(void* c, size_t size)
{
  raw* r = c;
  bench_vm_write(r->peerPid, r->buf, r->peerBuf, size);
  raw_signal(r);
}

/* (e): (b) through the checked library calls of checked_ref.h. */
static void checked_put(void* c, size_t size)
{
  if (chkPutWithSignal((chkConn*)c, 0, 0, size) != 0) BENCH_DIE("chkPutWithSignal refused");
}

static void checked_wait(void* c)
{
  if (chkWait((chkConn*)c) != 0) BENCH_DIE("chkWait refused");
}

/* (f): each message takes the next 64-byte slot of a ring in the receiver's memory, its count in
 * the slot's first 8 bytes and its bytes after them, so that one line crosses per message where
 * (b) moves two (the data's and the epoch's); the receiver copies the bytes into its buffer. */
#define FRING_SLOTS 32
#define AUX_BYTES 4096 /* the aux buffer: (b)'s, (a)'s and (e)'s lines, then (f)'s ring at its end */
typedef struct {
  char* mySlots;   /* the ring the peer writes into (my aux buffer) */
  char* peerSlots; /* the peer's ring, mapped */
  char* buf;       /* put reads from it, a landing writes into it */
  uint64_t sent, seen;
} fring;

static void fring_put(void* c, size_t size)
{
  fring* f = c;
  char* slot = f->peerSlots + (f->sent % FRING_SLOTS) * 64;
  memcpy(slot + 8, f->buf, size);
  __atomic_store_n((uint64_t*)slot, ++f->sent, __ATOMIC_RELEASE);
}

static void fring_wait(void* c)
{
  fring* f = c;
  uint64_t want = ++f->seen;
  char* slot = f->mySlots + ((want - 1) % FRING_SLOTS) * 64;
  while (__atomic_load_n((volatile uint64_t*)slot, __ATOMIC_ACQUIRE) != want) bench_pause();
  memcpy(f->buf, slot + 8, 8);
}

/* (a): rank 0 stores odd values, rank 1 even ones, into the same line. */
static void line_put(void* c, size_t size)
{
  raw* r = c;
  (void)size;
  r->lsent++;
  __atomic_store_n(r->line, r->rank == 0 ? 2 * r->lsent - 1 : 2 * r->lsent, __ATOMIC_RELEASE);
}

static void line_wait(void* c)
{
  raw* r = c;
  r->lseen++;
  uint64_t want = r->rank == 0 ? 2 * r->lseen : 2 * r->lseen - 1;
  while (__atomic_load_n(r->line, __ATOMIC_ACQUIRE) < want) bench_pause();
}

#ifdef BENCH_MPI
#define MPI_MAXS (16u << 20)
typedef struct {
  int peer;
  char* buf;   /* send from, receive into */
  size_t cap;  /* receive capacity */
  MPI_Win win;
  char* base;  /* my part of the window: flag at 0, data at 64 */
  uint64_t sent, seen;
} mref;

static void sr_put(void* c, size_t size)
{
  mref* m = c;
  MPI_Send(m->buf, (int)size, MPI_BYTE, m->peer, 0, MPI_COMM_WORLD);
}

static void sr_wait(void* c)
{
  mref* m = c;
  MPI_Recv(m->buf, (int)m->cap, MPI_BYTE, m->peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void rma_put(void* c, size_t size)
{
  mref* m = c;
  uint64_t f = ++m->sent;
  MPI_Put(m->buf, (int)size, MPI_BYTE, m->peer, 64, (int)size, MPI_BYTE, m->win);
  MPI_Win_flush(m->peer, m->win);
  MPI_Put(&f, 8, MPI_BYTE, m->peer, 0, 8, MPI_BYTE, m->win);
  MPI_Win_flush(m->peer, m->win);
}

static void rma_wait(void* c)
{
  mref* m = c;
  m->seen++;
  while (__atomic_load_n((volatile uint64_t*)m->base, __ATOMIC_ACQUIRE) < m->seen) bench_pause();
}
#endif

static void pair(const char* kind, size_t maxBytes, int rank)
{
  int hostAlloc = !strcmp(kind, "hostalloc");
  if (!hostAlloc && strcmp(kind, "malloc")) BENCH_DIE("pair: hostalloc or malloc, not %s", kind);
  char *buf, *aux;
  if (hostAlloc) CK(mscclppHostAlloc((void**)&buf, maxBytes));
  else if (!(buf = malloc(maxBytes))) BENCH_DIE("malloc");
  CK(mscclppHostAlloc((void**)&aux, AUX_BYTES));
  memset(buf, 1 + rank, maxBytes);
  memset(aux, 0, AUX_BYTES);
  CK(mscclppConnect(comm, 1 - rank, 0, buf, maxBytes, mscclppTransportSHM, NULL));
  CK(mscclppConnect(comm, 1 - rank, 1, aux, AUX_BYTES, mscclppTransportSHM, NULL));
  CK(mscclppConnectionSetup(comm));
  mscclppDevConn_t* conns;
  int nc;
  CK(mscclppGetAllDeviceConnections(comm, &conns, &nc));
  if (nc != 2 || !conns[1].remoteBuff || (hostAlloc && !conns[0].remoteBuff))
    BENCH_DIE("pair: expected 2 connections with mapped HostAlloc buffers");
  CK(mscclppProxyLaunch(comm));
  uint64_t me[2] = {(uint64_t)getpid(), (uint64_t)(uintptr_t)buf}, all[4];
  memcpy(all + 2 * rank, me, sizeof(me));
  CK(mscclppBootstrapAllGather(comm, all, sizeof(me)));

  raw r = {0};
  r.rank = rank;
  r.peerPid = (pid_t)all[2 * (1 - rank)];
  r.buf = buf;
  r.peerBuf = hostAlloc ? (char*)conns[0].remoteBuff : (char*)(uintptr_t)all[2 * (1 - rank) + 1];
  r.myEpoch = (volatile uint64_t*)aux;
  r.peerEpoch = (volatile uint64_t*)conns[1].remoteBuff;
  r.line = (volatile uint64_t*)((rank == 0 ? aux : (char*)conns[1].remoteBuff) + 64);

  /* (e)'s epochs: on the third line of the aux buffers (the first holds (b)'s, the second (a)'s) */
  chkConn chk = {r.peerBuf, maxBytes, buf, maxBytes, (volatile uint64_t*)((char*)conns[1].remoteBuff + 128),
                 (volatile uint64_t*)(aux + 128), 0, 0};
  if (hostAlloc && chkOpen(&chk) != 0) BENCH_DIE("chkOpen");
  /* (f)'s rings: the end of the aux buffers */
  enum { FRING_AT = AUX_BYTES - FRING_SLOTS * 64 };
  fring fr = {aux + FRING_AT, (char*)conns[1].remoteBuff + FRING_AT, buf, 0, 0};
  static char scratch[64];
  pp_ops ours = {&conns[0], rank, buf, buf, ours_put, ours_wait};
  pp_ops line = {&r, rank, scratch, scratch, line_put, line_wait};
  pp_ops copy = {&r, rank, buf, buf, hostAlloc ? memcpy_put : vm_put, raw_wait};
  pp_ops checked = {&chk, rank, buf, buf, checked_put, checked_wait};
  pp_ops ring = {&fr, rank, buf, buf, fring_put, fring_wait};
#ifdef BENCH_MPI
  size_t mcap = maxBytes < MPI_MAXS ? maxBytes : MPI_MAXS;
  mref m = {1 - rank, malloc(mcap), mcap, MPI_WIN_NULL, NULL, 0, 0};
  memset(m.buf, 1 + rank, mcap);
  pp_ops mpi = {&m, rank, m.buf, m.buf, sr_put, sr_wait};
  if (hostAlloc) {
    MPI_Win_allocate_shared((MPI_Aint)(mcap + 64), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &m.base, &m.win);
    memset(m.base, 0, mcap + 64);
    MPI_Win_lock_all(0, m.win);
    MPI_Barrier(MPI_COMM_WORLD);
    mpi.put = rma_put;
    mpi.wait = rma_wait;
    mpi.inbox = m.base + 64;
  }
  const char* mpiName = hostAlloc ? "rma" : "sendrecv";
#endif
  double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
  for (int i = 0; i < 4 && pp_sizes[i] <= maxBytes; i++) {
    size_t s = pp_sizes[i];
    enum { WAYS = 6 }; /* line, copy, checked, ring, MPI, ours */
    pp_ops* ops[WAYS];
    const char* names[WAYS];
    int k = 0;
    if (s <= 8) ops[k] = &line, names[k++] = "line";
    ops[k] = &copy, names[k++] = hostAlloc ? "memcpy" : "vmwrite";
    if (s <= 8 && hostAlloc) {
      ops[k] = &checked, names[k++] = "checked";
      ops[k] = &ring, names[k++] = "ring";
    }
#ifdef BENCH_MPI
    if (s <= mcap) ops[k] = &mpi, names[k++] = mpiName;
#endif
    ops[k] = &ours, names[k++] = "ours";
    char keys[WAYS][96];
    const char* kp[WAYS];
    for (int j = 0; j < k; j++) {
      snprintf(keys[j], sizeof(keys[j]), "%s.%s.%s", kind, pp_names[i], names[j]);
      kp[j] = keys[j];
    }
    int block = s <= 8 ? 512 : s <= (1u << 20) ? 20 : s <= (16u << 20) ? 2 : 1;
    pp_multi(ops, kp, k, s, s > (16u << 20) ? 2 * budget : budget, block, 3, 1);
  }
#ifdef BENCH_MPI
  if (hostAlloc) {
    MPI_Win_unlock_all(m.win);
    MPI_Win_free(&m.win);
  }
  free(m.buf);
#endif
  if (hostAlloc) chkClose(&chk);
  CK(mscclppProxyStop(comm));
  if (hostAlloc) freeAfterDestroy(buf);
  else free(buf);
  freeAfterDestroy(aux);
}

static void ag(int rank, int n)
{
  char* buf;
  size_t size = (size_t)n * 64;
  CK(mscclppHostAlloc((void**)&buf, size));
  memset(buf, 0, size);
  for (int p = 0; p < n; p++)
    if (p != rank) CK(mscclppConnect(comm, p, 0, buf, size, mscclppTransportSHM, NULL));
  CK(mscclppConnectionSetup(comm));
  mscclppDevConn_t* conns;
  int nc;
  CK(mscclppGetAllDeviceConnections(comm, &conns, &nc));
  CK(mscclppProxyLaunch(comm));
  double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
  enum { BATCH = 100, MAXB = 100000 };
  uint64_t* t[2] = {calloc(MAXB, sizeof(uint64_t)), calloc(MAXB, sizeof(uint64_t))};
  int nt[2] = {0, 0}, ways = 1;
#ifdef BENCH_MPI
  ways = 2;
  uint64_t mine, *all = calloc((size_t)n, 8);
#endif
  int32_t* ctrl = calloc((size_t)n, sizeof(int32_t));
  uint64_t start = bench_now_ns();
  for (int b = 0;; b++) {
    for (int w = 0; w < ways; w++) {
      uint64_t t0 = bench_now_ns();
      for (int i = 0; i < BATCH; i++) {
        if (w == 0) {
          memcpy(buf + rank * 64, &i, sizeof(i));
          for (int c = 0; c < nc; c++) CK(mscclppDevConnPutWithSignal(&conns[c], rank * 64, rank * 64, 8));
          for (int c = 0; c < nc; c++) CK(mscclppDevConnWait(&conns[c]));
        }
#ifdef BENCH_MPI
        else {
          mine = (uint64_t)i;
          MPI_Allgather(&mine, 8, MPI_BYTE, all, 8, MPI_BYTE, MPI_COMM_WORLD);
        }
#endif
      }
      if (b >= 2) t[w][nt[w]++] = (bench_now_ns() - t0) / BATCH; /* two warm-up batches */
    }
    ctrl[rank] = rank == 0 && (nt[0] >= MAXB || (nt[0] >= 5 && (double)(bench_now_ns() - start) * 1e-9 > budget));
    CK(mscclppBootstrapAllGather(comm, ctrl, 4));
    if (ctrl[0]) break;
  }
  if (rank == 0) {
    const char* names[2] = {"ag.ours", "ag.mpi"};
    for (int w = 0; w < ways; w++) {
      char key[64];
      snprintf(key, sizeof(key), "%s.batches", names[w]);
      bench_result(key, nt[w]);
      snprintf(key, sizeof(key), "%s.round_ns", names[w]);
      bench_result(key, (double)bench_median(t[w], (size_t)nt[w]));
    }
  }
  CK(mscclppProxyStop(comm));
  freeAfterDestroy(buf);
}

int main(int argc, char** argv)
{
  const char* mode = argc > 1 ? argv[1] : "";
  int isPair = !strcmp(mode, "pair"), isAg = !strcmp(mode, "ag");
  if (!(isPair && argc > 2) && !isAg) BENCH_DIE("usage: host_mscclpp pair hostalloc|malloc [maxBytes] | ag");
  int rank, n;
  char addr[64];
#ifdef BENCH_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (rank == 0) { /* a port free a moment ago */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof(a);
    if (bind(s, (struct sockaddr*)&a, sizeof(a)) != 0 || getsockname(s, (struct sockaddr*)&a, &l) != 0)
      BENCH_DIE("bind: %s", strerror(errno));
    close(s);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(a.sin_port));
  }
  MPI_Bcast(addr, sizeof(addr), MPI_CHAR, 0, MPI_COMM_WORLD);
#else
  rank = bench_env_int("BENCH_RANK", 0);
  n = bench_env_int("BENCH_NRANKS", 1);
  if (!getenv("BENCH_ADDR")) BENCH_DIE("run me through launch");
  snprintf(addr, sizeof(addr), "%s", getenv("BENCH_ADDR"));
  bench_start();
#endif
  if (isPair && n != 2) BENCH_DIE("pair needs 2 ranks");
  CK(mscclppCommInitRank(&comm, n, addr, rank));
  if (isPair) pair(argv[2], argc > 3 ? (size_t)atoll(argv[3]) : (256u << 20), rank);
  else ag(rank, n);
  CK(mscclppCommDestroy(comm));
  for (int i = 0; i < nHostBufs; i++) CK(mscclppHostFree(hostBufs[i]));
#ifdef BENCH_MPI
  MPI_Finalize();
#endif
  return 0;
}
