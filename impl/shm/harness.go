//go:build mscclpp_testhooks

package shm

// A harness for this package's tests (cgo cannot be used in _test.go files): shmHarnessConns SHM
// connections without an eager ring on one context, whose peers' buffers and epochs are memory of
// this process, mapped, as a peer's mscclppHostAlloc region and the node segment are.

/*
#include <stdlib.h>
#include "ring.h"
#include "shm.h"
#include "../engine/testconn.h"

enum { shmHarnessConns = 2 };

typedef struct shmHarness {
	engComm* comm;
	engCtx* ctx;
	engConn conn[shmHarnessConns];
	struct mscclppDevConn dev[shmHarnessConns];
	shmConn st[shmHarnessConns];
	engReg local[shmHarnessConns][2], remote[shmHarnessConns][2];
	uint64_t peerEpoch[shmHarnessConns][2];
	uint32_t peerSleepers[shmHarnessConns];
	mscclppDevConnSignalEpochId epoch[shmHarnessConns]; // mine: where the peer's signals would land
	uint64_t waitEpoch[shmHarnessConns];
} shmHarness;

// Connection k goes from src[k] to dst[k], size bytes each.
static shmHarness* shmHarnessNew(void* src[shmHarnessConns], void* dst[shmHarnessConns], uint64_t size)
{
	shmHarness* h = (shmHarness*)calloc(1, sizeof(shmHarness));
	engBackoffCfg b = {.spin = 64, .yields = 64, .sleepMaxUs = 100};
	h->comm = engCommNew(0, b, b);
	h->ctx = engCtxNewOps(h->comm, &shmOps, NULL);
	for (int k = 0; k < shmHarnessConns; k++) {
		h->local[k][1] = (engReg){ENG_REG_MAGIC, (char*)src[k], (uint64_t)(uintptr_t)src[k], size, 0, 0};
		h->remote[k][1] = (engReg){ENG_REG_MAGIC, (char*)dst[k], (uint64_t)(uintptr_t)dst[k], size, 0, 0};
		engConn* c = &h->conn[k];
		testConnAdd(h->ctx, c, k, 1, h->local[k], h->remote[k], &h->dev[k], &h->epoch[k], &h->waitEpoch[k]);
		c->transport = &h->st[k];
		c->remoteProxyEpoch = &h->peerEpoch[k][1];
		c->remoteSleepers = &h->peerSleepers[k];
	}
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

// testConn is the harness: its connections' engConns, and their peers' buffers and epoch words.
type testConn struct {
	h        *C.shmHarness
	src, dst [C.shmHarnessConns]unsafe.Pointer
}

func newTestConn(size uint64) testConn {
	t := testConn{}
	for k := range t.src {
		t.src[k], t.dst[k] = C.calloc(1, C.size_t(size)), C.calloc(1, C.size_t(size))
	}
	t.h = C.shmHarnessNew(&t.src[0], &t.dst[0], C.uint64_t(size))
	return t
}

func (t testConn) conn(k int) unsafe.Pointer      { return unsafe.Pointer(&t.h.conn[k]) }
func (t testConn) peerEpoch(k int) unsafe.Pointer { return unsafe.Pointer(&t.h.peerEpoch[k][1]) }

func (t testConn) free() {
	C.shmHarnessFree(t.h)
	for k := range t.src {
		C.free(t.src[k])
		C.free(t.dst[k])
	}
}
