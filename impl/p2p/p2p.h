/*
 * p2p.h: the CUDA P2P transport of the C engine (CUDA mode, GPUs of one node):
 * puts and signals as asynchronous copies on the proxy context's stream of
 * cuda's proxy state (cuda/calls.h), stored as engCtx.transport and every
 * engConn.transport of the context.
 */
#ifndef MSCCLPP_P2P_H_
#define MSCCLPP_P2P_H_

#include "../../cuda/calls.h"
#include "../engine/engine.h"

extern const engOps p2pOps;

#endif
