/*
 * ibverbs_double.c: a TEST DOUBLE of libibverbs.so.1. It is NOT rdma-core
 * and moves no data over any network: it implements the verbs libmscclpp's
 * ib/ package uses, between processes of one host, so the IB layer can be
 * tested without RDMA hardware. Built by the ib/ tests (gcc alone, with
 * ../../../ib/ibvapi.h instead of verbs.h) into a temporary directory and
 * loaded through MSCCLPP_IBV_SO; never installed.
 *
 * The "fabric" is a file $MSCCLPP_IBV_DOUBLE_DIR/fabric mapped shared by
 * every process of a job: tables of MRs (rkey -> owner pid, address,
 * length, access, PD) and QPs (qpn -> owner, state, destination). Without
 * MSCCLPP_IBV_DOUBLE_DIR the double has no devices.
 *
 * No lock is shared between processes on the data path, as no lock is
 * shared between the hosts of a real fabric: a process SIGSTOPped at any
 * instruction must not stall another's verbs (it did, when the tables were
 * guarded by one flock: a rank stopped inside a post held it, and its peer's
 * next post, heartbeat included, waited for ever). A process writes only the
 * table entries it owns: it claims a free slot with a compare-and-swap of
 * `used`, fills it, then publishes its key (rkey, qpn: never reused, taken
 * by fetch-and-add) last; it withdraws an entry by clearing the key first.
 * A reader (another process's post) copies an entry and keeps the copy only
 * when the key still matches after the copy (seqlock style); a write into
 * an MR counts itself in its entry, and ibv_dereg_mr waits (boundedly) for
 * the writes that began before it, as a NIC does. Only
 * ATOMIC_FETCH_AND_ADD's read-add-write is serialised (flock), which
 * libmscclpp never posts.
 *
 * Behaviour modelled on real RC QPs:
 *  - one device "double_0" (MSCCLPP_IBV_DOUBLE_DEVICES=n: double_0..n-1),
 *    one port (MSCCLPP_IBV_DOUBLE_PORTS=2: two, alike, QPs on port 1
 *    only), ACTIVE (MSCCLPP_IBV_DOUBLE_PORT_DOWN=1: DOWN), LID 1+index,
 *    link layer InfiniBand (MSCCLPP_IBV_DOUBLE_LINK=eth: Ethernet/RoCE,
 *    LID 0, GID index 0 populated (fe80:: link-local), the others empty;
 *    MSCCLPP_IBV_DOUBLE_GIDS=n: indices 1..n-1 too, each IPv4-mapped
 *    ::ffff:10.0.<device>.<index>; an RTR must name a populated local index
 *    and a populated GID of a device);
 *  - ibv_modify_qp enforces RESET->INIT->RTR->RTS with the attribute
 *    masks an RC QP requires (EINVAL otherwise), any state -> RESET/ERR;
 *  - ibv_post_send (through context->ops.post_send) refuses WRs unless the
 *    QP is RTS (EINVAL, *bad_wr set), or when the send queue is full
 *    (ENOMEM): a WR's slot is freed only once a completion at or after it
 *    has been polled, as on hardware;
 *  - RDMA_WRITE (and ATOMIC_FETCH_AND_ADD) execute at post time, in order,
 *    with process_vm_writev into the owner of the rkey after checking the
 *    lkey, the rkey, its access flags, its PD against the responder QP's,
 *    and bounds; a failure is a REM_ACCESS_ERR (or LOC_PROT_ERR,
 *    RETRY_EXC_ERR when the responder QP is not connected back to us)
 *    completion, signaled or not, and moves the QP to ERR, where later WRs
 *    complete with WR_FLUSH_ERR;
 *  - completions of signaled WRs go to the send CQ; a CQ overrun makes
 *    poll_cq fail;
 *  - IBV_SEND_INLINE: the QP grants up to 64 bytes of max_inline_data (what
 *    it was asked, at most that); an inline WR longer than the QP's grant is
 *    refused (EINVAL), its lkey is not checked, and its bytes are read at
 *    post time; ibv_double_inline_writes() counts the inline WRs executed;
 *  - GPU memory (GPUDirect RDMA) through the stand-in CUDA driver
 *    (cuda/testdata/fakecuda.c, found in the process or through
 *    MSCCLPP_CUDA_LIBRARY): ibv_reg_dmabuf_mr takes its dma-buf fds (a memfd
 *    naming the device address; MSCCLPP_IBV_DOUBLE_DMABUF=0: EOPNOTSUPP, a
 *    provider without dma-buf support), and ibv_reg_mr takes a device
 *    address only with MSCCLPP_IBV_DOUBLE_PEERMEM=1 (nvidia-peermem loaded;
 *    else EFAULT, as without it). An MR records where its bytes live in the
 *    owner (the driver's fakeKernelView), which the writes use.
 *  - access flags: LOCAL_WRITE, REMOTE_WRITE (with LOCAL_WRITE), REMOTE_READ,
 *    REMOTE_ATOMIC and RELAXED_ORDERING; any other bit is EINVAL.
 *    ibv_reg_mr_iova2 (IBVERBS_1.8) is exported, with iova == addr only;
 *    ibv_double_mr_access_of(addr) reads the access flags of this process's
 *    MR at addr (tests);
 *  - RTR refuses a service level above 15 (EINVAL), as the kernel does; the
 *    address an RTR gave (service level, traffic class, source GID index,
 *    port) and the ACK timeout and retry count of its RTS (refused above 31
 *    and 7, as the kernel does) are kept: ibv_double_qp_attr(n) reads those of
 *    this process's n-th QP past RTR (tests);
 *  - fault injection: MSCCLPP_IBV_DOUBLE_FAIL_BYTES=n makes every RDMA
 *    write of exactly n bytes complete with RETRY_EXC_ERR (a link lost
 *    under it), moving the QP to ERR.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ibvapi.h"

#define DBL_MAX_DEVS 4
#define DBL_MAX_MR 4096
#define DBL_MAX_QP 1024
#define DBL_MAGIC 0x444f55424c453032ull /* "DOUBLE02" */
#define DBL_GID_TBL 4

