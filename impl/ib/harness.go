//go:build mscclpp_testhooks

package ib

// A harness for this package's tests (cgo cannot be used in _test.go
// files): drives ibEngOps on an engConn built here, as the engine would.

/*
#include <stdlib.h>
#include <string.h>
#include "heartbeat.h"
#include "ops.h"
#include "../engine/testconn.h"

// A test connection: its engConn first (the pointer the tests hold), its handles, and its device
// view wired for host waits (testConnAdd).
typedef struct ibTestConnT {
	engConn c;
	engReg local[2], remote[2];
	struct mscclppDevConn dev;
	mscclppDevConnSignalEpochId epoch;
	uint64_t waitEpoch;
	int ownsCtx;
} ibTestConnT;

// cuda: a CUDA-mode proxy's state (cuda/calls.h) for the context (ibCudaEngOps), or NULL (host mode).
// beside: NULL (connection 0 of a context of its own), or a test connection whose context this one
// joins as connection 1.
static engConn* ibTestConn(ibConnState* st, uint64_t la, uint64_t ls, uint64_t ra, uint64_t rs,
                           uint64_t lsig, uint64_t rsig, void* cuda, engConn* beside) {
	ibTestConnT* t = calloc(1, sizeof(ibTestConnT));
	engCtx* ctx = beside != NULL ? beside->ctx : NULL;
	if (ctx == NULL) {
		engComm* comm = engCommNew(0, (engBackoffCfg){4000, 2000, 1000}, (engBackoffCfg){1000, 100, 200});
		ctx = engCtxNewOps(comm, cuda != NULL ? &ibCudaEngOps : &ibEngOps, cuda);
		t->ownsCtx = 1;
	}
	t->local[0] = (engReg){ENG_REG_MAGIC, (char*)(uintptr_t)lsig, lsig, 16, 0};
	t->local[1] = (engReg){ENG_REG_MAGIC, (char*)(uintptr_t)la, la, ls, 0};
	t->remote[0] = (engReg){ENG_REG_MAGIC, NULL, rsig, 16, 0};
	t->remote[1] = (engReg){ENG_REG_MAGIC, NULL, ra, rs, 0};
	testConnAdd(ctx, &t->c, t->ownsCtx ? 0 : 1, 1, t->local, t->remote, &t->dev, &t->epoch, &t->waitEpoch);
	t->c.transport = st;
	return &t->c;
}
static int ibTestOp(engConn* c, uint64_t t, uint64_t d, uint64_t dOff, uint64_t s, uint64_t sOff, uint64_t n) {
	return engConnDo(c, t, d, dOff, s, sOff, n);
}
static int ibTestErr(engConn* c, char* buf, int len) { return errAsync(&c->comm->err, buf, len); }
static void ibTestConnFree(engConn* c) {
	ibTestConnT* t = (ibTestConnT*)c;
	if (t->ownsCtx) {
		engCtxFree(c->ctx);
		engCommFree(c->comm);
	} else {
		c->ctx->conns[c->connId] = NULL;
	}
	free(t);
}
*/
import "C"

import (
	"time"
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
	return newTestConnBeside(st, local, remote, cuda, testConn{})
}

// newTestConnBeside is newTestConnOn as connection 1 of beside's context (cuda unused), or as
// connection 0 of a context of its own where beside is the zero testConn.
func newTestConnBeside(st *ConnState, local, remote []verbs.MRInfo, cuda unsafe.Pointer, beside testConn) testConn {
	return testConn{C.ibTestConn(st.p, C.uint64_t(local[1].Addr), C.uint64_t(local[1].Size), C.uint64_t(remote[1].Addr),
		C.uint64_t(remote[1].Size), C.uint64_t(local[0].Addr), C.uint64_t(remote[0].Addr), cuda, beside.c)}
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

// testBeat is the heartbeat of a test connection over its QP q, run as transport.go runs it, and
// its peer's side over QP p as far as a destroy goes: its goodbye.
type testBeat struct {
	b          *beats
	mine, peer *beatSlot
	p          *verbs.QP
}

// newTestBeat starts the heartbeat of c over q (its peer silent for dead: unreachable); p is the
// peer's QP, which says the goodbye.
func newTestBeat(x *verbs.Context, c testConn, q, p *verbs.QP, dead time.Duration) (*testBeat, error) {
	mine, err := newBeatSlot(x)
	if err != nil {
		return nil, err
	}
	peer, err := newBeatSlot(x)
	if err != nil {
		mine.free()
		return nil, err
	}
	info := peer.mr.Info()
	bt := C.ibBeatNew(c.c, (*C.ibQp)(q.CQP()), (*C.uint64_t)(mine.mem), C.uint64_t(info.Addr), C.uint32_t(info.Rkey))
	tb := &testBeat{b: &beats{dead: dead, list: []*C.ibBeat{bt}}, mine: mine, peer: peer, p: p}
	tb.b.start()
	return tb, nil
}

// bye closes the peer's side as its destroy does (beats.close): its goodbye lands in c's slot.
func (tb *testBeat) bye() {
	info := tb.mine.mr.Info()
	bt := (*C.ibBeat)(C.calloc(1, C.sizeof_ibBeat))
	defer C.free(unsafe.Pointer(bt))
	bt.q, bt.raddr, bt.rkey = (*C.ibQp)(tb.p.CQP()), C.uint64_t(info.Addr), C.uint32_t(info.Rkey)
	C.ibBeatBye(bt, C.int(byeBound.Milliseconds()))
}

// close stops the heartbeat (before the QPs close) and frees its slots.
func (tb *testBeat) close() {
	tb.b.close()
	tb.mine.free()
	tb.peer.free()
}
