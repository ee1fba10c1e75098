/*
 * checked_ref.c: reference (e) of the 8-byte host rows (checked_ref.h),
 * built as its own shared library so that each put and each wait crosses a
 * library boundary (PLT) as a call into libmscclpp does. The table of open
 * connections is the library's state, as libmscclpp's table of live
 * contexts is; the benchmark opens one connection per process.
 */
#include "checked_ref.h"

#include <stddef.h>
#include <string.h>

#define CHK_MAX 16

static chkConn* open_[CHK_MAX];
static int nOpen;

int chkOpen(chkConn* c)
{
  if (nOpen >= CHK_MAX) return -1;
  open_[nOpen++] = c;
  return 0;
}

void chkClose(chkConn* c)
{
  for (int i = 0; i < nOpen; i++)
    if (open_[i] == c) open_[i] = open_[--nOpen];
}

static int isOpen(const chkConn* c)
{
  for (int i = 0; i < nOpen; i++)
    if (open_[i] == c) return 1;
  return 0;
}

int chkPutWithSignal(chkConn* c, uint64_t dstOff, uint64_t srcOff, uint64_t size)
{
  if (c == NULL || !isOpen(c)) return -1;
  if (dstOff > c->dstSize || size > c->dstSize - dstOff || srcOff > c->srcSize || size > c->srcSize - srcOff) return -2;
  memcpy(c->dst + dstOff, c->src + srcOff, size);
  __atomic_store_n(c->peerEpoch, ++c->sent, __ATOMIC_RELEASE);
  return 0;
}

int chkWait(chkConn* c)
{
  if (c == NULL || !isOpen(c)) return -1;
  uint64_t want = ++c->seen;
  while (__atomic_load_n(c->myEpoch, __ATOMIC_ACQUIRE) < want) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
  }
  return 0;
}
