package ib

/*
#cgo CFLAGS: -O2 -Wall
#include <stdlib.h>
#include "ops.h"

static struct iba_mr** ibMrArray(int n) { return (struct iba_mr**)calloc((size_t)(n > 0 ? n : 1), sizeof(struct iba_mr*)); }
static void ibMrArraySet(struct iba_mr** a, int i, void* mr) { a[i] = (struct iba_mr*)mr; }
static ibRemoteMr* ibRemoteArray(int n) { return (ibRemoteMr*)calloc((size_t)(n > 0 ? n : 1), sizeof(ibRemoteMr)); }
static void ibRemoteSet(ibRemoteMr* a, int i, uint64_t addr, uint64_t size, uint32_t rkey) {
	a[i].addr = addr; a[i].size = size; a[i].rkey = rkey;
}
static void ibConnStateFree(ibConnState* s) { if (s) { free(s->localMr); free(s->remote); free(s); } }
static const engOps* ibOpsTable(void) { return &ibEngOps; }
static const engOps* ibCudaOpsTable(void) { return &ibCudaEngOps; }
*/
import "C"

import (
	"unsafe"

	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// ConnState is the C state of one IB connection for ibEngOps (ops.c):
// the QP, the local MRs by local handle and the peer's by peer handle.
// Handle 0 on both sides is the connection's signal slot.
type ConnState struct{ p *C.ibConnState }

// NewConnState builds the state engConn.transport points to.
func NewConnState(q *verbs.QP, local []*verbs.MR, remote []verbs.MRInfo) (*ConnState, error) {
	if q == nil || q.CQP() == nil || len(local) == 0 || len(remote) == 0 {
		return nil, status.Errorf(status.InvalidUsage, "IB connection state needs a QP and at least the signal slot on both sides")
	}
	p := (*C.ibConnState)(C.calloc(1, C.sizeof_ibConnState))
	p.qp = (*C.ibQp)(q.CQP())
	p.nLocal = C.int(len(local))
	p.localMr = C.ibMrArray(C.int(len(local)))
	for i, m := range local {
		if m == nil || m.CMR() == nil {
			C.ibConnStateFree(p)
			return nil, status.Errorf(status.InvalidUsage, "IB connection state: local handle %d has no memory region", i)
		}
		C.ibMrArraySet(p.localMr, C.int(i), m.CMR())
	}
	p.nRemote = C.int(len(remote))
	p.remote = C.ibRemoteArray(C.int(len(remote)))
	for i, r := range remote {
		C.ibRemoteSet(p.remote, C.int(i), C.uint64_t(r.Addr), C.uint64_t(r.Size), C.uint32_t(r.Rkey))
	}
	return &ConnState{p: p}, nil
}

// Ptr is the value for engConn.transport.
func (s *ConnState) Ptr() unsafe.Pointer { return unsafe.Pointer(s.p) }

// Free releases the state (after the connection is closed).
func (s *ConnState) Free() {
	C.ibConnStateFree(s.p)
	s.p = nil
}

// EngOps is &ibEngOps, the engOps table of the IB transport (a const engOps*).
func EngOps() unsafe.Pointer { return unsafe.Pointer(C.ibOpsTable()) }

// CudaEngOps is &ibCudaEngOps, the table of IB connections served by a CUDA-mode proxy.
func CudaEngOps() unsafe.Pointer { return unsafe.Pointer(C.ibCudaOpsTable()) }
