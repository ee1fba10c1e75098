// Package engine wraps the C host data path: device-connection tables, proxy
// contexts with their trigger FIFOs, per-connection registrations, and the
// proxy thread (engine.h says why those are in C).
package engine

/*
#cgo CFLAGS: -O2 -Wall
#include <stdlib.h>
#include <string.h>
#include "engine.h"

#include <sys/mman.h>
// Device-connection arrays live in mappings of their own that are never unmapped (see NewDevConns).
static void* engMapDevConns(size_t bytes) {
	void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}
// Zeroes a retired array and returns its pages to the kernel; the addresses stay mapped (reading zeros).
static void engRetireDevConns(void* p, size_t bytes) {
	memset(p, 0, bytes);
	madvise(p, bytes, MADV_DONTNEED);
}
// A device address as a pointer: never dereferenced on the host, only stored where the ABI wants a pointer.
static void* engDevPtr(uint64_t a) { return (void*)(uintptr_t)a; }
*/
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// MaxConns is the most connections a communicator can hold (every connId a trigger can carry).
const MaxConns = C.ENG_MAX_CONNS

// EpochBytes is sizeof(mscclppDevConnSignalEpochId): a connection's signal epochs (its handle 0).
const EpochBytes = C.sizeof_struct_mscclppDevConnSignalEpochId

// DevConnSize is sizeof(mscclppDevConn_t).
const DevConnSize = C.sizeof_struct_mscclppDevConn

// Backoff holds the polling knobs: spins, then yields, then sleeps doubling up to SleepMaxUs.
type Backoff struct{ Spin, Yields, SleepMaxUs uint32 }

// Comm is a communicator's engine state: its asynchronous error slot and back-off knobs.
type Comm struct{ p *C.engComm }

func (b Backoff) c() C.engBackoffCfg {
	return C.engBackoffCfg{spin: C.uint32_t(b.Spin), yields: C.uint32_t(b.Yields), sleepMaxUs: C.uint32_t(b.SleepMaxUs)}
}

// NewComm allocates the engine state of one communicator with its wait and proxy back-off.
func NewComm(rank int, wait, proxy Backoff) *Comm {
	return &Comm{p: C.engCommNew(C.int(rank), wait.c(), proxy.c())}
}

// SetProxyBackoff sets the idle policy of the communicator's proxy threads, those running included.
func (c *Comm) SetProxyBackoff(b Backoff) { C.engCommSetProxyBackoff(c.p, b.c()) }

// SetMembarrier chooses how host calls hold proxy contexts, for the whole process: on,
// membarrier(2) where the kernel offers it; off, locked counters. It counts only before the
// first context is made.
func SetMembarrier(on bool) {
	v := C.int(0)
	if on {
		v = 1
	}
	C.engSetMembarrier(v)
}

// Ptr is the engComm's address, for a transport's C code.
func (c *Comm) Ptr() unsafe.Pointer { return unsafe.Pointer(c.p) }

// Free releases c; no context of c may be in use.
func (c *Comm) Free() { C.engCommFree(c.p); c.p = nil }

// DevConns is the C array of mscclppDevConn_t handed to applications.
type DevConns struct {
	p *C.struct_mscclppDevConn
	n int
}

// Arrays handed out are never unmapped nor reused: an application thread may still hold a
// mscclppDevConn pointer of a destroyed communicator, and must then find a zeroed entry (which
// every host method refuses with InvalidUsage), not unmapped memory and never an entry of a
// later communicator at the same address. Each array is a private anonymous mapping; Free
// zeroes it and hands its pages back to the kernel (MADV_DONTNEED), so a destroyed
// communicator keeps only address space, no memory.

// NewDevConns allocates a zeroed array of n device connections at addresses never used before.
func NewDevConns(n int) (DevConns, error) {
	p := C.engMapDevConns(C.size_t(n) * C.sizeof_struct_mscclppDevConn)
	if p == nil {
		return DevConns{}, status.Errorf(status.SystemError, "cannot map an array of %d device connections", n)
	}
	return DevConns{p: (*C.struct_mscclppDevConn)(p), n: n}, nil
}

// Free zeroes the array and releases its memory; its addresses stay readable (see NewDevConns).
func (d DevConns) Free() {
	C.engRetireDevConns(unsafe.Pointer(d.p), C.size_t(d.n)*C.sizeof_struct_mscclppDevConn)
}

// Ptr is the address of entry 0.
func (d DevConns) Ptr() unsafe.Pointer { return unsafe.Pointer(d.p) }

