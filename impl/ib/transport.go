// Package ib is the InfiniBand transport (mscclppTransportIB): RC queue pairs of the
// verbs binding (the root package ib, imported here as verbs), one engine context whose
// engOps table (ops.c, ibEngOps) posts RDMA writes from the proxy thread, the connection
// state (state.go) that table reads, and the peers' heartbeats (heartbeat.h).
package ib

import (
	"fmt"
	"unsafe"

	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/cudaproxy"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// TransportID is mscclppTransportIB.
const TransportID transport.ID = 2

// Entry registers the IB transport, with the variables it reads (fabric.go).
var Entry = transport.Entry{ID: TransportID, Name: "IB", Subsys: logx.Net, New: newIBT,
	Settings: []string{EnvHCA, EnvSL, EnvTC, EnvTimeout, EnvRetryCnt, EnvMaxSendWr, verbs.EnvLibrary, verbs.EnvGIDIndex}}

// ibConn is one connection's verbs objects.
type ibConn struct {
	dev    *verbs.Context
	cq     *verbs.CQ
	qp     *verbs.QP
	local  []*verbs.MR   // by local handle; 0 is the signal slot
	extra  []*verbs.MR   // buffers of mscclppRegisterBuffer
	peerQP *verbs.QPInfo // from the peer's handle 0
	remote []verbs.MRInfo
	state  *ConnState
	beat   *beatSlot    // where the peer's heartbeats land
	peerHB verbs.MRInfo // where mine go (from the peer's handle 0)
}

// ibt is the IB transport of one communicator: devices opened on first use, one engine
// context with ibEngOps, per connection a CQ, an RC QP and the registrations' MRs.
type ibt struct {
	transport.Defaults
	h     *transport.Host
	lib   *verbs.Lib
	devs  map[string]*verbs.Context
	ctx   *engine.Ctx
	conns map[int]*ibConn
	wr    int
	beats beats
	cu    cudaproxy.OnDemand // CUDA mode: the proxies (one per GPU) of connections over device memory (cudamode.go)
	order map[int]bool       // by device ordinal: whether its kernels see RDMA writes in order (cudamode.go)
	srcs  srcCache           // MRs of device sources of mscclppRegisteredBufferWrite (write.go)
	fab   fabric             // the settings (fabric.go)
}

func newIBT(h *transport.Host) (transport.Transport, error) {
	fab, err := readFabric(h)
	if err != nil {
		return nil, err
	}
	lib, err := verbs.Load(h.Setting(verbs.EnvLibrary))
	if err != nil {
		return nil, err
	}
	ctx, err := engine.NewCtxOps(h.Eng, EngOps(), nil)
	if err != nil {
		return nil, err
	}
	return &ibt{h: h, lib: lib, devs: map[string]*verbs.Context{}, ctx: ctx, conns: map[int]*ibConn{}, wr: fab.wr,
		beats: beats{dead: h.Timeout}, fab: fab, cu: cudaproxy.OnDemand{Name: "IB", Ops: CudaEngOps(),
			Means: "RDMA writes from and into device memory (GPUDirect RDMA)"}}, nil
}

// device opens ibDev once per communicator, where MSCCLPP_IB_HCA allows it (on the port it names),
// with MSCCLPP_IB_SL and MSCCLPP_IB_TC for its QPs.
func (t *ibt) device(ibDev string) (*verbs.Context, error) {
	if x, ok := t.devs[ibDev]; ok {
		return x, nil
	}
	name, err := verbs.ResolveDevice(t.lib, nil, ibDev)
	if err != nil {
		return nil, err
	}
	ok, port, skip := t.fab.hca.allow(name)
	if !ok {
		return nil, status.Errorf(status.InvalidUsage, "IB device %q (%s) is excluded by %s=%q", ibDev, name, EnvHCA, t.fab.hcaRaw)
	}
	x, err := verbs.Open(t.lib, name, verbs.Options{GIDIndex: t.fab.gid, Port: port, SkipPorts: skip, ServiceLevel: t.fab.sl, TrafficClass: t.fab.tc,
		AckTimeout: t.fab.timeout, RetryCount: t.fab.retry, RetrySet: true})
	if err != nil {
		return nil, err
	}
	t.devs[ibDev] = x
	logx.Infof(logx.Net, "rank %d: IB device %s port %d: GID index %d, service level %d, traffic class %d, relaxed ordering on data buffers %v (%s, %s, %s, %s)",
		t.h.Rank, name, x.Port(), x.GIDIndexInUse(), t.fab.sl, t.fab.tc, t.lib.RelaxedOrdering(), EnvHCA, verbs.EnvGIDIndex, EnvSL, EnvTC)
	return x, nil
}

// Declare opens the named device (once per communicator), the connection's CQ and QP and its
// heartbeat slot; its signal slot is in the node segment (host memory the peer's NIC writes),
// so waits work as for SHM, by polling: a NIC wakes no futex.
func (t *ibt) Declare(d transport.Decl) (transport.Endpoint, error) {
	if d.Dev == nil {
		return transport.Endpoint{}, status.Errorf(status.InvalidArgument, "IB transport to rank %d: ibDev is NULL (name a device such as \"mlx5_0\")", d.Peer)
	}
	idx, peer, tag, local := d.Idx, d.Peer, d.Tag, d.Local
	x, err := t.device(*d.Dev)
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
	if dv, ok := t.cu.Serves(local); ok {
		return t.cu.Declare(t.h, d, dv)
	}
	return t.h.HostSlot(idx, peer, tag, local, t.ctx), nil
}

// Describe registers b with the connection's device at its full size; handle 0 also carries
// the QP's address and the connection's heartbeat slot (QPInfo, then two MRInfos).
func (t *ibt) Describe(idx, h int, b transport.Buffer) ([]byte, error) {
	c := t.conns[idx]
	mr, err := t.register(c.dev, b, h != 0) // handle 0 is the signal slot: in order, never relaxed
	if err != nil {
		return nil, fmt.Errorf("IB registration of handle %d (%d bytes): %w", h, b.Size, err)
	}
	if h == transport.Registered { // mscclppRegisterBuffer: the peer writes it with mscclppRegisteredBufferWrite
		c.extra = append(c.extra, mr)
		return mr.Info().Marshal(), nil
	}
	if h >= len(c.local) {
		c.local = append(c.local, make([]*verbs.MR, h+1-len(c.local))...)
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

func (t *ibt) importReg(idx, h int, blob []byte) (engine.Reg, error) {
	c := t.conns[idx]
	if h == 0 && len(blob) > verbs.MRInfoSize && c.peerQP == nil { // handle 0: the verbs.QP, the heartbeat slot, the signal slot
		if len(blob) != verbs.QPInfoSize+2*verbs.MRInfoSize {
			return engine.Reg{}, status.Errorf(status.RemoteError, "the peer's IB handle 0: %d bytes, want %d", len(blob), verbs.QPInfoSize+2*verbs.MRInfoSize)
		}
		qi, err := verbs.UnmarshalQPInfo(blob[:verbs.QPInfoSize])
		if err != nil {
			return engine.Reg{}, status.Errorf(status.RemoteError, "the peer's IB QP: %v", err)
		}
		if c.peerHB, err = verbs.UnmarshalMRInfo(blob[verbs.QPInfoSize : verbs.QPInfoSize+verbs.MRInfoSize]); err != nil || c.peerHB.Size < 8 {
			return engine.Reg{}, status.Errorf(status.RemoteError, "the peer's IB heartbeat slot: %v (%d bytes)", err, c.peerHB.Size)
		}
		c.peerQP = &qi
		blob = blob[verbs.QPInfoSize+verbs.MRInfoSize:]
	}
	mi, err := verbs.UnmarshalMRInfo(blob)
	if err != nil {
		return engine.Reg{}, status.Errorf(status.RemoteError, "the peer's IB registration: %v", err)
	}
	if h != transport.Registered { // those of mscclppRegisterBuffer are kept in its records
		c.remote = append(c.remote, mi)
	}
	return engine.Reg{Addr: mi.Addr, Size: mi.Size, Key: mi.Rkey}, nil
}

// Finish imports the peer's registrations (handle 0 carries its QP), wires the connection and
// connects its QP.
func (t *ibt) Finish(s transport.Setup) (transport.Connected, error) {
	remote, err := transport.ImportAll(s, func(h int, blob []byte) (engine.Reg, error) { return t.importReg(s.Idx, h, blob) })
	if err != nil {
		return transport.Connected{}, err
	}
	local := transport.LocalRegs(s, func(b transport.Buffer) engine.Reg {
		if _, dev := cudaproxy.DeviceOf(b.Ptr); dev {
			return engine.Reg{Addr: uint64(uintptr(b.Ptr)), Size: b.Size} // device memory: the NIC's alone
		}
		return engine.Reg{Mapped: b.Ptr, Addr: uint64(uintptr(b.Ptr)), Size: b.Size}
	})
	conn := t.h.Wire(s, local, remote, nil) // the peer's memory is reachable through the NIC only
	out := transport.Connected{Eng: conn, Path: "RDMA writes on an RC QP, the signal count written after them on the same QP"}
	return out, t.connect(s.Idx, conn)
}

// ImportRegistered: a peer's buffer of mscclppRegisterBuffer, reachable through the NIC only.
func (t *ibt) ImportRegistered(idx, _ int, blob []byte) (engine.Reg, unsafe.Pointer, error) {
	r, err := t.importReg(idx, transport.Registered, blob)
	return r, nil, err
}

// connect moves the QP to RTS against the peer's, hands the connection's keys to ibEngOps and
// adds the connection's heartbeat.
func (t *ibt) connect(idx int, conn *engine.Conn) error {
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

// Stopped completes every write this rank posted (completed == posted on every QP).
func (t *ibt) Stopped() error {
	if err := t.stopCUDA(); err != nil {
		return err
	}
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

// Abort makes every wait of this rank's QPs for room or completions give up (the proxy's and
// host threads' posts and flushes): the destroy waits for no peer. Close lets the goodbyes wait
// again, briefly.
func (t *ibt) Abort() {
	for _, c := range t.conns {
		c.qp.Abandon(true)
	}
}

// Close tears down in reverse: heartbeats (a goodbye to every peer), connection state, QPs,
// MRs, CQs, then the devices.
func (t *ibt) Close() error {
	for _, c := range t.conns {
		c.qp.Abandon(false) // nobody posts any more: the goodbyes may wait for their completion
	}
	t.beats.close()
	if t.ctx != nil {
		t.ctx.Free()
		t.ctx = nil
	}
	t.cu.CloseContexts() // no call inside a proxy context: the states below may go
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
	t.srcs.close()
	t.cu.Free() // after the MRs on their device memory are gone
	for _, x := range t.devs {
		x.Close()
	}
	t.devs = nil
	return nil
}
