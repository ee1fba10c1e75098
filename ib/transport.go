package ib

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// TransportID is mscclppTransportIB.
const TransportID transport.ID = 2

// Entry registers the IB transport.
var Entry = transport.Entry{ID: TransportID, Name: "IB", New: newIBT}

// EnvMaxSendWr sets the send queue depth of each connection's QP (default 256).
const EnvMaxSendWr = "MSCCLPP_IB_MAX_SEND_WR"

// ibConn is one connection's verbs objects.
type ibConn struct {
	dev    *Context
	cq     *CQ
	qp     *QP
	local  []*MR   // by local handle; 0 is the signal slot
	extra  []*MR   // buffers of mscclppRegisterBuffer
	peerQP *QPInfo // from the peer's handle 0
	remote []MRInfo
	state  *ConnState
	beat   *beatSlot // where the peer's heartbeats land
	peerHB MRInfo    // where mine go (from the peer's handle 0)
}

// ibt is the IB transport of one communicator: devices opened on first use, one engine
// context with ibEngOps, per connection a CQ, an RC QP and the registrations' MRs.
type ibt struct {
	h     *transport.Host
	lib   *Lib
	devs  map[string]*Context
	ctx   *engine.Ctx
	conns map[int]*ibConn
	wr    int
	beats beats
}

func newIBT(h *transport.Host) (transport.Transport, error) {
	lib, err := Load()
	if err != nil {
		return nil, err
	}
	ctx, err := engine.NewCtxOps(h.Eng, EngOps(), nil)
	if err != nil {
		return nil, err
	}
	wr := 256
	if v := env.Get(EnvMaxSendWr); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			wr = n
		} else {
			logx.Malformed("ignoring %s=%q: not a positive integer; the default %d is used", EnvMaxSendWr, v, wr)
		}
	}
	return &ibt{h: h, lib: lib, devs: map[string]*Context{}, ctx: ctx, conns: map[int]*ibConn{}, wr: wr,
		beats: beats{dead: h.Timeout}}, nil
}

// device opens ibDev once per communicator.
func (t *ibt) device(ibDev string) (*Context, error) {
	if x, ok := t.devs[ibDev]; ok {
		return x, nil
	}
	x, err := Open(t.lib, ibDev, Options{GIDIndex: -1})
	if err != nil {
		return nil, err
	}
	t.devs[ibDev] = x
	return x, nil
}

func (t *ibt) Check(peer int, dev *string) error {
	if dev == nil {
		return status.Errorf(status.InvalidArgument, "IB transport to rank %d: ibDev is NULL (name a device such as \"mlx5_0\")", peer)
	}
	_, err := t.device(*dev)
	return err
}

// Connect opens the connection's CQ and QP; its signal slot is in the node segment (host
// memory the peer's NIC writes), so waits work as for SHM, by polling: a NIC wakes no futex.
func (t *ibt) Connect(idx, peer, tag int, local unsafe.Pointer, dev *string) (transport.Endpoint, error) {
	x, err := t.device(*dev)
	if err != nil {
		return transport.Endpoint{}, err
	}
	cq, err := x.NewCQ(t.wr)
	if err != nil {
		return transport.Endpoint{}, err
	}
	qp, err := x.NewQP(cq, t.wr, fmt.Sprintf("rank %d", peer))
	if err != nil {
		cq.Close()
		return transport.Endpoint{}, err
	}
	slot, err := newBeatSlot(x)
	if err != nil {
		qp.Close()
		cq.Close()
		return transport.Endpoint{}, err
	}
	t.conns[idx] = &ibConn{dev: x, cq: cq, qp: qp, beat: slot}
	return t.h.HostSlot(idx, peer, tag, local, t.ctx), nil
}

// Describe registers b with the connection's device at its full size; handle 0 also carries
// the QP's address and the connection's heartbeat slot (QPInfo, then two MRInfos).
func (t *ibt) Describe(idx, h int, b transport.Buffer) ([]byte, error) {
	c := t.conns[idx]
	mr, err := c.dev.RegisterMR(uint64(uintptr(b.Ptr)), b.Size)
	if err != nil {
		return nil, fmt.Errorf("IB registration of handle %d (%d bytes): %w", h, b.Size, err)
	}
	if h == transport.Registered { // mscclppRegisterBuffer: the peer writes it with mscclppRegisteredBufferWrite
		c.extra = append(c.extra, mr)
		return mr.Info().Marshal(), nil
	}
	if h >= len(c.local) {
		c.local = append(c.local, make([]*MR, h+1-len(c.local))...)
	}
	if c.local[h] != nil {
		c.local[h].Close()
	}
	c.local[h] = mr
	blob := mr.Info().Marshal()
	if h == 0 {
		blob = append(append(c.qp.Info().Marshal(), c.beat.mr.Info().Marshal()...), blob...)
	}
	return blob, nil
}