// At is the address of entry i.
func (d DevConns) At(i int) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(d.p), i*DevConnSize) }

func (d DevConns) at(i int) *C.struct_mscclppDevConn { return (*C.struct_mscclppDevConn)(d.At(i)) }

// SetIdentity fills remoteRank, tag, localBuff, the epoch pointers and fifo.connId of entry i.
func (d DevConns) SetIdentity(i, remoteRank, tag int, localBuff, localEpoch, waitEpoch unsafe.Pointer) {
	e := d.at(i)
	e.remoteRank = C.int(remoteRank)
	e.tag = C.int(tag)
	e.localBuff = localBuff
	e.localSignalEpochId = (*C.mscclppDevConnSignalEpochId)(localEpoch)
	e.waitEpochId = (*C.uint64_t)(waitEpoch)
	e.fifo.connId = C.int(i)
}

// LocalEpoch is entry i's localSignalEpochId (a device address in CUDA mode).
func (d DevConns) LocalEpoch(i int) unsafe.Pointer { return unsafe.Pointer(d.at(i).localSignalEpochId) }

// WaitEpoch is entry i's waitEpochId (a device address in CUDA mode).
func (d DevConns) WaitEpoch(i int) unsafe.Pointer { return unsafe.Pointer(d.at(i).waitEpochId) }

// SetRemote fills remoteSignalEpochId and remoteBuff of entry i.
func (d DevConns) SetRemote(i int, remoteEpoch, remoteBuff unsafe.Pointer) {
	e := d.at(i)
	e.remoteSignalEpochId = (*C.mscclppDevConnSignalEpochId)(remoteEpoch)
	e.remoteBuff = remoteBuff
}

// RemoteBuff is entry i's remoteBuff.
func (d DevConns) RemoteBuff(i int) unsafe.Pointer { return d.at(i).remoteBuff }

// Ctx is one proxy context: a trigger FIFO, its head and tail, the connections it serves, a proxy thread.
type Ctx struct{ p *C.engCtx }

var errTooManyCtxs = status.Errorf(status.SystemError, "more than %d live proxy contexts in this process: destroy communicators that are no longer used", C.ENG_MAX_CTXS)

// NewCtxOps allocates a proxy context of comm for a transport with its own ops table (a const
// engOps*) and per-context state, which the table's close op releases.
func NewCtxOps(comm *Comm, ops, transport unsafe.Pointer) (*Ctx, error) {
	p := C.engCtxNewOps(comm.p, (*C.engOps)(ops), transport)
	if p == nil {
		return nil, errTooManyCtxs
	}
	return &Ctx{p: p}, nil
}

// CtxSize is the number of bytes NewCtxAt needs.
const CtxSize = C.sizeof_engCtx

// NewCtxAt builds a proxy context in mem (CtxSize bytes the caller allocated, e.g. pinned host memory)
// for a transport with its own ops table and state; devHead, when non-zero, is the device address
// where initiators count their pushes.
func NewCtxAt(comm *Comm, mem, ops, transport unsafe.Pointer, devHead uint64) (*Ctx, error) {
	p := (*C.engCtx)(mem)
	if C.engCtxInit(p, comm.p, (*C.engOps)(ops)) != 0 {
		return nil, errTooManyCtxs
	}
	p.transport = transport
	if devHead != 0 {
		p.devHead = (*C.uint64_t)(C.engDevPtr(C.uint64_t(devHead)))
	}
	return &Ctx{p: p}, nil
}

// FifoPush is mscclppFifoPush on entry dev of a device-connection array (fifo.push on a host
// thread); PushFailed when it pushed nothing.
func FifoPush(dev unsafe.Pointer, typ, dstOff, srcOff, size uint64) uint64 {
	d := (*C.struct_mscclppDevConn)(dev)
	return uint64(C.mscclppFifoPush(&d.fifo, C.uint64_t(typ), C.uint64_t(dstOff), C.uint64_t(srcOff), C.uint64_t(size)))
}

// PushFailed is MSCCLPP_FIFO_PUSH_FAILED.
const PushFailed = ^uint64(0)

// FifoWaitServed is mscclppFifoWaitServed on entry dev (fifo.sync on a host thread): a result code.
func FifoWaitServed(dev unsafe.Pointer, seq uint64) status.Code {
	d := (*C.struct_mscclppDevConn)(dev)
	return status.Code(C.mscclppFifoWaitServed(&d.fifo, C.uint64_t(seq)))
}

