//go:build mscclpp_testhooks

package eth

// A harness for this package's tests (cgo cannot be used in _test.go files): two ranks' sides
// of ethHarnessConns Ethernet connections in this process, each side a context of its own
// (ethOps, host mode) whose connection k is joined to the other side's connection k by a TCP
// socket over 127.0.0.1, with a receive thread per side, as eth.go's join wires them.

/*
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "eth.h"
#include "../engine/engine.h"
#include "../engine/testconn.h"

enum { ethHarnessConns = 2 };

typedef struct ethHarnessSide {
	engComm* comm;
	engCtx* ctx;
	engConn conn[ethHarnessConns];
	struct mscclppDevConn dev[ethHarnessConns];
	engReg local[ethHarnessConns][2], remote[ethHarnessConns][2];
	mscclppDevConnSignalEpochId epoch[ethHarnessConns];
	uint64_t waitEpoch[ethHarnessConns];
	uint32_t sleepers[ethHarnessConns];
} ethHarnessSide;

typedef struct ethHarness {
	ethHarnessSide side[2];
} ethHarness;

// A connected pair of TCP sockets over 127.0.0.1: 0, or -1.
static int ethHarnessPair(int fds[2])
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t n = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (l < 0) return -1;
	if (bind(l, (struct sockaddr*)&a, n) != 0 || listen(l, 1) != 0 || getsockname(l, (struct sockaddr*)&a, &n) != 0 ||
	    (fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		close(l);
		return -1;
	}
	if (connect(fds[0], (struct sockaddr*)&a, n) != 0 || (fds[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0) {
		close(fds[0]);
		close(l);
		return -1;
	}
	close(l);
	setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

// Side r's buffers of connection k are bufs[r][k] (size bytes each); peers declared unreachable
// after deadMs of silence. NULL when a socket or a receive thread could not be made.
// cuda non-NULL: side 0 is in CUDA mode (a CUDA-mode proxy's state), its buffers device memory at
// devBufs[k], staged through stages[k][0] (send) and [1] (receive), stageBytes each.
static ethHarness* ethHarnessNew(void* bufs[2][ethHarnessConns], uint64_t size, int64_t deadMs, void* cuda,
                                 uint64_t devBufs[ethHarnessConns], void* stages[ethHarnessConns][2], uint64_t stageBytes)
{
	ethHarness* h = (ethHarness*)calloc(1, sizeof(ethHarness));
	engBackoffCfg b = {.spin = 64, .yields = 64, .sleepMaxUs = 100};
	for (int r = 0; r < 2; r++) {
		ethHarnessSide* s = &h->side[r];
		s->comm = engCommNew(r, b, b);
		int dev = r == 0 && cuda != NULL;
		s->ctx = engCtxNewOps(s->comm, &ethOps, ethCtxNew(dev ? (struct cudaProxyState*)cuda : NULL));
		for (int k = 0; k < ethHarnessConns; k++) {
			s->local[k][0] = (engReg){ENG_REG_MAGIC, (char*)&s->epoch[k], (uint64_t)(uintptr_t)&s->epoch[k], 16, 0, 0};
			s->local[k][1] = dev ? (engReg){ENG_REG_MAGIC, NULL, devBufs[k], size, 0, 0}
			                     : (engReg){ENG_REG_MAGIC, (char*)bufs[r][k], (uint64_t)(uintptr_t)bufs[r][k], size, 0, 0};
			s->remote[k][0] = (engReg){ENG_REG_MAGIC, NULL, 0, 16, 0, 0};
			s->remote[k][1] = (engReg){ENG_REG_MAGIC, NULL, 0, size, 0, 0};
			testConnAdd(s->ctx, &s->conn[k], k, 1 - r, s->local[k], s->remote[k], &s->dev[k], &s->epoch[k], &s->waitEpoch[k]);
			s->conn[k].localSleepers = &s->sleepers[k];
		}
	}
	for (int k = 0; k < ethHarnessConns; k++) {
		int fds[2];
		if (ethHarnessPair(fds) != 0) return h;
		for (int r = 0; r < 2; r++)
		{
			int dev = r == 0 && cuda != NULL;
			if (ethConnStart(&h->side[r].conn[k], fds[r], dev ? stages[k][0] : NULL, dev ? stages[k][1] : NULL,
			                 dev ? stageBytes : 0, deadMs) != mscclppSuccess)
				close(fds[r]);
		}
	}
	return h;
}

// Whether every connection of both sides started.
static int ethHarnessStarted(ethHarness* h)
{
	for (int r = 0; r < 2; r++)
		for (int k = 0; k < ethHarnessConns; k++)
			if (connState(&h->side[r].conn[k]) == NULL) return 0;
	return 1;
}

// Side r closes its side of connection k, as a destroy does (a goodbye, then the socket's end).
static void ethHarnessClose(ethHarness* h, int r, int k) { ethAbortConn(connState(&h->side[r].conn[k])); }

// Side 0 loses connection k's socket under it: its sends fail from then on.
static void ethHarnessBreak(ethHarness* h, int k) { shutdown(connState(&h->side[0].conn[k])->fd, SHUT_RDWR); }

// Side 1's socket of connection k ends without a goodbye (as a crashed peer's does) while side 0
// watches its connection's peerClosed, for at most 5 s: the code side 0's communicator held as
// its asynchronous error when the flag appeared (mscclppSuccess: the flag came first), or -1
// when it never appeared.
static int ethHarnessCrashSeen(ethHarness* h, int k)
{
	engConn* c = &h->side[0].conn[k];
	shutdown(connState(&h->side[1].conn[k])->fd, SHUT_RDWR);
	uint64_t end = engNowNs() + 5000000000ull;
	while (!__atomic_load_n(&c->peerClosed, __ATOMIC_ACQUIRE))
		if (engNowNs() > end) return -1;
	return errAsyncCode(&h->side[0].comm->err);
}

// Side r signals connection k once (the engine's path, as a host call does): 0, or the result code.
static int ethHarnessSignal(ethHarness* h, int r, int k)
{
	return engConnDoCall(&h->side[r].conn[k], mscclppFlag, 0, 0, 0, 0, 0);
}

// Whether side r's connection k was marked failed (a send failed, or its peer declared unreachable).
static int ethHarnessFailed(ethHarness* h, int r, int k)
{
	return engConnFailed(h->side[r].comm, h->side[r].conn[k].connId);
}

static void ethHarnessFree(ethHarness* h)
{
	for (int r = 0; r < 2; r++) {
		engCtxFree(h->side[r].ctx);
		engCommFree(h->side[r].comm);
	}
	free(h);
}
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// testPair is the harness: both sides of the connections and their buffers.
type testPair struct {
	h      *C.ethHarness
	bufs   [2][C.ethHarnessConns]unsafe.Pointer
	fake   *conform.FakeCUDA         // side 0 in CUDA mode on the stand-in driver, or nil
	src    [C.ethHarnessConns]uint64 // side 0's device buffers (CUDA mode)
	stages []unsafe.Pointer          // their pinned staging buffers
}

// newTestPair makes the two sides with buffers of size bytes; side 0 in CUDA mode on fake (its
// buffers device memory) where fake is not nil. Nil when a connection could not start.
func newTestPair(size uint64, deadMs int64, fake *conform.FakeCUDA) (*testPair, error) {
	p := &testPair{fake: fake}
	var cb [2][C.ethHarnessConns]unsafe.Pointer
	var stages [C.ethHarnessConns][2]unsafe.Pointer
	var state unsafe.Pointer
	var devBufs [C.ethHarnessConns]C.uint64_t
	for r := range p.bufs {
		for k := range p.bufs[r] {
			p.bufs[r][k] = C.calloc(1, C.size_t(size))
			cb[r][k] = p.bufs[r][k]
		}
	}
	if fake != nil {
		state = fake.State
		for k := range p.src {
			var err error
			if p.src[k], err = fake.Dev.MemAlloc(size); err != nil {
				return nil, err
			}
			devBufs[k] = C.uint64_t(p.src[k])
			for i := range stages[k] {
				if stages[k][i], err = fake.Dev.HostAlloc(StageBytes); err != nil {
					return nil, err
				}
				p.stages = append(p.stages, stages[k][i])
			}
		}
	}
	p.h = C.ethHarnessNew(&cb[0], C.uint64_t(size), C.int64_t(deadMs), state, &devBufs[0], &stages[0], C.uint64_t(StageBytes))
	if C.ethHarnessStarted(p.h) == 0 {
		p.free()
		return nil, errors.New("the harness's connections did not start")
	}
	return p, nil
}

// conn is side 0's connection k as the conformance suite drives it (rank 0 sends, rank 1's
// receive thread lands the data and the counts).
func (p *testPair) conn(k int, size uint64) *conform.Conn {
	src, dst := p.bufs[0][k], p.bufs[1][k]
	epoch := unsafe.Pointer(&p.h.side[1].epoch[k].proxy)
	return &conform.Conn{
		C:           unsafe.Pointer(&p.h.side[0].conn[k]),
		Size:        size,
		Epoch:       func() uint64 { return conform.Word(epoch) },
		SetSrc:      func(off uint64, b []byte) { copy(unsafe.Slice((*byte)(unsafe.Add(src, off)), len(b)), b) },
		DstWord:     func(off uint64) uint64 { return conform.Word(unsafe.Add(dst, off)) },
		HostSignals: true,
		Waits:       true,
		ClosePeer:   func() { C.ethHarnessClose(p.h, 1, C.int(k)) },
		Break:       func() { C.ethHarnessBreak(p.h, C.int(k)) },
	}
}

// cudaConn is conn in CUDA mode: the source is device memory, only the proxy signals, and the
// connection takes no host waits (its epoch is device memory).
func (p *testPair) cudaConn(k int, size uint64) *conform.Conn {
	c := p.conn(k, size)
	dev := p.src[k]
	c.SetSrc = func(off uint64, b []byte) { p.fake.Write(dev+off, b) }
	c.HostSignals, c.Waits, c.ClosePeer = false, false, nil
	c.NoPeerClose = "a CUDA-mode connection takes no host waits"
	return c
}

// signal: side r signals its connection k once; the result code.
func (p *testPair) signal(r, k int) int { return int(C.ethHarnessSignal(p.h, C.int(r), C.int(k))) }

// crashSeen: side 1's connection k ends without a goodbye; side 0's asynchronous error code at
// the moment its connection's peerClosed appeared (-1: it never did).
func (p *testPair) crashSeen(k int) int { return int(C.ethHarnessCrashSeen(p.h, C.int(k))) }

// failed: whether side r's connection k was marked failed.
func (p *testPair) failed(r, k int) bool { return C.ethHarnessFailed(p.h, C.int(r), C.int(k)) != 0 }

// epoch: side r's epoch of connection k, the count of the peer's signals that arrived.
func (p *testPair) epoch(r, k int) uint64 {
	return conform.Word(unsafe.Pointer(&p.h.side[r].epoch[k].proxy))
}

func (p *testPair) free() {
	C.ethHarnessFree(p.h) // joins the receive threads, which use the staging buffers
	if p.fake != nil {
		for _, st := range p.stages {
			p.fake.Dev.HostFree(st)
		}
		for _, d := range p.src {
			p.fake.Dev.MemFree(d)
		}
	}
	for r := range p.bufs {
		for k := range p.bufs[r] {
			C.free(p.bufs[r][k])
		}
	}
}
