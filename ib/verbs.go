package ib

/*
#include <stdlib.h>
#include <string.h>
#include "ibcore.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

const errLen = 512

// The QPs' ACK timeout (4.096 us * 2^18: about 1 s) and retry count where Options leave them.
const DefaultAckTimeout, DefaultRetryCount = 18, 7

// Options of Open.
type Options struct {
	// Discovery maps interface names and PCI addresses to devices (nil: Sysfs).
	Discovery Discovery
	// GIDIndex is the GID table index (MSCCLPP_IB_GID_INDEX, ParseGIDIndex); negative: the
	// first RoCE v2 IPv4-mapped entry on RoCE (sysfs, as NCCL does), else 0.
	GIDIndex int
	// Port is the port to use (it must be ACTIVE); 0: the first ACTIVE one not in SkipPorts.
	Port int
	// SkipPorts has bit p set for each port p (1-63) not to use (MSCCLPP_IB_HCA's "^dev:port").
	SkipPorts uint64
	// ServiceLevel (0-15) goes into every QP's address; TrafficClass (0-255) into its GRH (RoCE).
	ServiceLevel, TrafficClass int
	// AckTimeout (1-31: 4.096 us * 2^n; 0: DefaultAckTimeout) and, where RetrySet,
	// RetryCount (0-7; else DefaultRetryCount) go into every QP's RTS.
	AckTimeout, RetryCount int
	RetrySet               bool
}

// Context is an open device: its verbs context, one PD, the first ACTIVE
// port and the GID at the chosen index. Its methods are safe for
// concurrent use; Close it after every QP, CQ and MR made from it.
type Context struct {
	mu  sync.Mutex
	c   *C.ibCtx
	lib *Lib
}

// Open resolves ibDev (ResolveDevice) and opens it.
func Open(lib *Lib, ibDev string, opt Options) (*Context, error) {
	name, err := ResolveDevice(lib, opt.Discovery, ibDev)
	if err != nil {
		return nil, err
	}
	gid := opt.GIDIndex
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [errLen]C.char
	if opt.ServiceLevel < 0 || opt.ServiceLevel > 15 || opt.TrafficClass < 0 || opt.TrafficClass > 255 || opt.Port < 0 {
		return nil, status.Errorf(status.InvalidArgument, "IB device %s: service level %d (0-15), traffic class %d (0-255), port %d", name, opt.ServiceLevel, opt.TrafficClass, opt.Port)
	}
	c := C.ibCtxOpen(lib.api, cname, C.int(gid), C.int(opt.Port), C.uint64_t(opt.SkipPorts), &msg[0], errLen)
	if c == nil {
		return nil, status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	c.sl, c.tc = C.uint8_t(opt.ServiceLevel), C.uint8_t(opt.TrafficClass)
	c.ackTimeout, c.retryCnt = C.uint8_t(DefaultAckTimeout), C.uint8_t(DefaultRetryCount)
	if opt.AckTimeout > 0 && opt.AckTimeout <= 31 {
		c.ackTimeout = C.uint8_t(opt.AckTimeout)
	}
	if opt.RetrySet && opt.RetryCount >= 0 && opt.RetryCount <= 7 {
		c.retryCnt = C.uint8_t(opt.RetryCount)
	}
	x := &Context{c: c, lib: lib}
	if gid < 0 { // unset: chosen from the port's GID table (gid.go)
		if err := x.pickGID(); err != nil {
			x.Close()
			return nil, err
		}
	}
	return x, nil
}

// Name is the verbs device name; Port the ACTIVE port in use.
func (x *Context) Name() string { return C.GoString(&x.c.name[0]) }

// Port is the port number in use (the first ACTIVE one).
func (x *Context) Port() int { return int(x.c.port) }

// RoCE reports an Ethernet link layer (addressing by GID rather than LID).
func (x *Context) RoCE() bool { return x.c.portAttr.link_layer == C.IBA_LINK_LAYER_ETHERNET }

// MaxQPWR is the device's max_qp_wr.
func (x *Context) MaxQPWR() int { return int(x.c.devAttr.max_qp_wr) }

// Close deallocates the PD and closes the device. Idempotent.
func (x *Context) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.c != nil {
		C.ibCtxClose(x.c)
		x.c = nil
	}
}

// MR is a registered memory region.
type MR struct {
	ctx  *Context
	mr   *C.struct_iba_mr
	addr uint64
	size uint64
}

// MRInfo is what a peer needs to write into an MR: exchanged through the bootstrap.
type MRInfo struct {
	Addr uint64
	Size uint64
	Rkey uint32
}

// MRInfoSize is the length of MRInfo.Marshal's output.
const MRInfoSize = 20

// Marshal encodes i in MRInfoSize bytes (little-endian).
func (i MRInfo) Marshal() []byte {
	b := make([]byte, MRInfoSize)
	binary.LittleEndian.PutUint64(b[0:], i.Addr)
	binary.LittleEndian.PutUint64(b[8:], i.Size)
	binary.LittleEndian.PutUint32(b[16:], i.Rkey)
	return b
}

// UnmarshalMRInfo decodes Marshal's output.
func UnmarshalMRInfo(b []byte) (MRInfo, error) {
	if len(b) != MRInfoSize {
		return MRInfo{}, status.Errorf(status.RemoteError, "IB memory region info of %d bytes, want %d", len(b), MRInfoSize)
	}
	return MRInfo{binary.LittleEndian.Uint64(b[0:]), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint32(b[16:])}, nil
}

// RegisterMR registers size bytes at addr (memory that is not Go's heap:
// C, mmap, or device memory) at full size, with local write, remote write
// and remote read access (no relaxed ordering).
func (x *Context) RegisterMR(addr uint64, size uint64) (*MR, error) {
	var msg [errLen]C.char
	mr := C.ibMrReg(x.c, C.uint64_t(addr), C.uint64_t(size), &msg[0], errLen)
	if mr == nil {
		return nil, status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return &MR{ctx: x, mr: mr, addr: addr, size: size}, nil
}

// Info is the MR as a peer sees it.
func (m *MR) Info() MRInfo { return MRInfo{Addr: m.addr, Size: m.size, Rkey: uint32(m.mr.rkey)} }

// Lkey is the local key.
func (m *MR) Lkey() uint32 { return uint32(m.mr.lkey) }

// CMR is the C struct iba_mr, for a C engine that posts writes from it (nil once closed).
func (m *MR) CMR() unsafe.Pointer { return unsafe.Pointer(m.mr) }

// Close deregisters the MR.
func (m *MR) Close() error {
	if m.mr == nil {
		return nil
	}
	var msg [errLen]C.char
	if C.ibMrDereg(m.ctx.c, m.mr, &msg[0], errLen) != 0 {
		return status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	m.mr = nil
	return nil
}

// CQ is a completion queue shared by the send queues of its QPs. Its
// entries bound the outstanding WRs of its QPs together: NewQP refuses a
// QP whose max_send_wr does not fit.
type CQ struct {
	ctx *Context
	cq  *C.ibCq
}

// NewCQ creates a CQ of entries completions.
func (x *Context) NewCQ(entries int) (*CQ, error) {
	var msg [errLen]C.char
	cq := C.ibCqCreate(x.c, C.int(entries), &msg[0], errLen)
	if cq == nil {
		return nil, status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return &CQ{ctx: x, cq: cq}, nil
}

// Poll polls once; error completions are recorded on their QPs (QP.Err).
// It returns the completions seen.
func (q *CQ) Poll() (int, error) {
	var msg [errLen]C.char
	n := C.ibPoll(q.cq, &msg[0], errLen)
	if n < 0 {
		return 0, status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return int(n), nil
}

// Close destroys the CQ (after its QPs).
func (q *CQ) Close() error {
	if q.cq == nil {
		return nil
	}
	var msg [errLen]C.char
	if C.ibCqDestroy(q.cq, &msg[0], errLen) != 0 {
		return status.Errorf(status.InternalError, "%s", cerr(&msg[0]))
	}
	q.cq = nil
	return nil
}

// QPInfo is what a peer needs to connect its QP to ours: exchanged through the bootstrap.
type QPInfo struct {
	LID       uint16
	Port      uint8
	LinkLayer uint8 // 1 InfiniBand, 2 Ethernet (RoCE)
	QPN       uint32
	GID       [16]byte
	MTU       uint32 // enum ibv_mtu
	PSN       uint32
}

// QPInfoSize is the length of QPInfo.Marshal's output.
const QPInfoSize = 36

const qpInfoMagic = 0x49425150 // "IBQP"

// Marshal encodes i in QPInfoSize bytes (little-endian, with a magic word).
func (i QPInfo) Marshal() []byte {
	b := make([]byte, QPInfoSize)
	binary.LittleEndian.PutUint32(b[0:], qpInfoMagic)
	binary.LittleEndian.PutUint16(b[4:], i.LID)
	b[6] = i.Port
	b[7] = i.LinkLayer
	binary.LittleEndian.PutUint32(b[8:], i.QPN)
	copy(b[12:28], i.GID[:])
	binary.LittleEndian.PutUint32(b[28:], i.MTU)
	binary.LittleEndian.PutUint32(b[32:], i.PSN)
	return b
}

// UnmarshalQPInfo decodes Marshal's output.
func UnmarshalQPInfo(b []byte) (QPInfo, error) {
	if len(b) != QPInfoSize || binary.LittleEndian.Uint32(b) != qpInfoMagic {
		return QPInfo{}, status.Errorf(status.RemoteError, "IB queue pair info of %d bytes is not one (want %d with its magic)", len(b), QPInfoSize)
	}
	var i QPInfo
	i.LID = binary.LittleEndian.Uint16(b[4:])
	i.Port = b[6]
	i.LinkLayer = b[7]
	i.QPN = binary.LittleEndian.Uint32(b[8:])
	copy(i.GID[:], b[12:28])
	i.MTU = binary.LittleEndian.Uint32(b[28:])
	i.PSN = binary.LittleEndian.Uint32(b[32:])
	return i, nil
}

// QP is an RC queue pair towards one peer.
type QP struct {
	ctx  *Context
	cq   *CQ
	qp   *C.ibQp
	peer string
}

// NewQP creates an RC QP on cq (RESET state) with maxSendWr outstanding
// WRs; peer names the other side in every message ("rank 3").
func (x *Context) NewQP(cq *CQ, maxSendWr int, peer string) (*QP, error) {
	if maxSendWr < 1 || maxSendWr > 1<<20 {
		return nil, status.Errorf(status.InvalidArgument, "IB QP with max_send_wr %d", maxSendWr)
	}
	cpeer := C.CString(peer)
	defer C.free(unsafe.Pointer(cpeer))
	var msg [errLen]C.char
	q := C.ibQpCreate(x.c, cq.cq, C.uint32_t(maxSendWr), cpeer, &msg[0], errLen)
	if q == nil {
		return nil, status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return &QP{ctx: x, cq: cq, qp: q, peer: peer}, nil
}

// Info is what the peer needs to connect to this QP.
func (q *QP) Info() QPInfo {
	var ci C.ibQpInfo
	C.ibQpLocalInfo(q.qp, &ci)
	i := QPInfo{LID: uint16(ci.lid), Port: uint8(ci.port), LinkLayer: uint8(ci.linkLayer), QPN: uint32(ci.qpn),
		MTU: uint32(ci.mtu), PSN: uint32(ci.psn)}
	for k := range i.GID {
		i.GID[k] = byte(ci.gid[k])
	}
	return i
}

// Init moves the QP from RESET to INIT.
func (q *QP) Init() error {
	var msg [errLen]C.char
	if C.ibQpInit(q.qp, &msg[0], errLen) != 0 {
		return status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return nil
}

// RTR moves the QP from INIT to RTR towards the peer's QP.
func (q *QP) RTR(remote QPInfo) error {
	var ci C.ibQpInfo
	ci.lid = C.uint16_t(remote.LID)
	ci.port = C.uint8_t(remote.Port)
	ci.linkLayer = C.uint8_t(remote.LinkLayer)
	ci.qpn = C.uint32_t(remote.QPN)
	for k := range remote.GID {
		ci.gid[k] = C.uint8_t(remote.GID[k])
	}
	ci.mtu = C.uint32_t(remote.MTU)
	ci.psn = C.uint32_t(remote.PSN)
	var msg [errLen]C.char
	if C.ibQpRtr(q.qp, &ci, &msg[0], errLen) != 0 {
		return status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return nil
}

// RTS moves the QP from RTR to RTS.
func (q *QP) RTS() error {
	var msg [errLen]C.char
	if C.ibQpRts(q.qp, &msg[0], errLen) != 0 {
		return status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return nil
}

// Connect is Init, RTR(remote), RTS.
func (q *QP) Connect(remote QPInfo) error {
	if remote.LinkLayer != 0 && uint8(q.ctx.c.portAttr.link_layer) != remote.LinkLayer {
		return status.Errorf(status.InvalidUsage, "IB QP to %s: link layers differ (local %d, remote %d): InfiniBand and RoCE do not mix",
			q.peer, q.ctx.c.portAttr.link_layer, remote.LinkLayer)
	}
	if err := q.Init(); err != nil {
		return err
	}
	if err := q.RTR(remote); err != nil {
		return err
	}
	return q.RTS()
}

func (q *QP) fail(what string) error {
	why := C.ibQpError(q.qp)
	msg := "failed"
	if why != nil {
		msg = C.GoString(why)
	}
	code := status.SystemError
	if C.ibQpFailed(q.qp) != 0 {
		code = status.RemoteError
	}
	return status.Errorf(code, "IB %s: %s", what, msg)
}

// Write RDMA-writes size bytes at loff of mr to remote at roff (offsets
// are honoured; bounds are the responder's to check, as on hardware).
// signaled asks for a completion (one is also requested every
// max_send_wr/2 WRs).
func (q *QP) Write(mr *MR, loff uint64, remote MRInfo, roff uint64, size uint64, signaled bool) error {
	s := C.int(0)
	if signaled {
		s = 1
	}
	if C.ibWrite(q.qp, mr.mr, C.uint64_t(loff), C.uint64_t(remote.Addr), C.uint32_t(remote.Rkey), C.uint64_t(roff),
		C.uint64_t(size), s) != 0 {
		return q.fail("write")
	}
	return nil
}

// WriteSignal RDMA-writes the 8-byte value to remote at roff after every earlier WR of the QP.
func (q *QP) WriteSignal(value uint64, remote MRInfo, roff uint64, signaled bool) error {
	s := C.int(0)
	if signaled {
		s = 1
	}
	if C.ibWriteSignal(q.qp, C.uint64_t(value), C.uint64_t(remote.Addr+roff), C.uint32_t(remote.Rkey), s) != 0 {
		return q.fail("signal")
	}
	return nil
}

// Flush waits until every posted WR completed (timeout <= 0: no limit).
func (q *QP) Flush(timeout time.Duration) error {
	if C.ibFlush(q.qp, C.int(timeout.Milliseconds())) != 0 {
		return q.fail("flush")
	}
	return nil
}

// Abandon makes every wait of the QP for room or completions give up at once (on), or wait
// again (off): a communicator being destroyed waits for no peer.
func (q *QP) Abandon(on bool) {
	if q == nil || q.qp == nil {
		return
	}
	v := C.int(0)
	if on {
		v = 1
	}
	C.ibQpAbandon(q.qp, v)
}

// Posted and Completed count WRs (Completed == Posted after a Flush).
func (q *QP) Posted() uint64 { return uint64(C.ibQpPosted(q.qp)) }

// Completed is the number of WRs known complete.
func (q *QP) Completed() uint64 { return uint64(C.ibQpCompleted(q.qp)) }

// Err is the QP's error (an error completion, naming the peer), or nil.
func (q *QP) Err() error {
	if C.ibQpFailed(q.qp) == 0 {
		return nil
	}
	return q.fail("QP")
}

// CQP is the C ibQp, for a C engine that calls ibWrite/ibWriteSignal/ibFlush directly.
func (q *QP) CQP() unsafe.Pointer { return unsafe.Pointer(q.qp) }

// Close destroys the QP.
func (q *QP) Close() error {
	if q.qp == nil {
		return nil
	}
	var msg [errLen]C.char
	if C.ibQpDestroy(q.qp, &msg[0], errLen) != 0 {
		return status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	q.qp = nil
	return nil
}

func (q *QP) String() string { return fmt.Sprintf("IB QP %d to %s", q.Info().QPN, q.peer) }