// ConnWait is mscclppConnWait on entry dev (a bounded host wait): a result code.
func ConnWait(dev unsafe.Pointer, timeoutMs int64) status.Code {
	return status.Code(C.mscclppConnWait((*C.struct_mscclppDevConn)(dev), C.int64_t(timeoutMs)))
}

// ConnOp is mscclppConnOp on entry dev (a host put, signal or flush on handle 1): a result code.
func ConnOp(dev unsafe.Pointer, typ, dstOff, srcOff, size uint64) status.Code {
	return status.Code(C.mscclppConnOp((*C.struct_mscclppDevConn)(dev), C.uint64_t(typ), C.uint64_t(dstOff), C.uint64_t(srcOff), C.uint64_t(size)))
}

// ConnSignalOp is mscclppConnSignalOp on entry dev (what the host signal methods call): a result code.
func ConnSignalOp(dev unsafe.Pointer, typ, dstOff, srcOff, size uint64) status.Code {
	return status.Code(C.mscclppConnSignalOp((*C.struct_mscclppDevConn)(dev), C.uint64_t(typ), C.uint64_t(dstOff), C.uint64_t(srcOff), C.uint64_t(size)))
}

// ConnWaitNext is mscclppConnWaitNext on entry dev (wait() on a host thread, bounded): a result code.
func ConnWaitNext(dev unsafe.Pointer, timeoutMs int64) status.Code {
	return status.Code(C.mscclppConnWaitNext((*C.struct_mscclppDevConn)(dev), C.int64_t(timeoutMs)))
}

// Why WaitSeq returned.
const (
	SeqReached = C.ENG_SEQ_REACHED // the counter reached the value
	SeqTimeout = C.ENG_SEQ_TIMEOUT // the timeout passed
	SeqGone    = C.ENG_SEQ_GONE    // the publishing process is gone
	SeqRemote  = C.ENG_SEQ_REMOTE  // c recorded a remote error
)

// WaitSeq waits, as every host wait does (backoff.h, c's wait back-off), until *seq (in memory
// shared with process pid, which publishes it) reaches want, or timeout passes; it returns why
// it stopped (SeqReached ...).
// Once it would sleep, it sleeps on a futex on *seq, counted in *sleepers (the publisher's,
// see PublishSeq). A brief wait (one chunk round of a large collective) spins and yields only
// briefly before that.
func (c *Comm) WaitSeq(seq *uint64, want uint64, pid int, timeout time.Duration, sleepers *uint32, brief bool) int {
	b := C.int(0)
	if brief {
		b = 1
	}
	ms := timeout.Milliseconds()
	if ms < 0 {
		ms = 0
	}
	return int(C.engWaitSeq(c.p, (*C.uint64_t)(unsafe.Pointer(seq)), C.uint64_t(want), C.int(pid), C.int64_t(ms), (*C.uint32_t)(unsafe.Pointer(sleepers)), b))
}

// PublishSeq stores v into *seq (shared memory) and wakes the WaitSeq callers asleep on it,
// counted in *sleepers; with none asleep it makes no system call and no C call.
func PublishSeq(seq *uint64, v uint64, sleepers *uint32) {
	atomic.StoreUint64(seq, v) // sequentially consistent, as the load below
	if atomic.LoadUint32(sleepers) != 0 {
		C.engPublishSeq((*C.uint64_t)(unsafe.Pointer(seq)), C.uint64_t(v), (*C.uint32_t)(unsafe.Pointer(sleepers)))
	}
}

// DevPtr turns a device address into the pointer type the ABI's structs hold.
func DevPtr(a uint64) unsafe.Pointer { return C.engDevPtr(C.uint64_t(a)) }

// Free releases x; its proxy must be stopped.
func (x *Ctx) Free() { C.engCtxFree(x.p); x.p = nil }

// Close makes the context unreachable from application calls and waits until none is inside it.
func (x *Ctx) Close() { C.engCtxClose(x.p) }

// Invalidate closes a context built by NewCtxAt (its memory is the caller's to free).
func (x *Ctx) Invalidate() { C.engCtxClose(x.p); x.p = nil }

// AttachDevice points entry i of d at this context's FIFO, with head and tail in device memory.
func (x *Ctx) AttachDevice(d DevConns, i int, devHead, devTail uint64) {
	e := d.at(i)
	e.fifo.triggerFifo = &x.p.fifo[0]
	e.fifo.triggerFifoHead = (*C.uint64_t)(C.engDevPtr(C.uint64_t(devHead)))
	e.fifo.triggerFifoTail = (*C.uint64_t)(C.engDevPtr(C.uint64_t(devTail)))
}

