/*
 * qp.c: the completion queues and RC queue pairs of the IB provider: their
 * creation with the CQ's room checked against every QP's send queue, their
 * destruction, and a QP's RESET -> INIT -> RTR -> RTS transitions with the
 * peer's ibQpInfo. A file of its own because it is the connection set-up
 * state machine, called from Go once per connection; the posts that use a
 * ready QP are ibpath.c. See ibcore.h.
 */
#define _GNU_SOURCE
#include "ibcore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- CQ */

ibCq* ibCqCreate(ibCtx* c, int entries, char* err, int errLen)
{
  if (entries < 1) {
    ibErrf(err, errLen, "CQ of %d entries", entries);
    return NULL;
  }
  if (c->devAttr.max_cqe > 0 && entries > c->devAttr.max_cqe) {
    ibErrf(err, errLen, "CQ of %d entries: device %s allows %d", entries, c->name, c->devAttr.max_cqe);
    return NULL;
  }
  ibCq* q = calloc(1, sizeof(*q));
  if (q == NULL) {
    ibErrf(err, errLen, "out of memory");
    return NULL;
  }
  errno = 0;
  q->cq = c->api->create_cq(c->ctx, entries, NULL, NULL, 0);
  if (q->cq == NULL) {
    ibErrf(err, errLen, "ibv_create_cq(%s, %d): %s", c->name, entries, errno ? strerror(errno) : "failed");
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
  if (q->nqp > 0) return ibErrf(err, errLen, "CQ still has %d QPs", q->nqp);
  int rc = q->ctx->api->destroy_cq(q->cq);
  if (rc != 0) return ibErrf(err, errLen, "ibv_destroy_cq(%s): %s", q->ctx->name, strerror(rc > 0 ? rc : errno));
  pthread_mutex_destroy(&q->lock);
  free(q);
  return 0;
}

/* ---------------------------------------------------------------- QP */

ibQp* ibQpCreate(ibCtx* c, ibCq* cq, uint32_t maxSendWr, const char* peer, char* err, int errLen)
{
  if (maxSendWr < 1 || (c->devAttr.max_qp_wr > 0 && maxSendWr > (uint32_t)c->devAttr.max_qp_wr)) {
    ibErrf(err, errLen, "QP with max_send_wr %u: device %s allows 1..%d", maxSendWr, c->name, c->devAttr.max_qp_wr);
    return NULL;
  }
  pthread_mutex_lock(&cq->lock);
  int room = cq->capacity - cq->committed;
  int full = cq->nqp >= IB_CQ_MAX_QPS;
  pthread_mutex_unlock(&cq->lock);
  /* every WR may be signaled, and error completions come even for unsignaled ones */
  if ((int64_t)maxSendWr > room || full) {
    ibErrf(err, errLen, "CQ of %d entries has room for %d more outstanding WRs, not %u", cq->capacity, room, maxSendWr);
    return NULL;
  }
  ibQp* q = calloc(1, sizeof(*q));
  if (q == NULL) {
    ibErrf(err, errLen, "out of memory");
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
    ibErrf(err, errLen, "out of memory");
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
    ibErrf(err, errLen, "ibv_create_qp(%s, RC, max_send_wr %u): %s", c->name, maxSendWr,
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
  if (rc != 0) return ibErrf(err, errLen, "ibv_destroy_qp(%s): %s", q->ctx->name, strerror(rc > 0 ? rc : errno));
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
  if (rc != 0) return ibErrf(err, errLen, "ibv_modify_qp(%s, INIT): %s", q->ctx->name, strerror(rc > 0 ? rc : errno));
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
    return ibErrf(err, errLen, "ibv_modify_qp(%s, RTR towards %s: qpn %u, lid %u): %s", q->ctx->name, q->peer, r->qpn,
                r->lid, strerror(rc > 0 ? rc : errno));
  return 0;
}

int ibQpRts(ibQp* q, char* err, int errLen)
{
  struct iba_qp_attr at;
  memset(&at, 0, sizeof(at));
  at.qp_state = IBA_QPS_RTS;
  at.sq_psn = q->psn;
  at.timeout = q->ctx->ackTimeout;
  at.retry_cnt = q->ctx->retryCnt;
  at.rnr_retry = 7;
  at.max_rd_atomic = 1;
  int rc = q->ctx->api->modify_qp(q->qp, &at,
                                  IBA_QP_STATE | IBA_QP_SQ_PSN | IBA_QP_TIMEOUT | IBA_QP_RETRY_CNT | IBA_QP_RNR_RETRY |
                                      IBA_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) return ibErrf(err, errLen, "ibv_modify_qp(%s, RTS): %s", q->ctx->name, strerror(rc > 0 ? rc : errno));
  return 0;
}
