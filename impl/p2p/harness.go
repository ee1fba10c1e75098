//go:build mscclpp_testhooks

package p2p

// A harness for this package's tests (cgo cannot be used in _test.go files): engine objects
// around the P2P ops (p2p.c), on cuda's proxy state of the stand-in driver (cuda/testdata).

/*
#include <stdlib.h>
#include "p2p.h"
#include "../engine/testconn.h"

typedef struct harnessP2P {
  engComm* comm;
  engCtx* ctx;
  engConn conn;
  engReg local[2], remote[2];
  struct mscclppDevConn dev;
  mscclppDevConnSignalEpochId epoch;
  uint64_t waitEpoch;
  uint64_t remoteEpoch[2];
  // connection 1 of the context, where harnessAddConn made it
  engConn other;
  engReg otherLocal[2], otherRemote[2];
  struct mscclppDevConn otherDev;
  mscclppDevConnSignalEpochId otherEpoch;
  uint64_t otherWaitEpoch;
  uint64_t otherRemoteEpoch[2];
} harnessP2P;

static harnessP2P* harnessNew(void* state, uint64_t src, uint64_t srcSize, uint64_t dst, uint64_t dstSize)
{
  harnessP2P* t = (harnessP2P*)calloc(1, sizeof(*t));
  t->comm = engCommNew(0, (engBackoffCfg){4000, 2000, 1000}, (engBackoffCfg){1000, 100, 200});
  if (posix_memalign((void**)&t->ctx, 64, sizeof(engCtx)) != 0) return NULL;
  engCtxInit(t->ctx, t->comm, &p2pOps);
  t->ctx->transport = state;
  t->local[1] = (engReg){ENG_REG_MAGIC, NULL, src, srcSize, 0};
  t->remote[1] = (engReg){ENG_REG_MAGIC, NULL, dst, dstSize, 0};
  t->conn.connId = 0;
  t->conn.peerRank = 1;
  t->conn.tag = 7;
  t->conn.dev = &t->dev;
  t->conn.nLocal = 2;
  t->conn.local = t->local;
  t->conn.nRemote = 2;
  t->conn.remote = t->remote;
  t->conn.remoteProxyEpoch = &t->remoteEpoch[1];
  t->conn.comm = t->comm;
  t->conn.ops = t->ctx->ops;
  t->conn.transport = state;
  t->conn.ctx = t->ctx;
  t->ctx->conns[0] = &t->conn;
  t->dev.fifo.triggerFifo = &t->ctx->fifo[0];
  t->dev.fifo.triggerFifoTail = &t->ctx->tail;
  t->dev.fifo.triggerFifoHead = &t->ctx->head;
  t->dev.fifo.connId = 0;
  t->dev.remoteRank = 1;
  t->dev.tag = 7;
  t->dev.localSignalEpochId = &t->epoch;
  t->dev.waitEpochId = &t->waitEpoch;
  return t;
}

// Makes t->other connection 1 of t's context (rank 1, tag 7), its handle 1 src to dst.
static void harnessAddConn(harnessP2P* t, uint64_t src, uint64_t srcSize, uint64_t dst, uint64_t dstSize)
{
  t->otherLocal[1] = (engReg){ENG_REG_MAGIC, NULL, src, srcSize, 0};
  t->otherRemote[1] = (engReg){ENG_REG_MAGIC, NULL, dst, dstSize, 0};
  testConnAdd(t->ctx, &t->other, 1, 1, t->otherLocal, t->otherRemote, &t->otherDev, &t->otherEpoch, &t->otherWaitEpoch);
  t->other.tag = t->otherDev.tag = 7;
  t->otherDev.remoteRank = 1;
  t->other.remoteProxyEpoch = &t->otherRemoteEpoch[1];
  t->other.transport = t->conn.transport;
}

static int harnessOp(harnessP2P* t, uint64_t type, uint64_t dstH, uint64_t dstOff, uint64_t srcH, uint64_t srcOff,
                     uint64_t size)
{
  return engConnDo(&t->conn, type, dstH, dstOff, srcH, srcOff, size);
}

static uint64_t harnessPush(harnessP2P* t, uint64_t type, uint64_t dstOff, uint64_t srcOff, uint64_t size)
{
  if (type & mscclppFlag) t->epoch.device++;
  uint64_t seq = mscclppFifoPush(&t->dev.fifo, type, dstOff, srcOff, size);
  if (type & mscclppSync) mscclppFifoWaitServed(&t->dev.fifo, seq);
  return seq;
}

// What a GPU thread does to a FIFO slot: one word at a time, in the order the test picks.
static void harnessSlotWord(harnessP2P* t, uint64_t seq, int word, uint64_t v)
{
  __atomic_store_n(&t->ctx->fifo[seq % MSCCLPP_PROXY_FIFO_SIZE].value[word], v, __ATOMIC_RELEASE);
}
static int harnessSlotBusy(harnessP2P* t, uint64_t seq)
{
  return __atomic_load_n(&t->ctx->fifo[seq % MSCCLPP_PROXY_FIFO_SIZE].value[0], __ATOMIC_ACQUIRE) != 0;
}
static uint64_t harnessServed(harnessP2P* t) { return __atomic_load_n(&t->ctx->served, __ATOMIC_ACQUIRE); }
static uint64_t harnessTypelessSeen(harnessP2P* t) { return __atomic_load_n(&t->ctx->typelessSeen, __ATOMIC_ACQUIRE); }
static void harnessSetDevHead(harnessP2P* t, uint64_t p) { t->ctx->devHead = (uint64_t*)(uintptr_t)p; }
static void harnessProxyBackoff(harnessP2P* t, unsigned spin, unsigned yields, unsigned sleepMax)
{
  t->comm->proxyCfg = (engBackoffCfg){spin, yields, sleepMax};
}
static uintptr_t harnessStream(void* state, int tail)
{
  cudaProxyState* st = (cudaProxyState*)state;
  return (uintptr_t)(tail ? st->tailStream : st->stream);
}

static void harnessFree(harnessP2P* t)
{
  engProxyStop(t->ctx);
  engCtxFree(t->ctx);
  engCommFree(t->comm);
  free(t);
}
*/
import "C"

