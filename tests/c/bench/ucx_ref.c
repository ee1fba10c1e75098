/*
 * ucx_ref: UCX (UCP one-sided puts) beside the library's putWithSignal,
 * interleaved block by block in the same two processes (pp.h's pp_multi).
 * UCX is what a user who wants one-sided puts between processes without a
 * GPU would pick instead: the layer under Open MPI's UCX path.
 *
 *   launch -p 2 ucx_ref shm|tcp [maxBytes]     (default 256 MiB)
 *
 * ucx:  a put is ucp_put_nbx of the data into the peer's region,
 *       ucp_worker_fence, ucp_put_nbx of an 8-byte flag (a count) into the
 *       region's first line, and the worker progressed until both requests
 *       completed locally (the source may be reused, as when putWithSignal
 *       returns); a wait progresses the worker until the flag in its own
 *       region reaches the count it expects. This is putWithSignal -> wait:
 *       the data, then a signal the receiver polls, ordered. The region is
 *       ucp_mem_map'ed with UCP_MEM_MAP_ALLOCATE (UCX's own memory, the
 *       best case for its shared-memory transports) and the peer's rkey and
 *       worker address come through a bootstrap allgather. UCX_TLS (from the
 *       environment: bench.sh sets sm,self for shm, tcp for tcp) picks its
 *       transports. shm also runs ucxmalloc: the same puts into a region of
 *       the peer's own malloc memory, registered with ucp_mem_map (what a
 *       user's buffer gives UCX, beside ours' malloc connection; which
 *       transport carries those puts shows in the endpoint's lanes).
 * ours: shm: putWithSignal -> wait over mscclppTransportSHM on a
 *       mscclppHostAlloc buffer (ours) and on a malloc buffer (oursmalloc:
 *       process_vm_writev); tcp: over mscclppTransportEthernet (ours).
 * cma:  shm only: one raw process_vm_writev of oursmalloc's bytes into the
 *       same peer buffer, then one of an 8-byte count into a word the
 *       receiver polls: the one-copy protocol with nothing around it, on
 *       the sender's CPU alone, its buffers as cold as oursmalloc's (they
 *       are the same), for the diagnostic of the malloc rows.
 *
 * Sizes: 8 B (one way = RTT / 2), 64 KiB, 1 MiB, 16 MiB, 256 MiB (bandwidth
 * = size / RTT), up to maxBytes; the signal ends every message.
 * Figures (rank 0): ucx.<shm|tcp>.<size>.<ucx|ucxmalloc|ours|oursmalloc|cma>.oneway_ns or
 * .gbps; from 16 MiB also .copy_gbps (size / the median time of the put call alone: the copy
 * without the round trip), and INFO lines: INFO ucx.version <text>, INFO ucx.<mode>.lanes
 * <the endpoint's lanes as ucp_ep_print_info prints them: transport/device
 * per lane and which lanes carry RMA>.
 */
#define _GNU_SOURCE
#include <mscclpp.h>
#include <ucp/api/ucp.h>

#include "pp.h"

#define CK(call) BENCH_CK(NULL, call)
#define UCK(call)                                                                     \
  do {                                                                                \
    ucs_status_t s_ = (call);                                                         \
    if (s_ != UCS_OK) BENCH_DIE("%s: %s", #call, ucs_status_string(s_));              \
  } while (0)

enum { HDR = 64, BLOB = 8192 };

typedef struct {
  ucp_mem_h memh;
  char* at; /* flag at 0, data at HDR */
} ucx_region;

typedef struct {
  ucp_worker_h worker;
  ucp_ep_h ep;
  ucp_rkey_h rkey;
  uint64_t peerRegion;        /* the peer's region: flag at 0, data at HDR */
  char* src;                  /* put reads from it */
  volatile uint64_t* myFlag;  /* my region's first line, the peer's puts store into it */
  uint64_t flagSrc, sent, seen;
} ux;

/* Progress until req (a ucp_put_nbx's answer) completed; NULL: it completed at once. */
static void ux_complete(ux* u, ucs_status_ptr_t req)
{
  if (req == NULL) return;
  if (UCS_PTR_IS_ERR(req)) BENCH_DIE("ucp_put_nbx: %s", ucs_status_string(UCS_PTR_STATUS(req)));
  ucs_status_t s;
  while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS) ucp_worker_progress(u->worker);
  ucp_request_free(req);
  if (s != UCS_OK) BENCH_DIE("ucp put: %s", ucs_status_string(s));
}

