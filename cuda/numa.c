/*
 * numa.c: pinned host memory placed on a NUMA node (cuwPinnedOnNode), and
 * the two reads tests and logs use (cuwPageNode, cuwPolicyMode). In C
 * because the memory-policy calls around a pinned allocation must run on
 * the very thread that allocates, with nothing of Go's scheduling between;
 * a file of its own because it is the one part of the driver wrappers that
 * talks to the kernel (set_mempolicy, get_mempolicy) rather than the driver.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Memory policy (linux/mempolicy.h; numaif.h is not always installed). */
#define CUW_MPOL_DEFAULT 0
#define CUW_MPOL_PREFERRED 1
#define CUW_MPOL_F_NODE 1
#define CUW_MPOL_F_ADDR 2
#define CUW_MAX_NODES 1024

typedef struct cuwPolicy {
  int saved; /* 1: the thread's policy was saved and must be restored */
  int mode;
  unsigned long mask[CUW_MAX_NODES / (8 * sizeof(unsigned long))];
} cuwPolicy;

/* Makes the calling thread prefer node for new pages, saving its policy in *p; 1 when the
 * kernel took it. Fails silently (no NUMA support, seccomp, an unknown node): 0. */
static int preferNode(int node, cuwPolicy* p)
{
  p->saved = 0;
#if defined(SYS_get_mempolicy) && defined(SYS_set_mempolicy)
  if (node < 0 || node >= CUW_MAX_NODES - 1) return 0;
  memset(p->mask, 0, sizeof(p->mask));
  if (syscall(SYS_get_mempolicy, &p->mode, p->mask, (unsigned long)CUW_MAX_NODES, NULL, 0UL) != 0) return 0;
  p->saved = 1;
  unsigned long want[CUW_MAX_NODES / (8 * sizeof(unsigned long))] = {0};
  want[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
  if (syscall(SYS_set_mempolicy, CUW_MPOL_PREFERRED, want, (unsigned long)CUW_MAX_NODES) != 0) {
    p->saved = 0;
    return 0;
  }
  return 1;
#else
  (void)node;
  return 0;
#endif
}

static void restorePolicy(const cuwPolicy* p)
{
#if defined(SYS_set_mempolicy)
  if (!p->saved) return;
  if ((p->mode & 0xffff) == CUW_MPOL_DEFAULT)
    syscall(SYS_set_mempolicy, p->mode, NULL, 0UL);
  else
    syscall(SYS_set_mempolicy, p->mode, p->mask, (unsigned long)CUW_MAX_NODES);
#else
  (void)p;
#endif
}

int cuwPinnedOnNode(const cuwApi* a, void** out, size_t size, unsigned int flags, int numaNode, int* placed)
{
  /* the driver maps and pins the pages on this thread: they follow its policy */
  cuwPolicy pol;
  *placed = preferNode(numaNode, &pol);
  cuwResult rc = a->memHostAlloc(out, size, flags);
  restorePolicy(&pol);
  if (rc != CUW_SUCCESS) *placed = 0;
  return rc;
}

int cuwPageNode(const void* p)
{
#if defined(SYS_get_mempolicy)
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, NULL, 0UL, p, (unsigned long)(CUW_MPOL_F_NODE | CUW_MPOL_F_ADDR)) != 0)
    return -1;
  return node;
#else
  (void)p;
  return -1;
#endif
}

int cuwPolicyMode(void)
{
#if defined(SYS_get_mempolicy)
  int mode = -1;
  unsigned long mask[CUW_MAX_NODES / (8 * sizeof(unsigned long))];
  if (syscall(SYS_get_mempolicy, &mode, mask, (unsigned long)CUW_MAX_NODES, NULL, 0UL) != 0) return -1;
  return mode;
#else
  return -1;
#endif
}