import (
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// harnessP2P is one P2P connection (rank 1, tag 7) on its own engine context, with handle 1 = src/dst.
type harnessP2P struct{ p *C.harnessP2P }

func newHarnessP2P(state unsafe.Pointer, src, srcSize, dst, dstSize uint64) harnessP2P {
	return harnessP2P{C.harnessNew(state, C.uint64_t(src), C.uint64_t(srcSize), C.uint64_t(dst), C.uint64_t(dstSize))}
}

// op runs the transport's op on the calling thread and returns its result code.
func (h harnessP2P) op(typ, dstH, dstOff, srcH, srcOff, size uint64) status.Code {
	return status.Code(C.harnessOp(h.p, C.uint64_t(typ), C.uint64_t(dstH), C.uint64_t(dstOff), C.uint64_t(srcH),
		C.uint64_t(srcOff), C.uint64_t(size)))
}

// push pushes a trigger as a device would (a Flag first increments the epoch); a Sync waits until it was served.
func (h harnessP2P) push(typ, dstOff, srcOff, size uint64) uint64 {
	return uint64(C.harnessPush(h.p, C.uint64_t(typ), C.uint64_t(dstOff), C.uint64_t(srcOff), C.uint64_t(size)))
}

func (h harnessP2P) commErr() (status.Code, string) {
	var buf [512]C.char
	code := C.errAsync(&h.p.comm.err, &buf[0], C.int(len(buf)))
	return status.Code(code), C.GoString(&buf[0])
}

func (h harnessP2P) start() error {
	if C.engProxyStart(h.p.ctx) != 0 {
		return status.Errorf(status.SystemError, "engProxyStart failed")
	}
	return nil
}

func (h harnessP2P) stop()        { C.engProxyStop(h.p.ctx) }
func (h harnessP2P) free()        { C.harnessFree(h.p) }
func (h harnessP2P) tail() uint64 { return uint64(h.p.ctx.tail) }
func (h harnessP2P) epochs() (uint64, uint64) {
	return uint64(h.p.epoch.device), uint64(h.p.remoteEpoch[1])
}
func (h harnessP2P) setEpoch(v uint64) { h.p.epoch.device = C.uint64_t(v) }
func (h harnessP2P) dropRemoteEpoch()  { h.p.conn.remoteProxyEpoch = nil }

// slotWord stores word (0 or 1) of FIFO slot seq as a GPU thread would.
func (h harnessP2P) slotWord(seq uint64, word int, v uint64) {
	C.harnessSlotWord(h.p, C.uint64_t(seq), C.int(word), C.uint64_t(v))
}

// slotBusy reports whether FIFO slot seq holds a trigger (word 0 non-zero).
func (h harnessP2P) slotBusy(seq uint64) bool { return C.harnessSlotBusy(h.p, C.uint64_t(seq)) != 0 }

// served is the number of triggers the proxy has served.
func (h harnessP2P) served() uint64 { return uint64(C.harnessServed(h.p)) }

// typelessSeen is how many times the proxy looked at a slot whose word 0 had arrived without its type.
func (h harnessP2P) typelessSeen() uint64 { return uint64(C.harnessTypelessSeen(h.p)) }

// setDevHead marks the context as CUDA mode: its FIFO head lives in device memory at p.
func (h harnessP2P) setDevHead(p uint64) { C.harnessSetDevHead(h.p, C.uint64_t(p)) }

// proxyBackoff sets the idle proxy's back-off knobs.
func (h harnessP2P) proxyBackoff(spin, yields, sleepMaxUs uint32) {
	C.harnessProxyBackoff(h.p, C.uint(spin), C.uint(yields), C.uint(sleepMaxUs))
}

// p2pStream returns the address of a proxy state's data stream (tail false) or tail stream.
func p2pStream(state unsafe.Pointer, tail bool) uintptr {
	t := 0
	if tail {
		t = 1
	}
	return uintptr(C.harnessStream(state, C.int(t)))
}

// TestAsOtherProcess makes this process's P2P registrations describe themselves as another
// process's (a nonce of their own), so that two ranks of one process take the CUDA IPC path.
func TestAsOtherProcess(on bool) { asOtherProcess.Store(on) }

// engConn is the connection's engConn, and peerEpoch the peer's proxy epoch word its signals
// land in (for the conformance suite).
func (h harnessP2P) engConn() unsafe.Pointer   { return unsafe.Pointer(&h.p.conn) }
func (h harnessP2P) peerEpoch() unsafe.Pointer { return unsafe.Pointer(&h.p.remoteEpoch[1]) }

// addConn makes a second P2P connection on the harness's context (connection 1, to rank 1, tag
// 7, handle 1 = src/dst) and returns its engConn and its peer's proxy epoch word.
func (h harnessP2P) addConn(src, srcSize, dst, dstSize uint64) (conn, peerEpoch unsafe.Pointer) {
	C.harnessAddConn(h.p, C.uint64_t(src), C.uint64_t(srcSize), C.uint64_t(dst), C.uint64_t(dstSize))
	return unsafe.Pointer(&h.p.other), unsafe.Pointer(&h.p.otherRemoteEpoch[1])
}