typedef struct dblMr {
  uint32_t used, key, access;
  int pid;
  uint32_t inflight; /* accesses of other processes under way (mrEnter) */
  uint64_t pd;       /* (pid << 24) | local PD number */
  uint64_t addr, len;
  uint64_t backing; /* where addr's bytes live in the owner (differs for GPU memory) */
} dblMr;

typedef struct dblQp {
  uint32_t used, qpn, state, destQpn, dev;
  int pid;
  uint64_t pd;
} dblQp;

typedef struct dblFabric {
  uint64_t magic;
  uint32_t nextKey, nextQpn;
  dblMr mrs[DBL_MAX_MR];
  dblQp qps[DBL_MAX_QP];
} dblFabric;

/* The device: struct ibv_device starts with two pointers of _ibv_device_ops. */
typedef struct dblDevice {
  void* ops[2];
  int node_type, transport_type;
  char name[IBA_SYSFS_NAME_MAX];
  int index;
} dblDevice;

typedef struct dblCtx {
  struct iba_context ctx;
  dblDevice* dev;
} dblCtx;

typedef struct dblPd {
  struct iba_pd pd;
  uint64_t id;
} dblPd;

typedef struct dblCqe {
  struct iba_wc wc;
  struct dblQpL* qp;
  uint64_t seq;
} dblCqe;

typedef struct dblCq {
  struct iba_cq cq;
  pthread_mutex_t lock;
  int cap, head, count, overrun;
  dblCqe* ring;
} dblCq;

typedef struct dblQpL {
  struct iba_qp qp;
  uint32_t maxSendWr, maxSendSge, maxInline, slot;
  uint32_t sl, tc, sgid, port; /* the address of its RTR */
  uint32_t timeout, retry;      /* the ACK timeout and retry count of its RTS */
  uint64_t posted, retired; /* send queue occupancy: posted - retired */
  uint64_t pdId;
} dblQpL;

static dblDevice gDevs[DBL_MAX_DEVS];
static int gNumDevs = -1;
static dblFabric* gFab;
static int gFabFd = -1;
static char gFabDir[4096]; /* the directory of the fabric mapped (a test may switch jobs in one process) */
static pthread_mutex_t gInitLock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t gPdCount;
static uint64_t gInline; /* inline WRs executed */
#define DBL_MAX_INLINE 64

/* The inline WRs this process executed (for tests). */
uint64_t ibv_double_inline_writes(void) { return __atomic_load_n(&gInline, __ATOMIC_ACQUIRE); }
static uint64_t gRegs; /* MRs this process registered */
static struct dblQpL* gLocalQps[DBL_MAX_QP]; /* this process's QPs, by fabric slot */
/* The MRs this process registered, all kinds (for tests). */
uint64_t ibv_double_mr_regs(void) { return __atomic_load_n(&gRegs, __ATOMIC_ACQUIRE); }

static int envOn(const char* name, int dflt)
{
  const char* s = getenv(name);
  return s == NULL || s[0] == 0 ? dflt : s[0] == '1';
}

/* Where a GPU thread would find [addr, addr+len) of the stand-in driver's device memory: the
 * host address of its bytes, or 0 (no such driver loaded, or not its memory). */
static uint64_t deviceView(uint64_t addr, uint64_t len)
{
  typedef uint64_t (*viewFn)(uint64_t, uint64_t);
  viewFn f = (viewFn)dlsym(RTLD_DEFAULT, "fakeKernelView");
  const char* lib = getenv("MSCCLPP_CUDA_LIBRARY");
  if (f == NULL && lib != NULL && lib[0] != 0) {
    void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    if (h != NULL) f = (viewFn)dlsym(h, "fakeKernelView");
  }
  return f == NULL ? 0 : f(addr, len);
}

static int linkEth(void)
{
  const char* s = getenv("MSCCLPP_IBV_DOUBLE_LINK");
  return s != NULL && strcmp(s, "eth") == 0;
}

/* MSCCLPP_IBV_DOUBLE_FAIL_BYTES=n: an RDMA write of exactly n bytes fails as a lost link does
 * (RETRY_EXC_ERR, the QP to ERR); 0 or unset: none. */
static uint64_t failBytes(void)
{
  const char* s = getenv("MSCCLPP_IBV_DOUBLE_FAIL_BYTES");
  return s != NULL ? strtoull(s, NULL, 10) : 0;
}

