/*
 * ethwire.h: the Ethernet transport's wire format and the decoder of its
 * frame header, apart from the receive thread so that a test can feed it any
 * bytes (impl/eth/ethfuzz). Header-only: constants and static inline
 * functions.
 *
 * Wire format (little endian), in both directions of the socket:
 *   [0:4]  "MSE1"   [4:8] type (ETH_DATA, ETH_FLAG)
 *   [8:16] DATA: destination handle   FLAG: the count of signals sent
 *   [16:24] DATA: destination offset  [24:32] DATA: size; the payload follows.
 * FENCE marks the end of what a rank sent before its proxies stopped; BYE
 * that a close is on purpose (an end of stream without it means the peer died);
 * PING that the sender is alive (sent when a tick passed with nothing else).
 * DATASIG is a put with its signal in one frame (one sendmsg, one segment
 * where it fits): a DATA header and payload, then the 8-byte signal count
 * FLAG would have carried; the receiver lands the payload, then the count.
 * A signal sends the count of signals completed on the connection, after the
 * data of every counted signal (the stream is ordered), so it never announces
 * data still in flight. flush() needs no round trip: a put returns once the
 * kernel has copied its source, which may then be reused.
 */
#ifndef MSCCLPP_ETHWIRE_H_
#define MSCCLPP_ETHWIRE_H_

#include "../engine/engine.h"

#define ETH_MAGIC 0x3145534du /* "MSE1" */
#define ETH_DATA 1u
#define ETH_FLAG 2u
#define ETH_FENCE 3u /* [8:16] fence number: everything sent before it has been received */
#define ETH_BYE 4u   /* the sender is closing the connection on purpose */
#define ETH_REG 5u   /* [8:16] the receiver's mscclppRegisterBuffer index, [16:24] offset, [24:32] size; payload */
#define ETH_PING 6u  /* nothing else went out for a tick: the sender and the link are alive */
#define ETH_DATASIG 7u /* as DATA, then the payload, then an 8-byte signal count (as FLAG's [8:16]) */
#define ETH_SIG_BYTES 8 /* the count after a DATASIG payload */
#define ETH_HDR_BYTES 32

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
