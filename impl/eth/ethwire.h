/*
 * ethwire.h: the decoder of the Ethernet transport's frame header (the wire
 * format in eth.h), apart from the receive thread so that a test can feed
 * it any bytes (impl/eth/ethfuzz). Header-only: static inline functions.
 */
#ifndef MSCCLPP_ETHWIRE_H_
#define MSCCLPP_ETHWIRE_H_

#include "eth.h"

#include <stdint.h>
#include <string.h>

/* One decoded header: a, b, n are [8:16], [16:24], [24:32] (see eth.h). */
typedef struct ethHdr {
  uint32_t magic, type;
  uint64_t a, b, n;
} ethHdr;

/* Decodes the ETH_HDR_BYTES at p into h. Returns 0, or -1 when it is not a
 * header of this protocol (wrong magic or unknown type; h still filled in
 * for the message). */
static inline int ethHdrDecode(const unsigned char* p, ethHdr* h)
{
  memcpy(&h->magic, p, 4);
  memcpy(&h->type, p + 4, 4);
  memcpy(&h->a, p + 8, 8);
  memcpy(&h->b, p + 16, 8);
  memcpy(&h->n, p + 24, 8);
  return h->magic == ETH_MAGIC && h->type >= ETH_DATA && h->type <= ETH_DATASIG ? 0 : -1;
}

/* Why the n bytes of a DATA or DATASIG header (handle a, offset b) cannot land in this
 * rank's registrations local[0..nLocal), or NULL when [b, b+n) lies inside
 * registration a. staged: memory the host cannot map is written through a
 * staging buffer (CUDA mode). */
static inline const char* ethDataBad(const ethHdr* h, const engReg* local, int nLocal, int staged)
{
  if (h->a == 0 || nLocal <= 0 || h->a >= (uint64_t)nLocal)
    return "a handle this rank did not register (or the signal slot)";
  if (h->b > local[h->a].size || h->n > local[h->a].size - h->b) return "bytes past the end of the registration";
  if (local[h->a].mapped == NULL && !staged) return "memory the host cannot write";
  return NULL;
}

/* Why the n bytes of an ETH_REG frame (offset off) cannot land in registered buffer r (NULL:
 * the receiver has no registration of the frame's index), or NULL when [off, off+n) lies
 * inside it. */
static inline const char* ethRegBad(const engReg* r, uint64_t off, uint64_t n)
{
  if (r == NULL) return "no such registration";
  if (off > r->size || n > r->size - off) return "bytes past its end";
  return NULL;
}

#endif
