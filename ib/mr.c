/*
 * mr.c: every memory registration of the IB provider: host memory
 * (ibMrReg, ibv_reg_mr; on a device pointer it needs nvidia-peermem), with
 * relaxed ordering (ibMrRegRelaxed, ibv_reg_mr_iova2, IBVERBS_1.8), and GPU
 * memory for GPUDirect RDMA through a dma-buf (ibMrRegDmabuf,
 * ibv_reg_dmabuf_mr, IBVERBS_1.12, rdma-core 34 and later). The two optional
 * entry points are in tables of their own so that a libibverbs without them
 * still loads (ibcore.h). A file of its own: registration is what the Go
 * side's memory cache calls, apart from device and QP set-up.
 */
#define _GNU_SOURCE
#include "ibcore.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

const dynSym ibDmabufSyms[] = {
    {"ibv_reg_dmabuf_mr", NULL, "IBVERBS_1.12", offsetof(ibDmabufApi, reg_dmabuf_mr)},
    {NULL, NULL, NULL, 0},
};

const dynSym ibRoSyms[] = {
    {"ibv_reg_mr_iova2", NULL, "IBVERBS_1.8", offsetof(ibRoApi, reg_mr_iova2)},
    {NULL, NULL, NULL, 0},
};

struct iba_mr* ibMrRegRelaxed(ibCtx* c, const ibRoApi* ro, uint64_t addr, uint64_t size, char* err, int errLen)
{
  if (size == 0) {
    snprintf(err, (size_t)errLen, "ibv_reg_mr_iova2(%s): zero bytes", c->name);
    return NULL;
  }
  errno = 0;
  struct iba_mr* mr = ro->reg_mr_iova2(c->pd, (void*)(uintptr_t)addr, (size_t)size, addr,
                                       IBA_ACCESS_LOCAL_WRITE | IBA_ACCESS_REMOTE_WRITE | IBA_ACCESS_REMOTE_READ |
                                           IBA_ACCESS_RELAXED_ORDERING);
  if (mr == NULL)
    snprintf(err, (size_t)errLen, "ibv_reg_mr_iova2(%s, %#llx, %llu bytes, relaxed ordering): %s", c->name,
             (unsigned long long)addr, (unsigned long long)size, errno ? strerror(errno) : "failed");
  return mr;
}

struct iba_mr* ibMrRegDmabuf(ibCtx* c, const ibDmabufApi* d, uint64_t offset, uint64_t length, uint64_t iova, int fd,
                             int relaxed, char* err, int errLen)
{
  if (length == 0) {
    snprintf(err, (size_t)errLen, "ibv_reg_dmabuf_mr(%s): zero bytes", c->name);
    return NULL;
  }
  errno = 0;
  struct iba_mr* mr = d->reg_dmabuf_mr(c->pd, offset, (size_t)length, iova, fd,
                                       IBA_ACCESS_LOCAL_WRITE | IBA_ACCESS_REMOTE_WRITE | IBA_ACCESS_REMOTE_READ |
                                           (relaxed ? IBA_ACCESS_RELAXED_ORDERING : 0));
  if (mr == NULL)
    snprintf(err, (size_t)errLen, "ibv_reg_dmabuf_mr(%s, %#llx, %llu bytes): %s", c->name, (unsigned long long)iova,
             (unsigned long long)length, errno ? strerror(errno) : "failed");
  return mr;
}

struct iba_mr* ibMrReg(ibCtx* c, uint64_t addr, uint64_t size, char* err, int errLen)
{
  if (size == 0) {
    ibErrf(err, errLen, "ibv_reg_mr(%s): zero bytes", c->name);
    return NULL;
  }
  errno = 0;
  struct iba_mr* mr = c->api->reg_mr(c->pd, (void*)(uintptr_t)addr, (size_t)size,
                                     IBA_ACCESS_LOCAL_WRITE | IBA_ACCESS_REMOTE_WRITE | IBA_ACCESS_REMOTE_READ);
  if (mr == NULL)
    ibErrf(err, errLen, "ibv_reg_mr(%s, %#llx, %llu bytes): %s", c->name, (unsigned long long)addr,
         (unsigned long long)size, errno ? strerror(errno) : "failed");
  return mr;
}

int ibMrDereg(ibCtx* c, struct iba_mr* mr, char* err, int errLen)
{
  int rc = c->api->dereg_mr(mr);
  if (rc != 0) return ibErrf(err, errLen, "ibv_dereg_mr(%s): %s", c->name, strerror(rc > 0 ? rc : errno));
  return 0;
}
