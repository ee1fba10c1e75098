/*
 * cudaproxy.h: what every CUDA-mode transport's engOps table needs of cuda's proxy state
 * on the proxy thread (impl/p2p, impl/eth, impl/ib): its threadInit and publishTail, with the
 * driver's failures turned into the communicator's error.
 */
#ifndef MSCCLPP_CUDAPROXY_H
#define MSCCLPP_CUDAPROXY_H

#include "../../cuda/calls.h"
#include "../engine/engine.h"

/* The proxy thread's setup: st's context current, the thread bound near the GPU. */
int cudaProxyStateThreadInit(engCtx* ctx, cudaProxyState* st);
/* Publishes the FIFO tail to device memory on st's tail stream (a failed communicator's tail,
 * MSCCLPP_FIFO_TAIL_FAILED, synchronously). */
int cudaProxyStatePublishTail(engCtx* ctx, cudaProxyState* st, uint64_t tail);
/* The same with engOps' signatures, for a context whose transport state is the cudaProxyState
 * itself (P2P, IB in CUDA mode): an ops table names them as its threadInit and publishTail. */
int cudaProxyThreadInit(engCtx* ctx);
int cudaProxyPublishTail(engCtx* ctx, uint64_t tail);
/* The driver's name of rc into buf (or its number). */
const char* cudaProxyErrName(const cuwApi* a, int rc, char* buf, size_t len);

#endif
