/*
 * ibcore.c: loading libibverbs (dlopen + dlvsym at IBVERBS_1.1), device
 * context, MR, CQ (and its poll) and RC QP setup. The data path is in
 * ibpath.c. See ibcore.h.
 */
#define _GNU_SOURCE
#include "ibcore.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fail(char* err, int errLen, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char* err, int errLen, const char* fmt, ...)
{
  if (err != NULL && errLen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, (size_t)errLen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---------------------------------------------------------------- loading */

/* Every symbol used exists at IBVERBS_1.1 in rdma-core (objdump -T); the
 * unversioned dlsym would pick the default version, which is the same one
 * today but need not stay so. impl/dynlib loads them (dlvsym). */
#define SYM(f) {"ibv_" #f, NULL, "IBVERBS_1.1", offsetof(ibApi, f)}
const dynSym ibSyms[] = {
    SYM(get_device_list), SYM(free_device_list), SYM(get_device_name), SYM(open_device), SYM(close_device),
    SYM(query_device),    SYM(query_port),       SYM(query_gid),       SYM(alloc_pd),    SYM(dealloc_pd),
    SYM(reg_mr),          SYM(dereg_mr),         SYM(create_cq),       SYM(destroy_cq),  SYM(create_qp),
    SYM(modify_qp),       SYM(destroy_qp),       SYM(wc_status_str),   {NULL, NULL, NULL, 0},
};
#undef SYM

int ibDeviceNames(const ibApi* a, char (*names)[IBA_SYSFS_NAME_MAX], int max, char* err, int errLen)
{
  int n = 0;
  errno = 0;
  struct iba_device** list = a->get_device_list(&n);
  if (list == NULL) {
    int e = errno;
    if (e == 0 || e == ENOSYS || e == ENOENT) return 0; /* no RDMA subsystem: no devices */
    return fail(err, errLen, "ibv_get_device_list: %s", strerror(e));
  }
  int k = 0;
  for (int i = 0; i < n && k < max; i++) {
    const char* nm = a->get_device_name(list[i]);
    if (nm == NULL) continue;
    snprintf(names[k++], IBA_SYSFS_NAME_MAX, "%s", nm);
  }
  a->free_device_list(list);
  return k;
}

/* ---------------------------------------------------------------- device */

static const char* portStateName(int s)
{
  static const char* names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  return (s >= 0 && s < 6) ? names[s] : "unknown";
}

/* Opens the device called name: NULL with err naming the devices there are when none is. */
static struct iba_context* openByName(const ibApi* a, const char* name, char* err, int errLen)
{
  int n = 0;
  errno = 0;
  struct iba_device** list = a->get_device_list(&n);
  if (list == NULL) {
    int e = errno;
    fail(err, errLen, "IB device \"%s\" not found: no RDMA devices (ibv_get_device_list: %s)", name,
         e ? strerror(e) : "no list");
    return NULL;
  }
  struct iba_device* dev = NULL;
  for (int i = 0; i < n; i++) {
    const char* nm = a->get_device_name(list[i]);
    if (nm != NULL && strncmp(nm, name, IBA_SYSFS_NAME_MAX) == 0) dev = list[i];
  }
  if (dev == NULL) {
    if (n == 0) {
      fail(err, errLen, "IB device \"%s\" not found: no RDMA devices", name);
    } else {
      char have[256] = "";
      for (int i = 0; i < n; i++) {
        const char* nm = a->get_device_name(list[i]);
        size_t l = strlen(have);
        snprintf(have + l, sizeof(have) - l, "%s%s", i ? ", " : "", nm ? nm : "?");
      }
      fail(err, errLen, "IB device \"%s\" not found (devices: %s)", name, have);
    }
    a->free_device_list(list);
    return NULL;
  }
  errno = 0;
  struct iba_context* ctx = a->open_device(dev);
  int e = errno;
  a->free_device_list(list); /* the context keeps its own reference to the device */
  if (ctx == NULL) fail(err, errLen, "ibv_open_device(%s): %s", name, e ? strerror(e) : "failed");
  return ctx;
}

/* Queries the device and takes its first ACTIVE port into c->port and c->portAttr; -1 with err
 * listing the ports' states when none is. */
/* The first ACTIVE port, or port want (> 0), which must be ACTIVE. */
static int pickPort(ibCtx* c, int want, char* err, int errLen)
{
  const ibApi* a = c->api;
  int rc = a->query_device(c->ctx, &c->devAttr);
  if (rc != 0) return fail(err, errLen, "ibv_query_device(%s): %s", c->name, strerror(rc > 0 ? rc : errno));
  char states[160] = "";
  if (want > c->devAttr.phys_port_cnt)
    return fail(err, errLen, "IB device \"%s\": no port %d (it has %d)", c->name, want, c->devAttr.phys_port_cnt);
  for (int p = want > 0 ? want : 1; p <= (want > 0 ? want : c->devAttr.phys_port_cnt); p++) {
    struct iba_port_attr pa;
    memset(&pa, 0, sizeof(pa)); /* as verbs.h's inline does before the exported call */
    rc = a->query_port(c->ctx, (uint8_t)p, &pa);
    if (rc != 0) return fail(err, errLen, "ibv_query_port(%s, %d): %s", c->name, p, strerror(rc > 0 ? rc : errno));
    if (pa.state == IBA_PORT_ACTIVE) {
      c->port = p;
      c->portAttr = pa;
      return 0;
    }
    size_t l = strlen(states);
    snprintf(states + l, sizeof(states) - l, "%sport %d: %s", l ? ", " : "", p, portStateName(pa.state));
  }
  return fail(err, errLen, "IB device \"%s\": no ACTIVE port (%s)", c->name, states[0] ? states : "no ports");
}

ibCtx* ibCtxOpen(const ibApi* a, const char* name, int gidIndex, int port, char* err, int errLen)
{
  ibCtx* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    fail(err, errLen, "out of memory");
    return NULL;
  }
  c->api = a;
  c->gidIndex = -1;
  snprintf(c->name, sizeof(c->name), "%s", name);
  c->ctx = openByName(a, name, err, errLen);
  if (c->ctx == NULL) {
    free(c);
    return NULL;
  }
  /* a negative index: the caller picks one once the port is known (ibCtxSetGid, gid.c) */
  if (pickPort(c, port, err, errLen) != 0 || (gidIndex >= 0 && ibCtxSetGid(c, gidIndex, err, errLen) != 0)) goto bad;
  errno = 0;
  c->pd = a->alloc_pd(c->ctx);
  if (c->pd == NULL) {
    fail(err, errLen, "ibv_alloc_pd(%s): %s", name, errno ? strerror(errno) : "failed");
    goto bad;
  }
  return c;
bad:
  a->close_device(c->ctx);
  free(c);
  return NULL;
}

void ibCtxClose(ibCtx* c)
{
  if (c == NULL) return;
  if (c->pd != NULL) c->api->dealloc_pd(c->pd);
  if (c->ctx != NULL) c->api->close_device(c->ctx);
  free(c);
}

/* ---------------------------------------------------------------- MR */

struct iba_mr* ibMrReg(ibCtx* c, uint64_t addr, uint64_t size, char* err, int errLen)
{
  if (size == 0) {
    fail(err, errLen, "ibv_reg_mr(%s): zero bytes", c->name);
    return NULL;
  }
  errno = 0;
  struct iba_mr* mr = c->api->reg_mr(c->pd, (void*)(uintptr_t)addr, (size_t)size,
                                     IBA_ACCESS_LOCAL_WRITE | IBA_ACCESS_REMOTE_WRITE | IBA_ACCESS_REMOTE_READ);
  if (mr == NULL)
    fail(err, errLen, "ibv_reg_mr(%s, %#llx, %llu bytes): %s", c->name, (unsigned long long)addr,
         (unsigned long long)size, errno ? strerror(errno) : "failed");
  return mr;
}

int ibMrDereg(ibCtx* c, struct iba_mr* mr, char* err, int errLen)
{
  int rc = c->api->dereg_mr(mr);
  if (rc != 0) return fail(err, errLen, "ibv_dereg_mr(%s): %s", c->name, strerror(rc > 0 ? rc : errno));
  return 0;
}

/* ---------------------------------------------------------------- CQ */

ibCq* ibCqCreate(ibCtx* c, int entries, char* err, int errLen)
{
  if (entries < 1) {
    fail(err, errLen, "CQ of %d entries", entries);
    return NULL;
  }
  if (c->devAttr.max_cqe > 0 && entries > c->devAttr.max_cqe) {
    fail(err, errLen, "CQ of %d entries: device %s allows %d", entries, c->name, c->devAttr.max_cqe);
    return NULL;
  }
  ibCq* q = calloc(1, sizeof(*q));
  if (q == NULL) {
    fail(err, errLen, "out of memory");
    return NULL;
  }
  errno = 0;
  q->cq = c->api->create_cq(c->ctx, entries, NULL, NULL, 0);
  if (q->cq == NULL) {
    fail(err, errLen, "ibv_create_cq(%s, %d): %s", c->name, entries, errno ? strerror(errno) : "failed");
    free(q);
    return NULL;
  }
  q->ctx = c;
  q->capacity = entries;
  pthread_mutex_init(&q->lock, NULL);
  return q;
}

int ibCqDestroy(ibCq* q, char* err, int errLen)
{
  if (q->nqp > 0) return fail(err, errLen, "CQ still has %d QPs", q->nqp);
  int rc = q->ctx->api->destroy_cq(q->cq);
  if (rc != 0) return fail(err, errLen, "ibv_destroy_cq(%s): %s", q->ctx->name, strerror(rc > 0 ? rc : errno));
  pthread_mutex_destroy(&q->lock);
  free(q);
  return 0;
}

void ibQpSetFailed(ibQp* q, const char* fmt, ...)
{
  /* the first error completion wins: later ones are flushes caused by it.
   * failed: 0, 2 while the message is written, 1 once it is readable. */
  int zero = 0;
  if (!__atomic_compare_exchange_n(&q->failed, &zero, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(q->failMsg, sizeof(q->failMsg), fmt, ap);
  va_end(ap);
  __atomic_store_n(&q->failed, 1, __ATOMIC_RELEASE);
}

int ibPoll(ibCq* cq, char* err, int errLen)
{
  struct iba_wc wc[16];
  pthread_mutex_lock(&cq->lock);
  int n = iba_poll_cq(cq->cq, 16, wc);
  if (n < 0) {
    pthread_mutex_unlock(&cq->lock);
    return fail(err, errLen, "ibv_poll_cq(%s): returned %d", cq->ctx->name, n);
  }
  for (int i = 0; i < n; i++) {
    ibQp* q = NULL;
    for (int j = 0; j < cq->nqp; j++)
      if (cq->qps[j]->qp->qp_num == wc[i].qp_num) q = cq->qps[j];
    if (q == NULL) continue; /* a QP destroyed with completions still queued */
    if (wc[i].status != IBA_WC_SUCCESS) {
      const char* what = cq->ctx->api->wc_status_str(wc[i].status);
      ibQpSetFailed(q, "RDMA to %s failed: %s (wc status %d, vendor error %#x, wr %llu, qpn %u on %s)", q->peer,
                  what ? what : "?", (int)wc[i].status, wc[i].vendor_err, (unsigned long long)wc[i].wr_id,
                  wc[i].qp_num, cq->ctx->name);
    }
    /* an errored WR is done too: later ones complete as flush errors */
    uint64_t cur = __atomic_load_n(&q->completed, __ATOMIC_ACQUIRE);
    while (cur < wc[i].wr_id &&
           !__atomic_compare_exchange_n(&q->completed, &cur, wc[i].wr_id, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      ;
  }
  cq->polled += (uint64_t)n;
  pthread_mutex_unlock(&cq->lock);
  return n;
}

/* ---------------------------------------------------------------- QP */

ibQp* ibQpCreate(ibCtx* c, ibCq* cq, uint32_t maxSendWr, const char* peer, char* err, int errLen)
{
  if (maxSendWr < 1 || (c->devAttr.max_qp_wr > 0 && maxSendWr > (uint32_t)c->devAttr.max_qp_wr)) {
    fail(err, errLen, "QP with max_send_wr %u: device %s allows 1..%d", maxSendWr, c->name, c->devAttr.max_qp_wr);
    return NULL;
  }
  pthread_mutex_lock(&cq->lock);
  int room = cq->capacity - cq->committed;
  int full = cq->nqp >= IB_CQ_MAX_QPS;
  pthread_mutex_unlock(&cq->lock);
  /* every WR may be signaled, and error completions come even for unsignaled ones */
  if ((int64_t)maxSendWr > room || full) {
    fail(err, errLen, "CQ of %d entries has room for %d more outstanding WRs, not %u", cq->capacity, room, maxSendWr);
    return NULL;
  }
  ibQp* q = calloc(1, sizeof(*q));
  if (q == NULL) {
    fail(err, errLen, "out of memory");
    return NULL;
  }
  q->ctx = c;
  q->cq = cq;
  q->maxSendWr = maxSendWr;
  q->signalEvery = maxSendWr / 2 > 0 ? maxSendWr / 2 : 1;
  q->lastSignaled = 1;
  snprintf(q->peer, sizeof(q->peer), "%s", peer ? peer : "peer");
  pthread_mutex_init(&q->lock, NULL);
  /* 24-bit PSN, different per QP and process */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  q->psn = (uint32_t)((uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)(uintptr_t)q) & 0xffffff;

  if (posix_memalign((void**)&q->sigBuf, 64, sizeof(uint64_t) * maxSendWr) != 0) {
    fail(err, errLen, "out of memory");
    goto bad;
  }
  memset(q->sigBuf, 0, sizeof(uint64_t) * maxSendWr);
  q->sigMr = ibMrReg(c, (uint64_t)(uintptr_t)q->sigBuf, sizeof(uint64_t) * maxSendWr, err, errLen);
  if (q->sigMr == NULL) goto bad;

  struct iba_qp_init_attr ia;
  memset(&ia, 0, sizeof(ia));
  ia.send_cq = cq->cq;
  ia.recv_cq = cq->cq;
  ia.qp_type = IBA_QPT_RC;
  ia.cap.max_send_wr = maxSendWr;
  ia.cap.max_recv_wr = 1; /* nothing is received; some providers refuse 0 */
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = sizeof(uint64_t); /* the signal; a provider may grant less, then none goes inline */
  ia.sq_sig_all = 0;
  errno = 0;
  q->qp = c->api->create_qp(c->pd, &ia);
  if (q->qp == NULL) {
    fail(err, errLen, "ibv_create_qp(%s, RC, max_send_wr %u): %s", c->name, maxSendWr,
         errno ? strerror(errno) : "failed");
    goto bad;
  }
  q->maxInline = ia.cap.max_inline_data;
  pthread_mutex_lock(&cq->lock);
  cq->qps[cq->nqp++] = q;
  cq->committed += (int)maxSendWr;
  pthread_mutex_unlock(&cq->lock);
  return q;
bad:
  if (q->sigMr != NULL) c->api->dereg_mr(q->sigMr);
  free(q->sigBuf);
  pthread_mutex_destroy(&q->lock);
  free(q);
  return NULL;
}

int ibQpDestroy(ibQp* q, char* err, int errLen)
{
  ibCq* cq = q->cq;
  const ibApi* a = q->ctx->api;
  int rc = a->destroy_qp(q->qp);
  if (rc != 0) return fail(err, errLen, "ibv_destroy_qp(%s): %s", q->ctx->name, strerror(rc > 0 ? rc : errno));
  pthread_mutex_lock(&cq->lock);
  for (int j = 0; j < cq->nqp; j++)
    if (cq->qps[j] == q) {
      cq->qps[j] = cq->qps[--cq->nqp];
      break;
    }
  cq->committed -= (int)q->maxSendWr;
  pthread_mutex_unlock(&cq->lock);
  a->dereg_mr(q->sigMr);
  free(q->sigBuf);
  pthread_mutex_destroy(&q->lock);
  free(q);
  return 0;
}

void ibQpLocalInfo(const ibQp* q, ibQpInfo* out)
{
  memset(out, 0, sizeof(*out));
  out->lid = q->ctx->portAttr.lid;
  out->port = (uint8_t)q->ctx->port;
  out->linkLayer = q->ctx->portAttr.link_layer;
  out->qpn = q->qp->qp_num;
  memcpy(out->gid, q->ctx->gid.raw, 16);
  out->mtu = (uint32_t)q->ctx->portAttr.active_mtu;
  out->psn = q->psn;
}

int ibQpInit(ibQp* q, char* err, int errLen)
{
  struct iba_qp_attr at;
  memset(&at, 0, sizeof(at));
  at.qp_state = IBA_QPS_INIT;
  at.pkey_index = 0;
  at.port_num = (uint8_t)q->ctx->port;
  at.qp_access_flags = IBA_ACCESS_REMOTE_WRITE | IBA_ACCESS_REMOTE_READ;
  int rc = q->ctx->api->modify_qp(q->qp, &at, IBA_QP_STATE | IBA_QP_PKEY_INDEX | IBA_QP_PORT | IBA_QP_ACCESS_FLAGS);
  if (rc != 0) return fail(err, errLen, "ibv_modify_qp(%s, INIT): %s", q->ctx->name, strerror(rc > 0 ? rc : errno));
  return 0;
}

int ibQpRtr(ibQp* q, const ibQpInfo* r, char* err, int errLen)
{
  struct iba_qp_attr at;
  memset(&at, 0, sizeof(at));
  at.qp_state = IBA_QPS_RTR;
  uint32_t mtu = q->ctx->portAttr.active_mtu;
  at.path_mtu = (enum iba_mtu)(r->mtu != 0 && r->mtu < mtu ? r->mtu : mtu);
  at.dest_qp_num = r->qpn;
  at.rq_psn = r->psn;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 12;
  at.ah_attr.dlid = r->lid;
  at.ah_attr.sl = q->ctx->sl;
  at.ah_attr.src_path_bits = 0;
  at.ah_attr.port_num = (uint8_t)q->ctx->port;
  if (q->ctx->portAttr.link_layer == IBA_LINK_LAYER_ETHERNET) {
    /* RoCE routes by GID: a GRH on every packet */
    at.ah_attr.is_global = 1;
    memcpy(at.ah_attr.grh.dgid.raw, r->gid, 16);
    at.ah_attr.grh.sgid_index = (uint8_t)q->ctx->gidIndex;
    at.ah_attr.grh.hop_limit = 255;
    at.ah_attr.grh.flow_label = 0;
    at.ah_attr.grh.traffic_class = q->ctx->tc;
  }
  int rc = q->ctx->api->modify_qp(q->qp, &at,
                                  IBA_QP_STATE | IBA_QP_AV | IBA_QP_PATH_MTU | IBA_QP_DEST_QPN | IBA_QP_RQ_PSN |
                                      IBA_QP_MAX_DEST_RD_ATOMIC | IBA_QP_MIN_RNR_TIMER);
  if (rc != 0)
    return fail(err, errLen, "ibv_modify_qp(%s, RTR towards %s: qpn %u, lid %u): %s", q->ctx->name, q->peer, r->qpn,
                r->lid, strerror(rc > 0 ? rc : errno));
  return 0;
}

int ibQpRts(ibQp* q, char* err, int errLen)
{
  struct iba_qp_attr at;
  memset(&at, 0, sizeof(at));
  at.qp_state = IBA_QPS_RTS;
  at.sq_psn = q->psn;
  at.timeout = 18;
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  at.max_rd_atomic = 1;
  int rc = q->ctx->api->modify_qp(q->qp, &at,
                                  IBA_QP_STATE | IBA_QP_SQ_PSN | IBA_QP_TIMEOUT | IBA_QP_RETRY_CNT | IBA_QP_RNR_RETRY |
                                      IBA_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) return fail(err, errLen, "ibv_modify_qp(%s, RTS): %s", q->ctx->name, strerror(rc > 0 ? rc : errno));
  return 0;
}
