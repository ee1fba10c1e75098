/*
 * ops.h: the IB transport as an engOps table of the C engine
 * (impl/engine/engine.h). engConn.transport points to an ibConnState that
 * Go fills at connection setup (ib.ConnState); engConn.local/remote keep
 * the registrations' sizes and addresses, ibConnState their keys, by the
 * same handles: local handle i is localMr[i], peer handle i is remote[i].
 */
#ifndef MSCCLPP_IB_OPS_H_
#define MSCCLPP_IB_OPS_H_

#include "../engine/engine.h"
#include "../../ib/ibcore.h"

typedef struct ibRemoteMr {
  uint64_t addr; /* in the peer's address space */
  uint64_t size;
  uint32_t rkey;
} ibRemoteMr;

typedef struct ibConnState {
  ibQp* qp;
  int nLocal;
  struct iba_mr** localMr; /* by local handle; handle 0 is the connection's signal slot */
  int nRemote;
  ibRemoteMr* remote; /* by peer handle; handle 0 is the peer's signal slot */
} ibConnState;

/* The IB transport: Data = RDMA write, Flag = an 8-byte RDMA write of the
 * connection's signal count into the peer's localSignalEpochId->proxy,
 * Sync = flush (every posted WR completed). */
extern const engOps ibEngOps;
/* The same in CUDA mode: the context's transport state is a CUDA-mode proxy's cudaProxyState. */
extern const engOps ibCudaEngOps;

int ibEngOp(engConn* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
            uint64_t size);

#endif