/* Opens the fabric of this job (once per process). 0, or -1 with errno. */
static int fabricOpen(void)
{
  pthread_mutex_lock(&gInitLock);
  const char* dir = getenv("MSCCLPP_IBV_DOUBLE_DIR");
  if (dir == NULL || dir[0] == 0) {
    pthread_mutex_unlock(&gInitLock);
    errno = ENODEV;
    return -1;
  }
  if (gFab != NULL && strcmp(dir, gFabDir) == 0) {
    pthread_mutex_unlock(&gInitLock);
    return 0;
  }
  /* a new job directory: contexts of the old one must be gone (its mapping is kept) */
  char path[4096];
  snprintf(path, sizeof(path), "%s/fabric", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    pthread_mutex_unlock(&gInitLock);
    return -1;
  }
  /* two processes may size it at once: to the same size, which loses nothing */
  struct stat st;
  if (fstat(fd, &st) != 0 || (st.st_size < (off_t)sizeof(dblFabric) && ftruncate(fd, sizeof(dblFabric)) != 0)) {
    int e = errno;
    close(fd);
    pthread_mutex_unlock(&gInitLock);
    errno = e;
    return -1;
  }
  dblFabric* f = mmap(NULL, sizeof(dblFabric), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (f == MAP_FAILED) {
    int e = errno;
    close(fd);
    pthread_mutex_unlock(&gInitLock);
    errno = e;
    return -1;
  }
  uint64_t zero = 0; /* a new file is all zeros: keys and qpns count from 0 (see newKey) */
  (void)__atomic_compare_exchange_n(&f->magic, &zero, DBL_MAGIC, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  gFab = f;
  gFabFd = fd;
  snprintf(gFabDir, sizeof(gFabDir), "%s", dir);
  pthread_mutex_unlock(&gInitLock);
  return 0;
}

/* Serialises ATOMIC_FETCH_AND_ADD only (see the top). */
static void fabLock(void) { flock(gFabFd, LOCK_EX); }
static void fabUnlock(void) { flock(gFabFd, LOCK_UN); }

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* A new rkey or qpn: never 0, never reused in the job (24 bits for a qpn). */
static uint32_t newKey(uint32_t* counter, uint32_t base, uint32_t mask)
{
  for (;;) {
    uint32_t k = (base + __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED)) & mask;
    if (k != 0) return k;
  }
}

/* Claims a free slot of n (used: their first fields, stride apart) for this process; -1 when full. */
static int claimSlot(uint32_t* used, size_t stride, int n)
{
  for (int i = 0; i < n; i++) {
    uint32_t* u = (uint32_t*)((char*)used + (size_t)i * stride), zero = 0;
    if (__atomic_compare_exchange_n(u, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return i;
  }
  return -1;
}

/* A consistent copy of the MR of key into *out (see the top); 0 when there is none, else its
 * slot + 1. */
static int findMr(uint32_t key, dblMr* out)
{
  for (int i = 0; key != 0 && i < DBL_MAX_MR; i++) {
    dblMr* m = &gFab->mrs[i];
    if (__atomic_load_n(&m->key, __ATOMIC_ACQUIRE) != key) continue;
    *out = (dblMr){.used = 1, .key = key, .access = LD(m->access), .pid = LD(m->pid), .pd = LD(m->pd),
                   .addr = LD(m->addr), .len = LD(m->len), .backing = LD(m->backing)};
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return LD(m->key) == key ? i + 1 : 0;
  }
  return 0;
}

/* Enters an access to the MR of key in slot i: its owner's ibv_dereg_mr waits until it leaves
 * (mrLeave). 0 when the MR was deregistered meanwhile. (Dekker-style: either this sees the
 * withdrawn key, or the deregistration sees this access.) */
static int mrEnter(int i, uint32_t key)
{
  dblMr* m = &gFab->mrs[i];
  __atomic_fetch_add(&m->inflight, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&m->key, __ATOMIC_SEQ_CST) == key) return 1;
  __atomic_fetch_sub(&m->inflight, 1, __ATOMIC_SEQ_CST);
  return 0;
}

static void mrLeave(int i) { __atomic_fetch_sub(&gFab->mrs[i].inflight, 1, __ATOMIC_RELEASE); }

/* A consistent copy of the QP of qpn into *out; 0 when there is none. */
static int findQp(uint32_t qpn, dblQp* out)
{
  for (int i = 0; qpn != 0 && i < DBL_MAX_QP; i++) {
    dblQp* q = &gFab->qps[i];
    if (__atomic_load_n(&q->qpn, __ATOMIC_ACQUIRE) != qpn) continue;
    *out = (dblQp){.used = 1, .qpn = qpn, .pid = LD(q->pid), .pd = LD(q->pd), .dev = LD(q->dev)};
    out->state = __atomic_load_n(&q->state, __ATOMIC_ACQUIRE); /* after destQpn is set (ibv_modify_qp) */
    out->destQpn = LD(q->destQpn);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return LD(q->qpn) == qpn;
  }
  return 0;
}

static void devGid(int index, union iba_gid* g)
{
  memset(g, 0, sizeof(*g));
  g->raw[0] = 0xfe;
  g->raw[1] = 0x80;
  g->raw[8] = 0xd0; /* "double" interface ids */
  g->raw[9] = 0x0b;
  g->raw[15] = (uint8_t)(index + 1);
}

/* The populated GID entries of each port (MSCCLPP_IBV_DOUBLE_GIDS, 1 to DBL_GID_TBL). */
static int nGids(void)
{
  const char* s = getenv("MSCCLPP_IBV_DOUBLE_GIDS");
  int n = s != NULL ? atoi(s) : 1;
  return n < 1 ? 1 : n > DBL_GID_TBL ? DBL_GID_TBL : n;
}

/* GID k of device index dev: devGid for 0, else ::ffff:10.0.dev.k. */
static void gidAt(int dev, int k, union iba_gid* g)
{
  if (k == 0) {
    devGid(dev, g);
    return;
  }
  memset(g, 0, sizeof(*g));
  g->raw[10] = g->raw[11] = 0xff;
  g->raw[12] = 10;
  g->raw[14] = (uint8_t)dev;
  g->raw[15] = (uint8_t)k;
}

/* ------------------------------------------------------------ devices */

struct iba_device** ibv_get_device_list(int* num)
{
  pthread_mutex_lock(&gInitLock);
  if (gNumDevs < 0) {
    const char* s = getenv("MSCCLPP_IBV_DOUBLE_DEVICES");
    int n = s ? atoi(s) : 1;
    if (n < 0) n = 0;
    if (n > DBL_MAX_DEVS) n = DBL_MAX_DEVS;
    for (int i = 0; i < n; i++) {
      gDevs[i].node_type = 1;      /* IBV_NODE_CA */
      gDevs[i].transport_type = 0; /* IBV_TRANSPORT_IB */
      snprintf(gDevs[i].name, sizeof(gDevs[i].name), "double_%d", i);
      gDevs[i].index = i;
    }
    gNumDevs = n;
  }
  const char* dir = getenv("MSCCLPP_IBV_DOUBLE_DIR");
  int n = (dir != NULL && dir[0] != 0) ? gNumDevs : 0;
  pthread_mutex_unlock(&gInitLock);
  struct iba_device** list = calloc((size_t)n + 1, sizeof(*list));
  if (list == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  for (int i = 0; i < n; i++) list[i] = (struct iba_device*)&gDevs[i];
  if (num) *num = n;
  return list;
}

void ibv_free_device_list(struct iba_device** list) { free(list); }

const char* ibv_get_device_name(struct iba_device* d) { return d ? ((dblDevice*)d)->name : NULL; }

static int dblPollCq(struct iba_cq* cq, int n, struct iba_wc* wc);
static int dblPostSend(struct iba_qp* qp, struct iba_send_wr* wr, struct iba_send_wr** bad);
static int dblPostRecv(struct iba_qp* qp, struct iba_recv_wr* wr, struct iba_recv_wr** bad)
{
  (void)qp;
  *bad = wr;
  return EOPNOTSUPP; /* nothing here receives */
}

struct iba_context* ibv_open_device(struct iba_device* d)
{
  if (d == NULL) {
    errno = EINVAL;
    return NULL;
  }
  if (fabricOpen() != 0) return NULL;
  dblCtx* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  c->dev = (dblDevice*)d;
  c->ctx.device = d;
  c->ctx.ops.poll_cq = dblPollCq;
  c->ctx.ops.post_send = dblPostSend;
  c->ctx.ops.post_recv = dblPostRecv;
  c->ctx.cmd_fd = -1;
  c->ctx.async_fd = -1;
  c->ctx.num_comp_vectors = 1;
  pthread_mutex_init(&c->ctx.mutex, NULL);
  return &c->ctx;
}

int ibv_close_device(struct iba_context* ctx)
{
  free(ctx);
  return 0;
}

int ibv_query_device(struct iba_context* ctx, struct iba_device_attr* a)
{
  (void)ctx;
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "double");
  a->max_mr_size = ~0ull;
  a->max_qp = DBL_MAX_QP;
  a->max_qp_wr = 32768;
  a->max_sge = 4;
  a->max_cq = 1024;
  a->max_cqe = 1 << 22;
  a->max_mr = DBL_MAX_MR;
  a->max_pd = 1 << 20;
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  a->atomic_cap = IBA_ATOMIC_HCA;
  a->max_pkeys = 1;
  const char* ports = getenv("MSCCLPP_IBV_DOUBLE_PORTS");
  a->phys_port_cnt = (ports != NULL && ports[0] == '2') ? 2 : 1;
  return 0;
}

/* The exported (compat) ibv_query_port: fills the fields up to flags. */
/* Whether the device has port p (MSCCLPP_IBV_DOUBLE_PORTS). */
static int hasPort(int p)
{
  const char* ports = getenv("MSCCLPP_IBV_DOUBLE_PORTS");
  return p == 1 || (p == 2 && ports != NULL && ports[0] == '2');
}

int ibv_query_port(struct iba_context* ctx, uint8_t port, struct iba_port_attr* a)
{
  if (!hasPort(port)) return EINVAL;
  dblDevice* d = ((dblCtx*)ctx)->dev;
  size_t n = offsetof(struct iba_port_attr, port_cap_flags2);
  memset(a, 0, n);
  const char* down = getenv("MSCCLPP_IBV_DOUBLE_PORT_DOWN");
  a->state = (down != NULL && down[0] == '1') ? IBA_PORT_DOWN : IBA_PORT_ACTIVE;
  a->max_mtu = IBA_MTU_4096;
  a->active_mtu = IBA_MTU_4096;
  a->gid_tbl_len = DBL_GID_TBL;
  a->max_msg_sz = 1u << 31;
  a->pkey_tbl_len = 1;
  a->lid = linkEth() ? 0 : (uint16_t)(1 + d->index);
  a->sm_lid = linkEth() ? 0 : 1;
  a->phys_state = 5; /* LinkUp */
  a->link_layer = linkEth() ? IBA_LINK_LAYER_ETHERNET : IBA_LINK_LAYER_INFINIBAND;
  return 0;
}

int ibv_query_gid(struct iba_context* ctx, uint8_t port, int index, union iba_gid* gid)
{
  if (!hasPort(port) || index < 0 || index >= DBL_GID_TBL) return EINVAL;
  if (index < nGids())
    gidAt(((dblCtx*)ctx)->dev->index, index, gid);
  else
    memset(gid, 0, sizeof(*gid)); /* unpopulated entries read as zero */
  return 0;
}

/* ------------------------------------------------------------ PD, MR */

struct iba_pd* ibv_alloc_pd(struct iba_context* ctx)
{
  dblPd* p = calloc(1, sizeof(*p));
  if (p == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  p->pd.context = ctx;
  p->pd.handle = __atomic_add_fetch(&gPdCount, 1, __ATOMIC_RELAXED);
  p->id = ((uint64_t)getpid() << 24) | p->pd.handle;
  return &p->pd;
}

int ibv_dealloc_pd(struct iba_pd* pd)
{
  free(pd);
  return 0;
}

/* 1 when [addr, addr+len) can be read in this process. */
static int readable(uint64_t addr, uint64_t len)
{
  char b;
  struct iovec l = {&b, 1};
  struct iovec r1 = {(void*)(uintptr_t)addr, 1};
  struct iovec r2 = {(void*)(uintptr_t)(addr + len - 1), 1};
  return process_vm_readv(getpid(), &l, 1, &r1, 1, 0) == 1 && process_vm_readv(getpid(), &l, 1, &r2, 1, 0) == 1;
}

static struct iba_mr* regMr(struct iba_pd* pd, uint64_t addr, size_t len, int access, uint64_t backing);

#define DBL_ACCESS_KNOWN                                                                            \
  (IBA_ACCESS_LOCAL_WRITE | IBA_ACCESS_REMOTE_WRITE | IBA_ACCESS_REMOTE_READ | IBA_ACCESS_REMOTE_ATOMIC | \
   IBA_ACCESS_RELAXED_ORDERING)

/* Access flags real verbs refuse: REMOTE_WRITE without LOCAL_WRITE, unknown bits. */
static int badAccess(int access)
{
  return ((access & IBA_ACCESS_REMOTE_WRITE) && !(access & IBA_ACCESS_LOCAL_WRITE)) || (access & ~DBL_ACCESS_KNOWN);
}

struct iba_mr* ibv_reg_mr(struct iba_pd* pd, void* addr, size_t len, int access)
{
  if (pd == NULL || len == 0 || badAccess(access)) {
    errno = EINVAL;
    return NULL;
  }
  uint64_t a = (uint64_t)(uintptr_t)addr, backing = a;
  if (!readable(a, len)) {
    /* GPU memory: only with nvidia-peermem */
    backing = envOn("MSCCLPP_IBV_DOUBLE_PEERMEM", 0) ? deviceView(a, len) : 0;
    if (backing == 0) {
      errno = EFAULT;
      return NULL;
    }
  }
  return regMr(pd, a, len, access, backing);
}

/* ibv_reg_dmabuf_mr (IBVERBS_1.12): length bytes at offset of the dma-buf fd, addressed by WRs
 * at iova. The fd must be one of the stand-in driver's (see the header). */
struct iba_mr* ibv_reg_dmabuf_mr(struct iba_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                                 int access)
{
  if (!envOn("MSCCLPP_IBV_DOUBLE_DMABUF", 1)) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  if (pd == NULL || length == 0 || badAccess(access)) {
    errno = EINVAL;
    return NULL;
  }
  char link[64], target[256];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  unsigned long long start = 0;
  if (n <= 0 || (target[n] = 0, sscanf(target, "/memfd:fakecuda-dmabuf:%llx", &start)) != 1) {
    errno = EBADF; /* not a dma-buf this double knows */
    return NULL;
  }
  uint64_t backing = deviceView(start + offset, length);
  if (backing == 0) {
    errno = EFAULT;
    return NULL;
  }
  return regMr(pd, iova, length, access, backing);
}

/* ibv_reg_mr_iova2 (IBVERBS_1.8): the double models iova == addr only. */
struct iba_mr* ibv_reg_mr_iova2(struct iba_pd* pd, void* addr, size_t len, uint64_t iova, unsigned int access)
{
  if (iova != (uint64_t)(uintptr_t)addr) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  return ibv_reg_mr(pd, addr, len, (int)access);
}

/* The access flags of this process's (first live) MR at addr, or UINT64_MAX (for tests). */
uint64_t ibv_double_mr_access_of(uint64_t addr)
{
  for (int i = 0; gFab != NULL && i < DBL_MAX_MR; i++) {
    dblMr* m = &gFab->mrs[i];
    if (LD(m->key) != 0 && LD(m->pid) == getpid() && LD(m->addr) == addr) return LD(m->access);
  }
  return UINT64_MAX;
}

/* The address of this process's n-th QP past RTR: sl | tc << 8 | sgid index << 16 | port << 24,
 * and past RTS its ACK timeout << 32 | retry count << 40, or UINT64_MAX (for tests). */
uint64_t ibv_double_qp_attr(uint64_t n)
{
  for (int i = 0; i < DBL_MAX_QP; i++) {
    struct dblQpL* q = gLocalQps[i];
    if (q == NULL || (q->qp.state != IBA_QPS_RTR && q->qp.state != IBA_QPS_RTS)) continue;
    if (n-- == 0)
      return q->sl | q->tc << 8 | q->sgid << 16 | q->port << 24 | (uint64_t)q->timeout << 32 | (uint64_t)q->retry << 40;
  }
  return UINT64_MAX;
}

static struct iba_mr* regMr(struct iba_pd* pd, uint64_t addr, size_t len, int access, uint64_t backing)
{
  struct iba_mr* mr = calloc(1, sizeof(*mr));
  if (mr == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  int slot = claimSlot(&gFab->mrs[0].used, sizeof(dblMr), DBL_MAX_MR);
  if (slot < 0) {
    free(mr);
    errno = ENOMEM;
    return NULL;
  }
  dblMr* m = &gFab->mrs[slot];
  ST(m->access, (uint32_t)access);
  ST(m->pid, getpid());
  ST(m->pd, ((dblPd*)pd)->id);
  ST(m->addr, addr);
  ST(m->len, (uint64_t)len);
  ST(m->backing, backing);
  uint32_t key = newKey(&gFab->nextKey, 0x1000, UINT32_MAX);
  __atomic_store_n(&m->key, key, __ATOMIC_RELEASE); /* published: readers may use it */
  __atomic_fetch_add(&gRegs, 1, __ATOMIC_ACQ_REL);
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = (void*)(uintptr_t)addr;
  mr->length = len;
  mr->handle = key;
  mr->lkey = key;
  mr->rkey = key;
  return mr;
}

int ibv_dereg_mr(struct iba_mr* mr)
{
  for (int i = 0; mr->lkey != 0 && i < DBL_MAX_MR; i++) {
    dblMr* m = &gFab->mrs[i];
    if (LD(m->key) != mr->lkey) continue;
    __atomic_store_n(&m->key, 0, __ATOMIC_SEQ_CST); /* withdrawn before its fields change */
    /* writes that entered before end first; at most 200 ms: a writer killed or stopped between
     * entering and leaving must not hang this process */
    for (int k = 0; __atomic_load_n(&m->inflight, __ATOMIC_SEQ_CST) != 0 && k < 2000; k++) usleep(100);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    ST(m->access, 0);
    ST(m->pid, 0);
    ST(m->pd, 0);
    ST(m->addr, 0);
    ST(m->len, 0);
    __atomic_store_n(&m->used, 0, __ATOMIC_RELEASE);
    break;
  }
  free(mr);
  return 0;
}

/* ------------------------------------------------------------ CQ */

struct iba_cq* ibv_create_cq(struct iba_context* ctx, int cqe, void* cq_context, struct iba_comp_channel* ch,
                             int vec)
{
  (void)vec;
  if (cqe < 1 || cqe > (1 << 22)) {
    errno = EINVAL;
    return NULL;
  }
  dblCq* q = calloc(1, sizeof(*q));
  if (q != NULL) q->ring = calloc((size_t)cqe, sizeof(dblCqe));
  if (q == NULL || q->ring == NULL) {
    free(q);
    errno = ENOMEM;
    return NULL;
  }
  q->cq.context = ctx;
  q->cq.channel = ch;
  q->cq.cq_context = cq_context;
  q->cq.cqe = cqe;
  q->cap = cqe;
  pthread_mutex_init(&q->lock, NULL);
  return &q->cq;
}

int ibv_destroy_cq(struct iba_cq* cq)
{
  dblCq* q = (dblCq*)cq;
  free(q->ring);
  pthread_mutex_destroy(&q->lock);
  free(q);
  return 0;
}

static void pushCqe(dblQpL* qp, uint64_t seq, uint64_t wrId, enum iba_wc_status st, enum iba_wc_opcode op,
                    uint32_t bytes)
{
  dblCq* q = (dblCq*)qp->qp.send_cq;
  pthread_mutex_lock(&q->lock);
  if (q->count == q->cap) {
    q->overrun = 1;
  } else {
    dblCqe* e = &q->ring[(q->head + q->count) % q->cap];
    memset(e, 0, sizeof(*e));
    e->wc.wr_id = wrId;
    e->wc.status = st;
    e->wc.opcode = op;
    e->wc.byte_len = bytes;
    e->wc.qp_num = qp->qp.qp_num;
    e->wc.vendor_err = st == IBA_WC_SUCCESS ? 0 : 0xd0b1e;
    e->qp = qp;
    e->seq = seq;
    q->count++;
  }
  pthread_mutex_unlock(&q->lock);
}

static int dblPollCq(struct iba_cq* cq, int n, struct iba_wc* wc)
{
  dblCq* q = (dblCq*)cq;
  pthread_mutex_lock(&q->lock);
  if (q->overrun) {
    pthread_mutex_unlock(&q->lock);
    return -EOVERFLOW;
  }
  int k = 0;
  while (k < n && q->count > 0) {
    dblCqe* e = &q->ring[q->head];
    wc[k++] = e->wc;
    /* the send queue slots up to this WR are free again */
    if (e->qp != NULL && e->seq > __atomic_load_n(&e->qp->retired, __ATOMIC_ACQUIRE))
      __atomic_store_n(&e->qp->retired, e->seq, __ATOMIC_RELEASE);
    q->head = (q->head + 1) % q->cap;
    q->count--;
  }
  pthread_mutex_unlock(&q->lock);
  return k;
}

/* ------------------------------------------------------------ QP */

struct iba_qp* ibv_create_qp(struct iba_pd* pd, struct iba_qp_init_attr* ia)
{
  if (pd == NULL || ia == NULL || ia->qp_type != IBA_QPT_RC || ia->send_cq == NULL || ia->recv_cq == NULL ||
      ia->cap.max_send_wr < 1 || ia->cap.max_send_wr > 32768 || ia->cap.max_send_sge > 4 ||
      ia->cap.max_recv_sge > 4) {
    errno = EINVAL;
    return NULL;
  }
  dblQpL* q = calloc(1, sizeof(*q));
  if (q == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  int slot = claimSlot(&gFab->qps[0].used, sizeof(dblQp), DBL_MAX_QP);
  if (slot < 0) {
    free(q);
    errno = ENOMEM;
    return NULL;
  }
  dblQp* g = &gFab->qps[slot];
  ST(g->destQpn, 0);
  ST(g->state, (uint32_t)IBA_QPS_RESET);
  ST(g->pid, getpid());
  ST(g->pd, ((dblPd*)pd)->id);
  ST(g->dev, (uint32_t)((dblCtx*)pd->context)->dev->index);
  uint32_t qpn = newKey(&gFab->nextQpn, 0x100, 0xffffff);
  __atomic_store_n(&g->qpn, qpn, __ATOMIC_RELEASE); /* published */
  q->qp.context = pd->context;
  q->qp.qp_context = ia->qp_context;
  q->qp.pd = pd;
  q->qp.send_cq = ia->send_cq;
  q->qp.recv_cq = ia->recv_cq;
  q->qp.handle = (uint32_t)slot;
  q->qp.qp_num = qpn;
  q->qp.state = IBA_QPS_RESET;
  q->qp.qp_type = IBA_QPT_RC;
  q->maxSendWr = ia->cap.max_send_wr;
  q->maxSendSge = ia->cap.max_send_sge;
  q->slot = (uint32_t)slot;
  q->pdId = ((dblPd*)pd)->id;
  q->maxInline = ia->cap.max_inline_data < DBL_MAX_INLINE ? ia->cap.max_inline_data : DBL_MAX_INLINE;
  ia->cap.max_inline_data = q->maxInline;
  gLocalQps[slot] = q;
  return &q->qp;
}

int ibv_destroy_qp(struct iba_qp* qp)
{
  dblQpL* q = (dblQpL*)qp;
  dblQp* g = &gFab->qps[q->slot];
  gLocalQps[q->slot] = NULL;
  __atomic_store_n(&g->qpn, 0, __ATOMIC_RELAXED); /* withdrawn before its fields change */
  __atomic_thread_fence(__ATOMIC_RELEASE);
  ST(g->state, 0);
  ST(g->destQpn, 0);
  ST(g->pid, 0);
  ST(g->pd, 0);
  ST(g->dev, 0);
  __atomic_store_n(&g->used, 0, __ATOMIC_RELEASE);
  /* drop its queued completions */
  dblCq* c = (dblCq*)qp->send_cq;
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < c->count; i++) {
    dblCqe* e = &c->ring[(c->head + i) % c->cap];
    if (e->qp == q) e->qp = NULL, e->wc.qp_num = 0;
  }
  pthread_mutex_unlock(&c->lock);
  free(q);
  return 0;
}

#define REQ_INIT (IBA_QP_STATE | IBA_QP_PKEY_INDEX | IBA_QP_PORT | IBA_QP_ACCESS_FLAGS)
#define REQ_RTR \
  (IBA_QP_STATE | IBA_QP_AV | IBA_QP_PATH_MTU | IBA_QP_DEST_QPN | IBA_QP_RQ_PSN | IBA_QP_MAX_DEST_RD_ATOMIC | \
   IBA_QP_MIN_RNR_TIMER)
#define REQ_RTS \
  (IBA_QP_STATE | IBA_QP_SQ_PSN | IBA_QP_TIMEOUT | IBA_QP_RETRY_CNT | IBA_QP_RNR_RETRY | IBA_QP_MAX_QP_RD_ATOMIC)

int ibv_modify_qp(struct iba_qp* qp, struct iba_qp_attr* at, int mask)
{
  dblQpL* q = (dblQpL*)qp;
  if (!(mask & IBA_QP_STATE)) return EINVAL; /* the double only changes states */
  int cur = qp->state, next = at->qp_state;
  if (next == IBA_QPS_RESET || next == IBA_QPS_ERR) goto ok;
  if ((cur == IBA_QPS_RESET || cur == IBA_QPS_INIT) && next == IBA_QPS_INIT) {
    if (cur == IBA_QPS_RESET && (mask & REQ_INIT) != REQ_INIT) return EINVAL;
    if ((mask & IBA_QP_PORT) && at->port_num != 1) return EINVAL;
    goto ok;
  }
  if (cur == IBA_QPS_INIT && next == IBA_QPS_RTR) {
    if ((mask & REQ_RTR) != REQ_RTR) return EINVAL;
    if (at->path_mtu < IBA_MTU_256 || at->path_mtu > IBA_MTU_4096) return EINVAL;
    if (at->ah_attr.port_num != 0 && at->ah_attr.port_num != 1) return EINVAL;
    if (at->ah_attr.sl > 15) return EINVAL;
    /* the address must name a device of this fabric */
    int found = 0;
    for (int i = 0; i < gNumDevs && !found; i++) {
      if (linkEth()) {
        for (int k = 0; k < nGids() && !found; k++) {
          union iba_gid g;
          gidAt(i, k, &g);
          found = at->ah_attr.is_global && memcmp(g.raw, at->ah_attr.grh.dgid.raw, 16) == 0 &&
                  at->ah_attr.grh.sgid_index < nGids();
        }
      } else {
        found = at->ah_attr.dlid == (uint16_t)(1 + i);
      }
    }
    if (!found) return EINVAL;
    goto ok;
  }
  if ((cur == IBA_QPS_RTR || cur == IBA_QPS_RTS) && next == IBA_QPS_RTS) {
    if (cur == IBA_QPS_RTR && (mask & REQ_RTS) != REQ_RTS) return EINVAL;
    /* as the kernel: a 5-bit timeout, a 3-bit retry count */
    if (((mask & IBA_QP_TIMEOUT) && at->timeout > 31) || ((mask & IBA_QP_RETRY_CNT) && at->retry_cnt > 7)) return EINVAL;
    if (mask & IBA_QP_TIMEOUT) q->timeout = at->timeout;
    if (mask & IBA_QP_RETRY_CNT) q->retry = at->retry_cnt;
    goto ok;
  }
  return EINVAL;
ok:
  dblQp* g = &gFab->qps[q->slot]; /* this process's own entry: the destination before the state */
  if (next == IBA_QPS_RTR) {
    ST(g->destQpn, at->dest_qp_num);
    q->sl = at->ah_attr.sl;
    q->tc = at->ah_attr.is_global ? at->ah_attr.grh.traffic_class : 0;
    q->sgid = at->ah_attr.is_global ? at->ah_attr.grh.sgid_index : 0;
    q->port = at->ah_attr.port_num;
  }
  __atomic_store_n(&g->state, (uint32_t)next, __ATOMIC_RELEASE);
  if (next == IBA_QPS_RESET) ST(g->destQpn, 0);
  if (next == IBA_QPS_RESET) q->posted = q->retired = 0;
  qp->state = (enum iba_qp_state)next;
  return 0;
}

/* ------------------------------------------------------------ send */

static enum iba_wc_status remoteAccess(struct iba_send_wr* wr, const uint64_t* src, int pid, uint64_t raddr,
                                       int atomic);

/* Executes one WR; returns its completion status. */
static enum iba_wc_status execute(dblQpL* q, struct iba_send_wr* wr, uint32_t* bytes)
{
  uint64_t len = 0;
  for (int i = 0; i < wr->num_sge; i++) len += wr->sg_list[i].length;
  *bytes = (uint32_t)len;
  dblQp* me = &gFab->qps[q->slot];
  uint32_t myQpn = LD(me->qpn);
  dblQp peerCopy, *peer = &peerCopy;
  dblMr mc, *m = &mc;
  if (!findQp(LD(me->destQpn), peer) || peer->destQpn != myQpn ||
      (peer->state != IBA_QPS_RTR && peer->state != IBA_QPS_RTS))
    return IBA_WC_RETRY_EXC_ERR; /* nobody answers */
  if (wr->opcode == IBA_WR_RDMA_WRITE && len != 0 && len == failBytes())
    return IBA_WC_RETRY_EXC_ERR; /* injected: the link failed under this write */
  /* the local gather list: lkeys of this process and PD, in bounds (an inline WR's bytes are
   * copied at post time, its lkey unused); src[i] is where its bytes live */
  int inl = (wr->send_flags & IBA_SEND_INLINE) != 0;
  uint64_t src[4];
  for (int i = 0; i < wr->num_sge; i++) {
    uint64_t a = wr->sg_list[i].addr, l = wr->sg_list[i].length;
    src[i] = a;
    if (inl) continue;
    if (!findMr(wr->sg_list[i].lkey, m) || m->pid != getpid() || m->pd != q->pdId || a < m->addr || l > m->len ||
        a - m->addr > m->len - l)
      return IBA_WC_LOC_PROT_ERR;
    src[i] = m->backing + (a - m->addr);
  }
  int atomic = wr->opcode == IBA_WR_ATOMIC_FETCH_AND_ADD;
  uint64_t raddr = atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
  uint32_t rkey = atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
  if (len == 0 && !atomic) /* a zero-length write touches no memory and checks no rkey */
    return IBA_WC_SUCCESS;
  dblMr rc, *r = &rc;
  uint64_t need = atomic ? IBA_ACCESS_REMOTE_ATOMIC : IBA_ACCESS_REMOTE_WRITE;
  uint64_t rl = atomic ? 8 : len;
  int slot = findMr(rkey, r) - 1;
  if (slot < 0 || r->pd != peer->pd || r->pid != peer->pid || !(r->access & need) || raddr < r->addr ||
      rl > r->len || raddr - r->addr > r->len - rl || (atomic && (raddr & 7)) || !mrEnter(slot, rkey))
    return IBA_WC_REM_ACCESS_ERR;
  if (inl) __atomic_add_fetch(&gInline, 1, __ATOMIC_RELEASE);
  /* where the bytes live in the owner (GPU memory: the driver's, see deviceView) */
  enum iba_wc_status st = remoteAccess(wr, src, r->pid, r->backing + (raddr - r->addr), atomic);
  mrLeave(slot);
  return st;
}

/* Carries out WR wr, its bytes at src[], on the memory of process pid at raddr (checked: an MR
 * entered). */
static enum iba_wc_status remoteAccess(struct iba_send_wr* wr, const uint64_t* src, int pid, uint64_t raddr,
                                       int atomic)
{
  enum iba_wc_status st = IBA_WC_SUCCESS;
  if (atomic) {
    /* read, add, write back under the fabric lock (not atomic against the owner's CPU) */
    fabLock();
    uint64_t old = 0;
    struct iovec l = {&old, 8}, rv = {(void*)(uintptr_t)raddr, 8};
    if (process_vm_readv(pid, &l, 1, &rv, 1, 0) != 8) {
      st = IBA_WC_REM_OP_ERR;
    } else {
      uint64_t v = old + wr->wr.atomic.compare_add;
      struct iovec lv = {&v, 8};
      if (process_vm_writev(pid, &lv, 1, &rv, 1, 0) != 8) st = IBA_WC_REM_OP_ERR;
      if (st == IBA_WC_SUCCESS && wr->num_sge > 0) memcpy((void*)(uintptr_t)src[0], &old, 8);
    }
    fabUnlock();
    return st;
  }
  uint64_t off = 0;
  for (int i = 0; i < wr->num_sge && st == IBA_WC_SUCCESS; i++) {
    uint64_t done = 0, l = wr->sg_list[i].length;
    while (done < l) {
      struct iovec lv = {(void*)(uintptr_t)(src[i] + done), l - done};
      struct iovec rv = {(void*)(uintptr_t)(raddr + off + done), l - done};
      ssize_t n = pid == getpid() ? (memmove(rv.iov_base, lv.iov_base, l - done), (ssize_t)(l - done))
                                  : process_vm_writev(pid, &lv, 1, &rv, 1, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        st = IBA_WC_REM_OP_ERR; /* the owner is gone, or the memory was unmapped */
        break;
      }
      done += (uint64_t)n;
    }
    off += l;
  }
  return st;
}

static int dblPostSend(struct iba_qp* qp, struct iba_send_wr* wr, struct iba_send_wr** bad)
{
  dblQpL* q = (dblQpL*)qp;
  for (; wr != NULL; wr = wr->next) {
    if (qp->state != IBA_QPS_RTS && qp->state != IBA_QPS_ERR) {
      *bad = wr;
      return EINVAL;
    }
    uint64_t total = 0;
    for (int i = 0; i < wr->num_sge && i < 4; i++) total += wr->sg_list[i].length;
    if ((wr->send_flags & IBA_SEND_INLINE) && (total > q->maxInline || wr->opcode != IBA_WR_RDMA_WRITE)) {
      *bad = wr;
      return EINVAL; /* beyond the QP's max_inline_data */
    }
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->maxSendSge ||
        (wr->opcode != IBA_WR_RDMA_WRITE && wr->opcode != IBA_WR_ATOMIC_FETCH_AND_ADD)) {
      *bad = wr;
      return EINVAL;
    }
    if (q->posted - __atomic_load_n(&q->retired, __ATOMIC_ACQUIRE) >= q->maxSendWr) {
      *bad = wr;
      return ENOMEM;
    }
    uint64_t seq = ++q->posted;
    enum iba_wc_opcode op = wr->opcode == IBA_WR_RDMA_WRITE ? IBA_WC_RDMA_WRITE : IBA_WC_FETCH_ADD;
    if (qp->state == IBA_QPS_ERR) {
      pushCqe(q, seq, wr->wr_id, IBA_WC_WR_FLUSH_ERR, op, 0);
      continue;
    }
    uint32_t bytes = 0;
    enum iba_wc_status st = execute(q, wr, &bytes);
    if (st != IBA_WC_SUCCESS) {
      pushCqe(q, seq, wr->wr_id, st, op, 0); /* errors complete whether signaled or not */
      struct iba_qp_attr at = {.qp_state = IBA_QPS_ERR};
      ibv_modify_qp(qp, &at, IBA_QP_STATE);
    } else if (wr->send_flags & IBA_SEND_SIGNALED) {
      pushCqe(q, seq, wr->wr_id, st, op, bytes);
    }
  }
  return 0;
}

const char* ibv_wc_status_str(enum iba_wc_status s)
{
  static const char* names[] = {"success",
                                "local length error",
                                "local QP operation error",
                                "local EE context operation error",
                                "local protection error",
                                "Work Request Flushed Error",
                                "memory bind operation error",
                                "bad response error",
                                "local access error",
                                "remote invalid request error",
                                "remote access error",
                                "remote operation error",
                                "transport retry counter exceeded",
                                "RNR retry counter exceeded",
                                "local RDD violation error",
                                "remote invalid RD request",
                                "aborted error",
                                "invalid EE context number",
                                "invalid EE context state",
                                "fatal error",
                                "response timeout error",
                                "general error"};
  return (s >= 0 && (size_t)s < sizeof(names) / sizeof(names[0])) ? names[s] : "unknown";
}