static void ux_put(void* c, size_t size)
{
  ux* u = c;
  ucp_request_param_t prm = {0};
  ucs_status_ptr_t data = ucp_put_nbx(u->ep, u->src, size, u->peerRegion + HDR, u->rkey, &prm);
  UCK(ucp_worker_fence(u->worker));
  u->flagSrc = ++u->sent;
  ucs_status_ptr_t flag = ucp_put_nbx(u->ep, &u->flagSrc, sizeof(u->flagSrc), u->peerRegion, u->rkey, &prm);
  ux_complete(u, data);
  ux_complete(u, flag);
}

static void ux_wait(void* c)
{
  ux* u = c;
  u->seen++;
  while (__atomic_load_n(u->myFlag, __ATOMIC_ACQUIRE) < u->seen) ucp_worker_progress(u->worker);
}

/* The raw one-copy protocol (cma above): process_vm_writev of the data, then of the count. */
typedef struct {
  pid_t peerPid;
  char* buf;              /* the bytes put, at the same offset of the peer's buffer */
  uint64_t peerBuf, peerFlag;
  volatile uint64_t* myFlag;
  uint64_t sent, seen;
} cma;

static void cma_put(void* c, size_t size)
{
  cma* m = c;
  bench_vm_write(m->peerPid, m->buf, (void*)(uintptr_t)m->peerBuf, size);
  uint64_t count = ++m->sent;
  bench_vm_write(m->peerPid, &count, (void*)(uintptr_t)m->peerFlag, sizeof(count));
}

static void cma_wait(void* c)
{
  cma* m = c;
  m->seen++;
  while (__atomic_load_n(m->myFlag, __ATOMIC_ACQUIRE) < m->seen) bench_pause();
}

static void ours_put(void* c, size_t size) { CK(mscclppDevConnPutWithSignal((mscclppDevConn_t*)c, 0, 0, size)); }
static void ours_wait(void* c) { CK(mscclppDevConnWait((mscclppDevConn_t*)c)); }

/* A way's put timed alone (from 16 MiB): the copy, without the wait for the peer's answer, so
 * that where a way loses the bandwidth row the copy row says whether its copy is the slower. */
enum { TIMED_CAP = 4096 };
typedef struct {
  pp_ops* o;
  uint64_t t[TIMED_CAP];
  size_t n;
} timed;

static void timed_put(void* c, size_t size)
{
  timed* w = c;
  uint64_t t0 = bench_now_ns();
  w->o->put(w->o->ctx, size);
  if (w->n < TIMED_CAP) w->t[w->n++] = bench_now_ns() - t0;
}

static void timed_wait(void* c)
{
  timed* w = c;
  w->o->wait(w->o->ctx);
}

/* Progress until req (a flush or close) is done. */
static void ux_wait_req(ucp_worker_h w, ucs_status_ptr_t req, const char* what)
{
  if (req == NULL) return;
  if (UCS_PTR_IS_ERR(req)) BENCH_DIE("%s: %s", what, ucs_status_string(UCS_PTR_STATUS(req)));
  while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(w);
  ucp_request_free(req);
}

/* rank 0: INFO lines naming UCX's version and the lanes of its endpoint (ucp_ep_print_info's
 * "lane[i]:" lines, joined; the lines name each lane's transport/device and its uses). */
