/*
 * loopback.h: the loopback transport of the conformance suite (loopback.c).
 */
#ifndef MSCCLPP_CONFORM_LOOPBACK_H_
#define MSCCLPP_CONFORM_LOOPBACK_H_

#include <stdint.h>

/* Connections on one context. */
#define LB_CONNS 2

/* LB_CONNS connections on one context: connection k's local handle 1 is src[k], its peer's
 * handle 1 dst[k] (size bytes each). */
void* lbNew(void* src[LB_CONNS], void* dst[LB_CONNS], uint64_t size);
void* lbConnOf(void* l, int k);   /* connection k's engConn */
void* lbPeerEpoch(void* l, int k); /* the peer's proxy epoch word of connection k */
void lbClosePeer(void* l, int k);  /* the peer of connection k closed */
void lbFree(void* l);

#endif
