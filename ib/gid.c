/*
 * gid.c: the GID of an open device's port (ibCtxSetGid): the index
 * MSCCLPP_IB_GID_INDEX names, or the one the Go side picked from sysfs
 * (gid.go: the first RoCE v2 IPv4-mapped entry, as NCCL does), checked and
 * read before any QP is made.
 */
#include "ibcore.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int ibCtxSetGid(ibCtx* c, int gidIndex, char* err, int errLen)
{
  if (gidIndex < 0 || (c->portAttr.gid_tbl_len > 0 && gidIndex >= c->portAttr.gid_tbl_len)) {
    snprintf(err, (size_t)errLen, "IB device \"%s\" port %d: GID index %d out of range (table of %d; MSCCLPP_IB_GID_INDEX)",
             c->name, c->port, gidIndex, c->portAttr.gid_tbl_len);
    return -1;
  }
  union iba_gid gid;
  int rc = c->api->query_gid(c->ctx, (uint8_t)c->port, gidIndex, &gid);
  if (rc != 0) {
    snprintf(err, (size_t)errLen, "ibv_query_gid(%s, port %d, index %d): %s", c->name, c->port, gidIndex,
             strerror(rc > 0 ? rc : errno));
    return -1;
  }
  if (c->portAttr.link_layer == IBA_LINK_LAYER_ETHERNET) {
    static const uint8_t zero[16];
    if (memcmp(gid.raw, zero, 16) == 0) {
      snprintf(err, (size_t)errLen,
               "IB device \"%s\" port %d is RoCE and GID index %d is empty: set MSCCLPP_IB_GID_INDEX to a populated "
               "entry",
               c->name, c->port, gidIndex);
      return -1;
    }
  } else if (c->portAttr.lid == 0) {
    snprintf(err, (size_t)errLen, "IB device \"%s\" port %d has no LID (is a subnet manager running?)", c->name,
             c->port);
    return -1;
  }
  c->gid = gid;
  c->gidIndex = gidIndex;
  return 0;
}
