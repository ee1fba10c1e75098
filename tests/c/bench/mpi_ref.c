/*
 * mpi_ref: the Open MPI references of the host data path.
 *
 *   mpirun -np 2 mpi_ref p2p   MPI_Send / MPI_Recv ping-pong (pp.h), 8 B .. 16 MiB
 *                              (sendrecv.*), then MPI-3 RMA on an
 *                              MPI_Win_allocate_shared window (rma.*): a put is
 *                              MPI_Put(data) + MPI_Win_flush + MPI_Put(flag) +
 *                              MPI_Win_flush, and the target spins on the flag
 *                              in its own part of the window (passive target,
 *                              MPI_Win_lock_all for the whole run).
 *   mpirun -np 4 mpi_ref ag    MPI_Allgather of 8 B per rank: ag.round_ns, the
 *                              median over batches of 100 of rank 0's time per
 *                              call (as host_mscclpp ag).
 */
#define _GNU_SOURCE
#include <mpi.h>

#include "pp.h"

#define MAXS (16u << 20)
#define HDR 64 /* flag at offset 0 of each rank's window part, data at HDR */

typedef struct {
  int rank, peer;
  char* src;
  char* inbox;
  MPI_Win win;
  volatile uint64_t* flag; /* mine, in my part of the window */
  uint64_t sent, seen;
} mctx;

static void sr_put(void* c, size_t size)
{
  mctx* m = c;
  MPI_Send(m->src, (int)size, MPI_BYTE, m->peer, 0, MPI_COMM_WORLD);
}

static void sr_wait(void* c)
{
  mctx* m = c;
  MPI_Recv(m->inbox, (int)MAXS, MPI_BYTE, m->peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void rma_put(void* c, size_t size)
{
  mctx* m = c;
  uint64_t f = ++m->sent;
  MPI_Put(m->src, (int)size, MPI_BYTE, m->peer, HDR, (int)size, MPI_BYTE, m->win);
  MPI_Win_flush(m->peer, m->win);
  MPI_Put(&f, 8, MPI_BYTE, m->peer, 0, 8, MPI_BYTE, m->win);
  MPI_Win_flush(m->peer, m->win);
}

static void rma_wait(void* c)
{
  mctx* m = c;
  m->seen++;
  while (__atomic_load_n(m->flag, __ATOMIC_ACQUIRE) < m->seen) bench_pause();
}

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "p2p")) {
    if (n != 2) BENCH_DIE("p2p needs 2 ranks");
    mctx m = {rank, 1 - rank, malloc(MAXS), malloc(MAXS), MPI_WIN_NULL, NULL, 0, 0};
    memset(m.src, 1 + rank, MAXS);
    memset(m.inbox, 0, MAXS);
    pp_ops o = {&m, rank, m.src, m.inbox, sr_put, sr_wait};
    MPI_Barrier(MPI_COMM_WORLD);
    pp_all(&o, "sendrecv", MAXS);

    char* base;
    MPI_Win_allocate_shared((MPI_Aint)(MAXS + HDR), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &m.win);
    memset(base, 0, MAXS + HDR);
    m.flag = (volatile uint64_t*)base;
    m.inbox = base + HDR;
    MPI_Win_lock_all(0, m.win);
    MPI_Barrier(MPI_COMM_WORLD);
    pp_ops r = {&m, rank, m.src, m.inbox, rma_put, rma_wait};
    pp_all(&r, "rma", MAXS);
    MPI_Win_unlock_all(m.win);
    MPI_Win_free(&m.win);
  } else if (!strcmp(mode, "ag")) {
    double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
    int batch = 100, maxb = 100000, k = 0;
    uint64_t* t = calloc((size_t)maxb, sizeof(uint64_t));
    uint64_t mine = 0, *all = calloc((size_t)n, 8);
    int32_t stop = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t start = bench_now_ns();
    for (int b = 0;; b++) {
      uint64_t t0 = bench_now_ns();
      for (int i = 0; i < batch; i++) {
        mine = (uint64_t)i;
        MPI_Allgather(&mine, 8, MPI_BYTE, all, 8, MPI_BYTE, MPI_COMM_WORLD);
      }
      if (b >= 2) t[k++] = (bench_now_ns() - t0) / batch;
      stop = rank == 0 && (k >= maxb || (k >= 5 && (double)(bench_now_ns() - start) * 1e-9 > budget));
      MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
      if (stop) break;
    }
    if (rank == 0) {
      bench_result("ag.batches", k);
      bench_result("ag.round_ns", (double)bench_median(t, (size_t)k));
    }
  } else {
    BENCH_DIE("usage: mpi_ref p2p|ag");
  }
  MPI_Finalize();
  return 0;
}
