/*
 * loopback.h: the loopback transport of the conformance suite (loopback.c).
 */
#ifndef MSCCLPP_CONFORM_LOOPBACK_H_
#define MSCCLPP_CONFORM_LOOPBACK_H_

#include <stdint.h>

/* A connection whose local handle 1 is src and whose peer's handle 1 is dst (size bytes each). */
void* lbNew(void* src, void* dst, uint64_t size);
void* lbConnOf(void* l);   /* its engConn */
void* lbPeerEpoch(void* l); /* the peer's proxy epoch word */
void lbFree(void* l);

#endif