// Attach points entry i of d at this context's FIFO.
func (x *Ctx) Attach(d DevConns, i int) {
	e := d.at(i)
	e.fifo.triggerFifo = &x.p.fifo[0]
	e.fifo.triggerFifoHead = &x.p.head
	e.fifo.triggerFifoTail = &x.p.tail
}

// Start launches the proxy thread.
func (x *Ctx) Start() error {
	switch C.engProxyStart(x.p) {
	case C.mscclppSuccess:
		return nil
	case C.mscclppInvalidUsage:
		return status.Errorf(status.InvalidUsage, "proxy already running")
	default:
		return status.Errorf(status.SystemError, "cannot start the proxy thread")
	}
}

// Stop drains the FIFO, then stops and joins the proxy thread (no-op when not running).
func (x *Ctx) Stop() { C.engProxyStop(x.p) }

// EnteredByThisThread reports whether a host data-path call of the calling OS thread is inside x
// (a destroy from a signal handler that interrupted mscclppConnWait would wait for itself). The
// caller must be locked to its thread (a cgo callback is).
func (x *Ctx) EnteredByThisThread() bool {
	return x.p != nil && C.engThreadInside() == unsafe.Pointer(x.p)
}

// MarkClosing makes the transports' sends in progress on the context and host waits give up
// at once: the destroy of its communicator, before the proxy stops.
func (x *Ctx) MarkClosing() { C.engCtxMarkClosing(x.p) }

// Abandon makes the transports' sends on the context give up instead of waiting for a peer
// (on), or wait again (off): mscclppProxyStop after a reported failure.
func (x *Ctx) Abandon(on bool) {
	v := C.int(0)
	if on {
		v = 1
	}
	C.engCtxAbandon(x.p, v)
}

// Running reports whether the proxy thread runs.
func (x *Ctx) Running() bool { return x.p.running != 0 }

// Served is the number of triggers the proxy has served.
func (x *Ctx) Served() uint64 { return uint64(x.p.served) }

// Reg describes one registration as seen from this process.
type Reg struct {
	Mapped unsafe.Pointer // directly addressable here, or nil
	Addr   uint64         // the address in the owner process
	Size   uint64
	Pid    int    // the owner process
	Pidfd  int    // a pidfd of that very process, or 0 (sysinfo.Proc)
	Key    uint32 // the transport's remote key of the registration, or 0
}

// Conn is a connection's engine state.
type Conn struct{ p *C.engConn }

// NewConn creates the engine state of connection connID (entry connID of d) and registers it with x.
func (x *Ctx) NewConn(comm *Comm, d DevConns, connID, peerRank, tag int) *Conn {
	c := (*C.engConn)(C.engCallocLines(C.sizeof_engConn))
	c.connId = C.int(connID)
	c.peerRank = C.int(peerRank)
	c.tag = C.int(tag)
	c.dev = d.at(connID)
	c.comm = comm.p
	c.ops = x.p.ops
	c.transport = x.p.transport
	c.ctx = x.p
	x.p.conns[connID] = c
	return &Conn{p: c}
}

func regArray(regs []Reg) *C.engReg {
	if len(regs) == 0 {
		return nil
	}
	arr := (*C.engReg)(C.calloc(C.size_t(len(regs)), C.sizeof_engReg))
	s := unsafe.Slice(arr, len(regs))
	for i, r := range regs {
		fillReg(&s[i], r)
	}
	return arr
}

func fillReg(d *C.engReg, r Reg) {
	d.magic = C.ENG_REG_MAGIC
	d.mapped = (*C.char)(r.Mapped)
	d.addr = C.uint64_t(r.Addr)
	d.size = C.uint64_t(r.Size)
	d.pid = C.int(r.Pid)
	d.pidfd = C.int(r.Pidfd)
	d.key = C.uint32_t(r.Key)
}

// SetLocal installs my registrations (by handle).
func (c *Conn) SetLocal(regs []Reg) {
	C.free(unsafe.Pointer(c.p.local))
	c.p.local = regArray(regs)
	c.p.nLocal = C.int(len(regs))
}

// SetRemote installs the peer's registrations (by handle), where my signals go, and the peer's pid.
func (c *Conn) SetRemote(regs []Reg, remoteProxyEpoch unsafe.Pointer, peerPid int) {
	C.free(unsafe.Pointer(c.p.remote))
	c.p.remote = regArray(regs)
	c.p.nRemote = C.int(len(regs))
	c.p.remoteProxyEpoch = (*C.uint64_t)(remoteProxyEpoch)
	c.p.peerPid = C.int(peerPid)
}

