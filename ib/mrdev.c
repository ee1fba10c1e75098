/*
 * mrdev.c: GPU memory registration for GPUDirect RDMA through a dma-buf
 * (ibv_reg_dmabuf_mr, IBVERBS_1.12, rdma-core 34 and later), in a table of
 * its own so that a libibverbs without it still loads (ibcore.h). The other
 * way, ibv_reg_mr on a device pointer, needs nvidia-peermem and is ibMrReg.
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

struct iba_mr* ibMrRegDmabuf(ibCtx* c, const ibDmabufApi* d, uint64_t offset, uint64_t length, uint64_t iova, int fd,
                             char* err, int errLen)
{
  if (length == 0) {
    snprintf(err, (size_t)errLen, "ibv_reg_dmabuf_mr(%s): zero bytes", c->name);
    return NULL;
  }
  errno = 0;
  struct iba_mr* mr = d->reg_dmabuf_mr(c->pd, offset, (size_t)length, iova, fd,
                                       IBA_ACCESS_LOCAL_WRITE | IBA_ACCESS_REMOTE_WRITE | IBA_ACCESS_REMOTE_READ);
  if (mr == NULL)
    snprintf(err, (size_t)errLen, "ibv_reg_dmabuf_mr(%s, %#llx, %llu bytes): %s", c->name, (unsigned long long)iova,
             (unsigned long long)length, errno ? strerror(errno) : "failed");
  return mr;
}