func (t *ibt) Import(idx, h, _ int, blob []byte) (engine.Reg, error) {
	c := t.conns[idx]
	if h == 0 && len(blob) > MRInfoSize && c.peerQP == nil { // handle 0: the QP, the heartbeat slot, the signal slot
		if len(blob) != QPInfoSize+2*MRInfoSize {
			return engine.Reg{}, status.Errorf(status.RemoteError, "the peer's IB handle 0: %d bytes, want %d", len(blob), QPInfoSize+2*MRInfoSize)
		}
		qi, err := UnmarshalQPInfo(blob[:QPInfoSize])
		if err != nil {
			return engine.Reg{}, status.Errorf(status.RemoteError, "the peer's IB QP: %v", err)
		}
		if c.peerHB, err = UnmarshalMRInfo(blob[QPInfoSize : QPInfoSize+MRInfoSize]); err != nil || c.peerHB.Size < 8 {
			return engine.Reg{}, status.Errorf(status.RemoteError, "the peer's IB heartbeat slot: %v (%d bytes)", err, c.peerHB.Size)
		}
		c.peerQP = &qi
		blob = blob[QPInfoSize+MRInfoSize:]
	}
	mi, err := UnmarshalMRInfo(blob)
	if err != nil {
		return engine.Reg{}, status.Errorf(status.RemoteError, "the peer's IB registration: %v", err)
	}
	if h != transport.Registered { // those of mscclppRegisterBuffer are kept in its records
		c.remote = append(c.remote, mi)
	}
	return engine.Reg{Addr: mi.Addr, Size: mi.Size, Key: mi.Rkey}, nil
}

// Finish moves the QP to RTS against the peer's and hands the connection's keys to ibEngOps.
func (t *ibt) Finish(idx int, conn *engine.Conn, _, _ []engine.Reg, _ [][]byte) error {
	c := t.conns[idx]
	if c.peerQP == nil {
		return status.Errorf(status.RemoteError, "the peer sent no IB QP for connection %d", idx)
	}
	if err := c.qp.Connect(*c.peerQP); err != nil {
		return err
	}
	st, err := NewConnState(c.qp, c.local, c.remote)
	if err != nil {
		return err
	}
	c.state = st
	conn.SetTransport(st.Ptr())
	if err := t.beats.add(conn, c.qp, c.beat, c.peerHB); err != nil {
		return err
	}
	if !t.h.OnMyNode(conn.PeerRank()) {
		conn.SetPeerPid(0) // its pid means nothing here: a failed write names it
	}
	return nil
}

// SetUp starts the heartbeats: every peer has its QPs in RTS (setup's barrier passed).
func (t *ibt) SetUp() { t.beats.start() }

func (t *ibt) LocalReg(b transport.Buffer) engine.Reg {
	return engine.Reg{Mapped: b.Ptr, Addr: uint64(uintptr(b.Ptr)), Size: b.Size}
}

// AppPointer: the peer's memory is reachable through the NIC only.
func (t *ibt) AppPointer(engine.Reg) unsafe.Pointer { return nil }

func (t *ibt) PutPath([]engine.Reg) string {
	return "RDMA writes on an RC QP, the signal count written after them on the same QP"
}

// Write RDMA-writes src (registered for the call) to offset off of the peer's registration on
// connection idx's QP and waits until the write completed (mscclppRegisteredBufferWrite).
func (t *ibt) Write(idx int, rec engine.RegRecord, off uint64, src unsafe.Pointer, size uint64, _ uintptr) error {
	c := t.conns[idx]
	if c == nil || c.state == nil {
		return status.Errorf(status.InvalidUsage, "IB connection %d is not set up", idx)
	}
	if off > rec.Size() || size > rec.Size()-off {
		return status.Errorf(status.InvalidArgument, "write of %d bytes at offset %d exceeds the peer's registered %d bytes", size, off, rec.Size())
	}
	mr, err := c.dev.RegisterMR(uint64(uintptr(src)), size)
	if err != nil {
		return fmt.Errorf("IB registration of the source (%d bytes): %w", size, err)
	}
	defer mr.Close()
	if err := c.qp.Write(mr, 0, MRInfo{Addr: rec.Addr(), Size: rec.Size(), Rkey: rec.Key()}, off, size, true); err != nil {
		return err
	}
	return c.qp.Flush(t.h.Timeout)
}

func (t *ibt) Contexts() []*engine.Ctx { return []*engine.Ctx{t.ctx} }

// Stopped completes every write this rank posted (completed == posted on every QP).
func (t *ibt) Stopped() error {
	for idx, c := range t.conns {
		if c.state == nil {
			continue
		}
		if err := c.qp.Flush(t.h.Timeout); err != nil {
			return fmt.Errorf("connection %d: %w", idx, err)
		}
	}
	return nil
}

// Close tears down in reverse: heartbeats (a goodbye to every peer), connection state, QPs,
// MRs, CQs, then the devices.
func (t *ibt) Close() error {
	t.beats.close()
	if t.ctx != nil {
		t.ctx.Free()
		t.ctx = nil
	}
	for _, c := range t.conns {
		if c.state != nil {
			c.state.Free()
		}
		c.qp.Close()
		c.beat.free()
		for _, m := range append(c.local, c.extra...) {
			if m != nil {
				m.Close()
			}
		}
		c.cq.Close()
	}
	t.conns = nil
	for _, x := range t.devs {
		x.Close()
	}
	t.devs = nil
	return nil
}