// SetSleepers installs the sleeper counts of my epoch slot (waits sleep on it and count
// themselves there) and of the peer's slot I signal (signals wake its sleepers); nil: none.
func (c *Conn) SetSleepers(local, remote unsafe.Pointer) {
	c.p.localSleepers = (*C.uint32_t)(local)
	c.p.remoteSleepers = (*C.uint32_t)(remote)
}

// SetTransport sets c's own transport state (engConn.transport), for transports with per-connection state.
func (c *Conn) SetTransport(p unsafe.Pointer) { c.p.transport = p }

// SetOps gives c an ops table of its transport's other than its context's (a const engOps*,
// transport.h): for connections whose host waits need other hooks.
func (c *Conn) SetOps(ops unsafe.Pointer) { C.engConnSetOps(c.p, (*C.engOps)(ops)) }

// PeerRank is the rank at the other end of c.
func (c *Conn) PeerRank() int { return int(c.p.peerRank) }

// SetPeerPid sets the pid whose exit ends waits on c (0: none, e.g. a peer on another node),
// in place of any pidfd set before.
func (c *Conn) SetPeerPid(pid int) { c.p.peerPid, c.p.peerPidfd = C.int(pid), 0 }

// SetPeerPidfd sets a pidfd of the peer's very process (0: none): waits on c end when that
// process exits, even if another one has its pid by then.
func (c *Conn) SetPeerPidfd(fd int) { c.p.peerPidfd = C.int(fd) }

// Ptr is the engConn's address, for a transport's C code.
func (c *Conn) Ptr() unsafe.Pointer { return unsafe.Pointer(c.p) }

// FreeConn releases c and stops x serving it.
func (x *Ctx) FreeConn(c *Conn) {
	x.p.conns[c.p.connId] = nil
	C.free(unsafe.Pointer(c.p.local))
	C.free(unsafe.Pointer(c.p.remote))
	C.free(unsafe.Pointer(c.p))
	c.p = nil
}

// RegRecord is a registration kept in C memory, for handing to applications as an opaque pointer.
type RegRecord struct{ p *C.engReg }

// NewRegRecord copies r into C memory.
func NewRegRecord(r Reg) RegRecord {
	p := (*C.engReg)(C.calloc(1, C.sizeof_engReg))
	fillReg(p, r)
	return RegRecord{p: p}
}

// Ptr is the record's address.
func (r RegRecord) Ptr() unsafe.Pointer { return unsafe.Pointer(r.p) }

// Free invalidates and releases the record.
func (r RegRecord) Free() { r.p.magic = 0; C.free(unsafe.Pointer(r.p)) }

// Lookup returns the live record among recs whose address is p of a live record among recs.
func Lookup(recs []RegRecord, p unsafe.Pointer) (RegRecord, bool) {
	for _, r := range recs {
		if unsafe.Pointer(r.p) == p && r.p.magic == C.ENG_REG_MAGIC {
			return r, true
		}
	}
	return RegRecord{}, false
}

// Addr is the registration's address in its owner (a device address for device memory).
func (r RegRecord) Addr() uint64 { return uint64(r.p.addr) }

// Key is the transport's remote key of the registration.
func (r RegRecord) Key() uint32 { return uint32(r.p.key) }

// Size is the registered size.
func (r RegRecord) Size() uint64 { return uint64(r.p.size) }

// Write copies size bytes from src to offset off of the registration (memcpy or process_vm_writev).
func (r RegRecord) Write(comm *Comm, off uint64, src unsafe.Pointer, size uint64) error {
	if off > uint64(r.p.size) || size > uint64(r.p.size)-off {
		return status.Errorf(status.InvalidArgument, "write of %d bytes at offset %d exceeds the peer's registered %d bytes", size, off, uint64(r.p.size))
	}
	var buf [400]C.char
	rc := C.engWrite(comm.p, r.p, C.uint64_t(off), src, C.uint64_t(size), &buf[0], C.int(len(buf)))
	if rc != C.mscclppSuccess {
		return status.Errorf(status.Code(rc), "%s", C.GoString(&buf[0]))
	}
	return nil
}

// SetOpTimeout bounds how long a host push waits for room in a full FIFO (the bootstrap timeout:
// a proxy that serves nothing for that long will not); d <= 0: no bound.
func (c *Comm) SetOpTimeout(d time.Duration) {
	ms := int64(-1)
	if d > 0 {
		ms = d.Milliseconds()
	}
	c.p.opTimeoutMs = C.int64_t(ms)
}
