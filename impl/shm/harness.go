//go:build mscclpp_testhooks

package shm

// A harness for this package's tests (cgo cannot be used in _test.go files): one SHM
// connection without an eager ring whose peer's buffer and epoch are memory of this process,
// mapped, as a peer's mscclppHostAlloc region and the node segment are.

/*
#include <stdlib.h>
#include "ring.h"
#include "shm.h"
#include "testconn.h"

typedef struct shmHarness {
	engComm* comm;
	engCtx* ctx;
	engConn conn;
	struct mscclppDevConn dev;
	shmConn st;
	engReg local[2], remote[2];
	uint64_t peerEpoch[2];
	uint32_t peerSleepers;
	mscclppDevConnSignalEpochId epoch; // mine: where the peer's signals would land
	uint64_t waitEpoch;
} shmHarness;

static shmHarness* shmHarnessNew(void* src, void* dst, uint64_t size)
{
	shmHarness* h = (shmHarness*)calloc(1, sizeof(shmHarness));
	engBackoffCfg b = {.spin = 64, .yields = 64, .sleepMaxUs = 100};
	h->comm = engCommNew(0, b, b);
	h->ctx = engCtxNewOps(h->comm, &shmOps, NULL);
	h->local[1] = (engReg){ENG_REG_MAGIC, (char*)src, (uint64_t)(uintptr_t)src, size, 0, 0};
	h->remote[1] = (engReg){ENG_REG_MAGIC, (char*)dst, (uint64_t)(uintptr_t)dst, size, 0, 0};
	engConn* c = &h->conn;
	testConnAdd(h->ctx, c, 0, 1, h->local, h->remote, &h->dev, &h->epoch, &h->waitEpoch);
	c->transport = &h->st;
	c->remoteProxyEpoch = &h->peerEpoch[1];
	c->remoteSleepers = &h->peerSleepers;
	return h;
}

static void shmHarnessFree(shmHarness* h)
{
	engCtxFree(h->ctx);
	engCommFree(h->comm);
	free(h);
}
*/
import "C"

import "unsafe"

// testConn is the harness's connection: its engConn, and the peer's epoch word.
type testConn struct {
	h        *C.shmHarness
	src, dst unsafe.Pointer
}

func newTestConn(size uint64) testConn {
	src, dst := C.calloc(1, C.size_t(size)), C.calloc(1, C.size_t(size))
	return testConn{h: C.shmHarnessNew(src, dst, C.uint64_t(size)), src: src, dst: dst}
}

func (t testConn) conn() unsafe.Pointer      { return unsafe.Pointer(&t.h.conn) }
func (t testConn) peerEpoch() unsafe.Pointer { return unsafe.Pointer(&t.h.peerEpoch[1]) }

func (t testConn) free() {
	C.shmHarnessFree(t.h)
	C.free(t.src)
	C.free(t.dst)
}
