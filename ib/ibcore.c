/*
 * ibcore.c: loading libibverbs (the dynSym list impl/dynlib resolves with
 * dlvsym at IBVERBS_1.1), listing devices, and the device context (device,
 * port, PD) every other part of the IB provider hangs off, plus ibErrf, the
 * error formatter they share. MRs are mr.c, CQs and QPs qp.c, the data path
 * ibpath.c. See ibcore.h.
 */
#define _GNU_SOURCE
#include "ibcore.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ibErrf(char* err, int errLen, const char* fmt, ...)
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
    return ibErrf(err, errLen, "ibv_get_device_list: %s", strerror(e));
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
    ibErrf(err, errLen, "IB device \"%s\" not found: no RDMA devices (ibv_get_device_list: %s)", name,
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
      ibErrf(err, errLen, "IB device \"%s\" not found: no RDMA devices", name);
    } else {
      char have[256] = "";
      for (int i = 0; i < n; i++) {
        const char* nm = a->get_device_name(list[i]);
        size_t l = strlen(have);
        snprintf(have + l, sizeof(have) - l, "%s%s", i ? ", " : "", nm ? nm : "?");
      }
      ibErrf(err, errLen, "IB device \"%s\" not found (devices: %s)", name, have);
    }
    a->free_device_list(list);
    return NULL;
  }
  errno = 0;
  struct iba_context* ctx = a->open_device(dev);
  int e = errno;
  a->free_device_list(list); /* the context keeps its own reference to the device */
  if (ctx == NULL) ibErrf(err, errLen, "ibv_open_device(%s): %s", name, e ? strerror(e) : "failed");
  return ctx;
}

/* Queries the device and takes its first ACTIVE port into c->port and c->portAttr; -1 with err
 * listing the ports' states when none is. */
/* The first ACTIVE port, or port want (> 0), which must be ACTIVE. */
/* Port want (it must be ACTIVE), or with want 0 the first ACTIVE port whose bit is clear in skip
 * (MSCCLPP_IB_HCA's "^dev:port" excludes that port only). */
static int pickPort(ibCtx* c, int want, uint64_t skip, char* err, int errLen)
{
  const ibApi* a = c->api;
  int rc = a->query_device(c->ctx, &c->devAttr);
  if (rc != 0) return ibErrf(err, errLen, "ibv_query_device(%s): %s", c->name, strerror(rc > 0 ? rc : errno));
  char states[160] = "";
  if (want > c->devAttr.phys_port_cnt)
    return ibErrf(err, errLen, "IB device \"%s\": no port %d (it has %d)", c->name, want, c->devAttr.phys_port_cnt);
  for (int p = want > 0 ? want : 1; p <= (want > 0 ? want : c->devAttr.phys_port_cnt); p++) {
    if (want == 0 && p < 64 && (skip >> p & 1)) {
      size_t l = strlen(states);
      snprintf(states + l, sizeof(states) - l, "%sport %d: excluded", l ? ", " : "", p);
      continue;
    }
    struct iba_port_attr pa;
    memset(&pa, 0, sizeof(pa)); /* as verbs.h's inline does before the exported call */
    rc = a->query_port(c->ctx, (uint8_t)p, &pa);
    if (rc != 0) return ibErrf(err, errLen, "ibv_query_port(%s, %d): %s", c->name, p, strerror(rc > 0 ? rc : errno));
    if (pa.state == IBA_PORT_ACTIVE) {
      c->port = p;
      c->portAttr = pa;
      return 0;
    }
    size_t l = strlen(states);
    snprintf(states + l, sizeof(states) - l, "%sport %d: %s", l ? ", " : "", p, portStateName(pa.state));
  }
  return ibErrf(err, errLen, "IB device \"%s\": no ACTIVE port (%s)", c->name, states[0] ? states : "no ports");
}

ibCtx* ibCtxOpen(const ibApi* a, const char* name, int gidIndex, int port, uint64_t skipPorts, char* err,
                 int errLen)
{
  ibCtx* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    ibErrf(err, errLen, "out of memory");
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
  if (pickPort(c, port, skipPorts, err, errLen) != 0 || (gidIndex >= 0 && ibCtxSetGid(c, gidIndex, err, errLen) != 0)) goto bad;
  errno = 0;
  c->pd = a->alloc_pd(c->ctx);
  if (c->pd == NULL) {
    ibErrf(err, errLen, "ibv_alloc_pd(%s): %s", name, errno ? strerror(errno) : "failed");
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