static void ux_info(ucp_ep_h ep, const char* mode)
{
  printf("INFO ucx.version %s\n", ucp_get_version_string());
  char* text = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == NULL) BENCH_DIE("open_memstream");
  ucp_ep_print_info(ep, f);
  fclose(f);
  printf("INFO ucx.%s.lanes ", mode);
  for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char* l = line;
    if (getenv("BENCH_UCX_DUMP")) fprintf(stderr, "%s\n", line);
    while (*l == ' ' || *l == '\t' || *l == '#') l++;
    if (strncmp(l, "lane[", 5) != 0 && strncmp(l, "put[", 4) != 0) continue;
    while (*l) {
      putchar(*l == '\t' ? ' ' : *l);
      l++;
    }
    printf(" ;");
  }
  printf("\n");
  fflush(stdout);
  free(text);
}

int main(int argc, char** argv)
{
  bench_start();
  const char* mode = argc > 1 ? argv[1] : "";
  int tcp = !strcmp(mode, "tcp");
  if (!tcp && strcmp(mode, "shm")) BENCH_DIE("usage: launch -p 2 ucx_ref shm|tcp [maxBytes]");
  size_t maxBytes = argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : (256u << 20);
  int rank = bench_env_int("BENCH_RANK", 0);
  const char* addr = getenv("BENCH_ADDR");
  if (addr == NULL || bench_env_int("BENCH_NRANKS", 0) != 2) BENCH_DIE("start me with launch -p 2");

  /* ours */
  mscclppComm_t comm;
  CK(mscclppCommInitRank(&comm, 2, addr, rank));
  char *buf, *mbuf = NULL;
  if (tcp) {
    if (!(buf = malloc(maxBytes))) BENCH_DIE("malloc %zu", maxBytes);
    CK(mscclppConnect(comm, 1 - rank, 0, buf, maxBytes, mscclppTransportEthernet, NULL));
  } else {
    CK(mscclppHostAlloc((void**)&buf, maxBytes));
    if (!(mbuf = malloc(maxBytes))) BENCH_DIE("malloc %zu", maxBytes);
    memset(mbuf, 1 + rank, maxBytes);
    CK(mscclppConnect(comm, 1 - rank, 0, buf, maxBytes, mscclppTransportSHM, NULL));
    CK(mscclppConnect(comm, 1 - rank, 1, mbuf, maxBytes, mscclppTransportSHM, NULL));
  }
  memset(buf, 1 + rank, maxBytes);
  CK(mscclppConnectionSetup(comm));
  CK(mscclppProxyLaunch(comm));
  mscclppDevConn_t *conn, *mconn = NULL;
  CK(mscclppGetDeviceConnection(comm, 1 - rank, 0, &conn));
  if (!tcp) CK(mscclppGetDeviceConnection(comm, 1 - rank, 1, &mconn));

  /* UCX: context, worker, the region the peer puts into, the source */
  ucp_config_t* cfg;
  UCK(ucp_config_read(NULL, NULL, &cfg));
  ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA};
  ucp_context_h ctx;
  UCK(ucp_init(&params, cfg, &ctx));
  ucp_config_release(cfg);
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
  ux u = {0};
  UCK(ucp_worker_create(ctx, &wp, &u.worker));
  ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS,
                             .length = HDR + maxBytes,
                             .flags = UCP_MEM_MAP_ALLOCATE};
  ucp_mem_h region, srcMem;
  UCK(ucp_mem_map(ctx, &mp, &region));
  ucp_mem_attr_t ma = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};
  UCK(ucp_mem_query(region, &ma));
  char* regionAt = ma.address;
  memset(regionAt, 0, HDR + maxBytes);
  u.myFlag = (volatile uint64_t*)regionAt;
  if (!(u.src = malloc(maxBytes))) BENCH_DIE("malloc %zu", maxBytes);
  memset(u.src, 1 + rank, maxBytes);
  ucp_mem_map_params_t sp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                             .address = u.src,
                             .length = maxBytes};
  UCK(ucp_mem_map(ctx, &sp, &srcMem));

  /* the malloc region (shm): the user's memory registered, what ours' malloc connection puts into */
  ucx_region mr = {0};
  if (!tcp) {
    if (!(mr.at = malloc(HDR + maxBytes))) BENCH_DIE("malloc %zu", maxBytes);
    memset(mr.at, 0, HDR + maxBytes);
    ucp_mem_map_params_t rp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                               .address = mr.at,
                               .length = HDR + maxBytes};
    UCK(ucp_mem_map(ctx, &rp, &mr.memh));
  }
  ucx_region ar = {region, regionAt};

  /* exchange: [u32 alen][u32 rklen][u32 mrklen][u32 0][u64 region][u64 malloc region][addr][rkey][malloc rkey] */
  ucp_address_t* wa;
  size_t walen, rklen, mrklen = 0;
  void *rk, *mrk = NULL;
  UCK(ucp_worker_get_address(u.worker, &wa, &walen));
  UCK(ucp_rkey_pack(ctx, region, &rk, &rklen));
  if (!tcp) UCK(ucp_rkey_pack(ctx, mr.memh, &mrk, &mrklen));
  if (32 + walen + rklen + mrklen > BLOB) BENCH_DIE("UCX address (%zu B) and rkeys (%zu, %zu B) exceed %d B", walen, rklen, mrklen, BLOB);
  char* blobs = calloc(2, BLOB);
  char* mine = blobs + rank * BLOB;
  uint32_t lens[4] = {(uint32_t)walen, (uint32_t)rklen, (uint32_t)mrklen, 0};
  uint64_t at[2] = {(uint64_t)(uintptr_t)ar.at, (uint64_t)(uintptr_t)mr.at};
  memcpy(mine, lens, 16);
  memcpy(mine + 16, at, 16);
  memcpy(mine + 32, wa, walen);
  memcpy(mine + 32 + walen, rk, rklen);
  if (mrk) memcpy(mine + 32 + walen + rklen, mrk, mrklen);
  CK(mscclppBootstrapAllGather(comm, blobs, BLOB));
  ucp_worker_release_address(u.worker, wa);
  ucp_rkey_buffer_release(rk);
  if (mrk) ucp_rkey_buffer_release(mrk);
  char* peer = blobs + (1 - rank) * BLOB;
  memcpy(lens, peer, 16);
  memcpy(at, peer + 16, 16);
  ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, .address = (ucp_address_t*)(peer + 32)};
  UCK(ucp_ep_create(u.worker, &ep, &u.ep));
  ux um = u; /* the same endpoint into the peer's malloc region */
  u.peerRegion = at[0];
  UCK(ucp_ep_rkey_unpack(u.ep, peer + 32 + lens[0], &u.rkey));
  if (!tcp) {
    um.peerRegion = at[1];
    um.myFlag = (volatile uint64_t*)mr.at;
    UCK(ucp_ep_rkey_unpack(u.ep, peer + 32 + lens[0] + lens[1], &um.rkey));
  }
  /* cma (shm): each side's pid, malloc buffer and count word */
  static volatile uint64_t cmaFlag[8] __attribute__((aligned(64)));
  cma raw = {0};
  if (!tcp) {
    uint64_t ids[2][3] = {{0}};
    ids[rank][0] = (uint64_t)getpid(), ids[rank][1] = (uint64_t)(uintptr_t)mbuf;
    ids[rank][2] = (uint64_t)(uintptr_t)&cmaFlag[0];
    CK(mscclppBootstrapAllGather(comm, ids, sizeof(ids[0])));
    raw = (cma){(pid_t)ids[1 - rank][0], mbuf, ids[1 - rank][1], ids[1 - rank][2], &cmaFlag[0], 0, 0};
  }
  if (rank == 0) ux_info(u.ep, mode);
  bench_ready();

  static const size_t sizes[] = {8, 64u << 10, 1u << 20, 16u << 20, 256u << 20};
  static const char* const names[] = {"8", "64k", "1m", "16m", "256m"};
  double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
  pp_ops ux_ops = {&u, rank, u.src, regionAt + HDR, ux_put, ux_wait};
  pp_ops ours = {conn, rank, buf, buf, ours_put, ours_wait};
  pp_ops oursMalloc = {mconn, rank, mbuf, mbuf, ours_put, ours_wait};
  pp_ops umOps = {&um, rank, u.src, mr.at + HDR, ux_put, ux_wait};
  pp_ops cmaOps = {&raw, rank, mbuf, mbuf, cma_put, cma_wait};
  for (int i = 0; i < 5 && sizes[i] <= maxBytes; i++) {
    size_t s = sizes[i];
    enum { WAYS = 5 }; /* shm: cma, ucxmalloc, oursmalloc, ucx, ours; tcp: ucx, ours */
    pp_ops* ops[WAYS];
    const char* kp[WAYS];
    char keys[WAYS][96];
    const char* ways[WAYS];
    int k = 0;
    if (!tcp) {
      /* cma first: it runs after the last block's HostAlloc puts as oursmalloc runs after
       * ucxmalloc's, each on buffers the way before it did not touch (a way run right after
       * another on the same buffers finds them warm) */
      ops[k] = &cmaOps, ways[k++] = "cma";
      ops[k] = &umOps, ways[k++] = "ucxmalloc";
      ops[k] = &oursMalloc, ways[k++] = "oursmalloc";
    }
    ops[k] = &ux_ops, ways[k++] = "ucx";
    ops[k] = &ours, ways[k++] = "ours";
    for (int j = 0; j < k; j++) {
      snprintf(keys[j], sizeof(keys[j]), "ucx.%s.%s.%s", mode, names[i], ways[j]);
      kp[j] = keys[j];
    }
    int block = s <= 8 ? 512 : s <= (64u << 10) ? 50 : s <= (1u << 20) ? 20 : s <= (16u << 20) ? 2 : 1;
    static timed tw[WAYS];
    pp_ops wrapped[WAYS], *run[WAYS];
    for (int j = 0; j < k; j++) {
      tw[j].o = ops[j], tw[j].n = 0;
      wrapped[j] = (pp_ops){&tw[j], rank, ops[j]->src, ops[j]->inbox, timed_put, timed_wait};
      run[j] = s >= (16u << 20) ? &wrapped[j] : ops[j];
    }
    pp_multi(run, kp, k, s, s > (16u << 20) ? 2 * budget : budget, block, s > (16u << 20) ? 1 : 3, 0);
    /* ucx.<mode>.<size>.<way>.copy_gbps: size / the median put call, its first cycle left out */
    for (int j = 0; j < k && rank == 0 && s >= (16u << 20); j++) {
      size_t skip = tw[j].n > (size_t)block ? (size_t)block : 0;
      if (tw[j].n == skip) continue;
      char key[128];
      snprintf(key, sizeof(key), "%s.copy_gbps", kp[j]);
      bench_result(key, (double)s / (double)bench_median(tw[j].t + skip, tw[j].n - skip));
    }
  }

  /* UCX down: everything delivered, both sides done putting, then the endpoint and the rest */
  ucp_request_param_t none = {0};
  ux_wait_req(u.worker, ucp_worker_flush_nbx(u.worker, &none), "ucp_worker_flush_nbx");
  CK(mscclppBootstrapBarrier(comm));
  ucp_rkey_destroy(u.rkey);
  if (!tcp) ucp_rkey_destroy(um.rkey);
  ux_wait_req(u.worker, ucp_ep_close_nbx(u.ep, &none), "ucp_ep_close_nbx"); /* both sides close and progress */
  CK(mscclppBootstrapBarrier(comm));
  UCK(ucp_mem_unmap(ctx, srcMem));
  UCK(ucp_mem_unmap(ctx, region));
  if (!tcp) UCK(ucp_mem_unmap(ctx, mr.memh));
  ucp_worker_destroy(u.worker);
  ucp_cleanup(ctx);
  free(u.src);
  free(mr.at);
  free(blobs);

  CK(mscclppProxyStop(comm));
  CK(mscclppCommDestroy(comm));
  if (tcp) free(buf);
  else {
    CK(mscclppHostFree(buf));
    free(mbuf);
  }
  return 0;
}
