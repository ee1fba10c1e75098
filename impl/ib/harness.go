//go:build mscclpp_testhooks

package ib

// A harness for this package's tests (cgo cannot be used in _test.go
// files): drives ibEngOps on an engConn built here, as the engine would.

/*
#include <stdlib.h>
#include <string.h>
#include "ops.h"

// cuda: a CUDA-mode proxy's state (cuda/calls.h) for the context (ibCudaEngOps), or NULL (host mode).
static engConn* ibTestConn(ibConnState* st, uint64_t la, uint64_t ls, uint64_t ra, uint64_t rs,
                           uint64_t lsig, uint64_t rsig, void* cuda) {
	engConn* c = calloc(1, sizeof(engConn));
	c->comm = engCommNew(0, (engBackoffCfg){4000, 2000, 1000}, (engBackoffCfg){1000, 100, 200});
	c->peerRank = 1;
	c->nLocal = 2;
	c->local = calloc(2, sizeof(engReg));
	c->nRemote = 2;
	c->remote = calloc(2, sizeof(engReg));
	engReg l0 = {ENG_REG_MAGIC, (char*)(uintptr_t)lsig, lsig, 16, 0};
	engReg l1 = {ENG_REG_MAGIC, (char*)(uintptr_t)la, la, ls, 0};
	engReg r0 = {ENG_REG_MAGIC, NULL, rsig, 16, 0};
	engReg r1 = {ENG_REG_MAGIC, NULL, ra, rs, 0};
	c->local[0] = l0; c->local[1] = l1; c->remote[0] = r0; c->remote[1] = r1;
	c->ctx = engCtxNewOps(c->comm, cuda != NULL ? &ibCudaEngOps : &ibEngOps, cuda);
	c->ops = c->ctx->ops;
	c->ctx->conns[0] = c;
	c->transport = st;
	return c;
}
static int ibTestOp(engConn* c, uint64_t t, uint64_t d, uint64_t dOff, uint64_t s, uint64_t sOff, uint64_t n) {
	return engConnDo(c, t, d, dOff, s, sOff, n);
}
static int ibTestErr(engConn* c, char* buf, int len) { return errAsync(&c->comm->err, buf, len); }
static void ibTestConnFree(engConn* c) { engCtxFree(c->ctx); engCommFree(c->comm); free(c->local); free(c->remote); free(c); }
*/
import "C"

import (
	"unsafe"

	verbs "github.com/mscclpp-go/mscclpp/ib"
)

type testConn struct{ c *C.engConn }

func newTestConn(st *ConnState, local, remote []verbs.MRInfo) testConn {
	return newTestConnOn(st, local, remote, nil)
}

// newTestConnOn is newTestConn on a CUDA-mode proxy's context (cuda: its state, cuda.NewProxyState),
// or in host mode (nil).
func newTestConnOn(st *ConnState, local, remote []verbs.MRInfo, cuda unsafe.Pointer) testConn {
	return testConn{C.ibTestConn(st.p, C.uint64_t(local[1].Addr), C.uint64_t(local[1].Size), C.uint64_t(remote[1].Addr),
		C.uint64_t(remote[1].Size), C.uint64_t(local[0].Addr), C.uint64_t(remote[0].Addr), cuda)}
}

// op calls the ops table the way the proxy does; it returns the result code and the recorded error.
func (t testConn) op(typ, dst, dstOff, src, srcOff, size uint64) (int, string) {
	rc := C.ibTestOp(t.c, C.uint64_t(typ), C.uint64_t(dst), C.uint64_t(dstOff), C.uint64_t(src), C.uint64_t(srcOff), C.uint64_t(size))
	var buf [512]C.char
	C.ibTestErr(t.c, &buf[0], 512)
	return int(rc), C.GoString(&buf[0])
}

func (t testConn) free() { C.ibTestConnFree(t.c) }

// engConn is the connection's engConn (for the conformance suite).
func (t testConn) engConn() unsafe.Pointer { return unsafe.Pointer(t.c) }
