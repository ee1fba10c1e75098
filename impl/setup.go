package impl

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// How a registration reaches the peer.
const (
	regSignal    = 1 // the signal slot in the node segment: (local index, connection index)
	regHostAlloc = 2 // an mscclppHostAlloc region the peer maps through /proc/pid/fd
	regRaw       = 3 // any memory: the peer writes it with process_vm_writev
	regCudaIpc   = 4 // device memory: a CUDA IPC handle of its allocation, offset and size
)

const setupMagic = 0x53455455 // "SETU"

// regDesc is one registration on the wire.
type regDesc struct {
	kind             uint64
	addr, size       uint64
	fd, ino, regSize uint64 // regHostAlloc
	offset           uint64 // regHostAlloc, regCudaIpc: offset in the region; regSignal: local index << 32 | conn index
	ipc              [64]byte
}

const regDescWords = 7
const regDescBytes = regDescWords*8 + 64

// describeFor describes handle h of connection cn for its peer.
func (c *Comm) describeFor(cn *Conn, h int, b buffer) (regDesc, error) {
	if cn.transport == TransportP2P {
		return c.describeIpc(b)
	}
	connIdx := -1
	if h == 0 {
		connIdx = cn.idx
	}
	return describe(b, c.localIdx, connIdx), nil
}

func describe(b buffer, localIdx, connIdx int) regDesc {
	d := regDesc{kind: regRaw, addr: uint64(uintptr(b.ptr)), size: b.size}
	if s, ok := hostmem.Lookup(b.ptr, b.size); ok {
		d.kind, d.fd, d.ino, d.regSize, d.offset = regHostAlloc, uint64(s.Fd), s.Ino, s.Size, s.Offset
	}
	if connIdx >= 0 {
		d.kind, d.offset = regSignal, uint64(localIdx)<<32|uint64(connIdx)
	}
	return d
}

// setupMsg is what one side of a connection tells the other.
type setupMsg struct {
	transport Transport
	pid       int
	regs      []regDesc
}

func (m setupMsg) encode() []byte {
	out := make([]byte, 0, 32+len(m.regs)*regDescBytes)
	le := binary.LittleEndian
	out = le.AppendUint32(out, setupMagic)
	out = le.AppendUint32(out, uint32(m.transport))
	out = le.AppendUint64(out, uint64(m.pid))
	out = le.AppendUint64(out, uint64(len(m.regs)))
	for _, r := range m.regs {
		for _, w := range [regDescWords]uint64{r.kind, r.addr, r.size, r.fd, r.ino, r.regSize, r.offset} {
			out = le.AppendUint64(out, w)
		}
		out = append(out, r.ipc[:]...)
	}
	return out
}

func decodeSetup(b []byte) (setupMsg, error) {
	le := binary.LittleEndian
	if len(b) < 24 || le.Uint32(b) != setupMagic {
		return setupMsg{}, status.Errorf(status.RemoteError, "malformed setup message (%d bytes)", len(b))
	}
	m := setupMsg{transport: Transport(le.Uint32(b[4:])), pid: int(le.Uint64(b[8:]))}
	n := le.Uint64(b[16:])
	if n > 1<<20 || uint64(len(b)-24) != n*regDescBytes {
		return setupMsg{}, status.Errorf(status.RemoteError, "malformed setup message: %d registrations in %d bytes", n, len(b))
	}
	for i := uint64(0); i < n; i++ {
		w := b[24+i*regDescBytes:]
		d := regDesc{kind: le.Uint64(w), addr: le.Uint64(w[8:]), size: le.Uint64(w[16:]), fd: le.Uint64(w[24:]),
			ino: le.Uint64(w[32:]), regSize: le.Uint64(w[40:]), offset: le.Uint64(w[48:])}
		copy(d.ipc[:], w[regDescWords*8:])
		m.regs = append(m.regs, d)
	}
	return m, nil
}

// importReg turns the peer's registration into something this process can write.
func (c *Comm) importReg(pid int, d regDesc) (engine.Reg, error) {
	r := engine.Reg{Addr: d.addr, Size: d.size, Pid: pid}
	switch d.kind {
	case regSignal:
		local, conn := int(d.offset>>32), int(d.offset&0xffffffff)
		if local >= len(c.localOf) || conn >= engine.MaxConns {
			return r, status.Errorf(status.RemoteError, "signal slot (%d, %d) out of range", local, conn)
		}
		r.Mapped = c.node.Epoch(local, conn)
	case regHostAlloc:
		p, m, err := hostmem.MapRemote(pid, hostmem.Share{Fd: int(d.fd), Ino: d.ino, Size: d.regSize, Offset: d.offset})
		if err != nil {
			return r, err
		}
		c.mappings = append(c.mappings, m)
		r.Mapped = p
	case regCudaIpc:
		a, err := c.openIpc(d)
		if err != nil {
			return r, err
		}
		r.Addr, r.Pid = a, 0
	case regRaw:
	default:
		return r, status.Errorf(status.RemoteError, "unknown registration kind %d", d.kind)
	}
	return r, nil
}

// ConnectionSetup exchanges every connection's registrations with its peer and ends with a barrier.
func (c *Comm) ConnectionSetup() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.setupDone {
		return status.Errorf(status.InvalidUsage, "mscclppConnectionSetup called twice")
	}
	pid := os.Getpid()
	for _, cn := range c.conns {
		m := setupMsg{transport: cn.transport, pid: pid}
		for h, b := range cn.bufs {
			d, err := c.describeFor(cn, h, b)
			if err != nil {
				return fmt.Errorf("connection setup with rank %d tag %d: handle %d: %w", cn.remoteRank, cn.tag, h, err)
			}
			m.regs = append(m.regs, d)
		}
		if err := c.boot.Send(cn.remoteRank, cn.tag, m.encode()); err != nil {
			return fmt.Errorf("connection setup: send to rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
	}
	for _, cn := range c.conns {
		raw, err := c.boot.Recv(cn.remoteRank, cn.tag)
		if err != nil {
			return c.remoteFailure(fmt.Errorf("connection setup: rank %d never answered for tag %d (did it declare the mirror connection?): %w", cn.remoteRank, cn.tag, err))
		}
		if err := c.finishConn(cn, raw); err != nil {
			return fmt.Errorf("connection setup with rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
	}
	c.setupDone = true
	return c.Barrier()
}

func (c *Comm) finishConn(cn *Conn, raw []byte) error {
	m, err := decodeSetup(raw)
	if err != nil {
		return err
	}
	if m.transport != cn.transport {
		return status.Errorf(status.InvalidUsage, "this rank declared %v, the peer declared %v", cn.transport, m.transport)
	}
	if len(m.regs) == 0 || (m.regs[0].kind != regSignal && m.regs[0].kind != regCudaIpc) {
		return status.Errorf(status.RemoteError, "the peer sent no signal slot")
	}
	remote := make([]engine.Reg, len(m.regs))
	for i, d := range m.regs {
		if remote[i], err = c.importReg(m.pid, d); err != nil {
			return fmt.Errorf("handle %d: %w", i, err)
		}
	}
	local := make([]engine.Reg, len(cn.bufs))
	for i, b := range cn.bufs {
		local[i] = engine.Reg{Mapped: b.ptr, Addr: uint64(uintptr(b.ptr)), Size: b.size, Pid: os.Getpid()}
		if cn.transport == TransportP2P {
			local[i].Mapped = nil // device memory: never touched by the host
		}
	}
	cn.eng = cn.ctx.NewConn(c.eng, c.devConns, cn.idx, cn.remoteRank, cn.tag)
	cn.eng.SetLocal(local)
	epoch := appPointer(cn.transport, remote[0])
	cn.eng.SetRemote(remote, unsafe.Add(epoch, 8), m.pid)
	if m.regs[0].kind == regSignal { // both epoch slots in the node segment: waits sleep on a futex
		peerLocal, peerConn := int(m.regs[0].offset>>32), int(m.regs[0].offset&0xffffffff)
		cn.eng.SetSleepers(c.node.Sleepers(c.localIdx, cn.idx), c.node.Sleepers(peerLocal, peerConn))
	}
	var remoteBuff unsafe.Pointer
	if len(remote) > 1 {
		remoteBuff = appPointer(cn.transport, remote[1])
	}
	c.devConns.SetRemote(cn.idx, epoch, remoteBuff)
	logx.Infof(logx.SHM|logx.P2P, "rank %d: connection %d to rank %d tag %d over %v: %s", c.rank, cn.idx,
		cn.remoteRank, cn.tag, cn.transport, putPath(cn.transport, remote))
	return nil
}

// appPointer is the peer registration's address as this rank's app and kernels use it: the
// device address for P2P, the local mapping otherwise (nil when not mapped here).
func appPointer(t Transport, r engine.Reg) unsafe.Pointer {
	if t == TransportP2P {
		return engine.DevPtr(r.Addr)
	}
	return r.Mapped
}

// putPath says in words how puts to the peer's handle 1 travel.
func putPath(t Transport, remote []engine.Reg) string {
	switch {
	case t == TransportP2P:
		return "cuMemcpyDtoDAsync into the peer's buffer opened through CUDA IPC"
	case len(remote) < 2:
		return "signals only (the peer registered no buffer)"
	case remote[1].Mapped != nil:
		return "memcpy into the peer's mscclppHostAlloc buffer, mapped here"
	default:
		return "process_vm_writev into the peer's buffer (allocate it with mscclppHostAlloc for single-copy memcpy)"
	}
}

// RegisteredPeer is one connection's entry of an mscclppRegisteredMemory.
type RegisteredPeer struct {
	RemoteBuff unsafe.Pointer // the peer's buffer when mapped here, else nil
	Record     unsafe.Pointer // an opaque record of the peer's registration (kept in IbMr for SHM)
}

// RegisterBuffer exchanges mem with every connection's peer (collective over the connections).
func (c *Comm) RegisterBuffer(mem unsafe.Pointer, size uint64) ([]RegisteredPeer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mem == nil || size == 0 {
		return nil, status.Errorf(status.InvalidArgument, "register buffer %p of %d bytes", mem, size)
	}
	if !c.setupDone {
		return nil, status.Errorf(status.InvalidUsage, "mscclppRegisterBuffer before mscclppConnectionSetup")
	}
	for _, cn := range c.conns {
		d, err := c.describeFor(cn, 1, buffer{mem, size})
		if err != nil {
			return nil, fmt.Errorf("register buffer for rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
		m := setupMsg{pid: os.Getpid(), transport: cn.transport, regs: []regDesc{d}}
		if err := c.boot.Send(cn.remoteRank, cn.tag, m.encode()); err != nil {
			return nil, fmt.Errorf("register buffer: send to rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
	}
	out := make([]RegisteredPeer, 0, len(c.conns))
	for _, cn := range c.conns {
		raw, err := c.boot.Recv(cn.remoteRank, cn.tag)
		if err != nil {
			return nil, fmt.Errorf("register buffer: rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
		pm, err := decodeSetup(raw)
		if err != nil || len(pm.regs) != 1 {
			return nil, fmt.Errorf("register buffer: rank %d tag %d: bad registration: %w", cn.remoteRank, cn.tag, err)
		}
		r, err := c.importReg(pm.pid, pm.regs[0])
		if err != nil {
			return nil, fmt.Errorf("register buffer: rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
		rec := engine.NewRegRecord(r)
		c.regRecords = append(c.regRecords, rec)
		out = append(out, RegisteredPeer{RemoteBuff: appPointer(cn.transport, r), Record: rec.Ptr()})
	}
	return out, nil
}

// RegisteredBufferWrite copies size bytes of src+srcOff to offset dstOff of every peer's registered buffer.
func (c *Comm) RegisteredBufferWrite(peers []RegisteredPeer, src unsafe.Pointer, size uint64, srcOff, dstOff uint32, stream uintptr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if src == nil || size == 0 {
		return status.Errorf(status.InvalidArgument, "registered buffer write of %p, %d bytes", src, size)
	}
	if len(peers) != len(c.conns) {
		return status.Errorf(status.InvalidArgument, "registered memory has %d entries for %d connections (was it made by mscclppRegisterBuffer on this communicator?)", len(peers), len(c.conns))
	}
	for i, p := range peers {
		rec, ok := engine.Lookup(c.regRecords, p.Record)
		if !ok {
			return status.Errorf(status.InvalidArgument, "registered memory entry %d was not made by mscclppRegisterBuffer on this communicator", i)
		}
		var err error
		if c.conns[i].transport == TransportP2P {
			err = c.cudaWrite(rec, uint64(dstOff), unsafe.Add(src, srcOff), size, stream)
		} else {
			err = rec.Write(c.eng, uint64(dstOff), unsafe.Add(src, srcOff), size)
		}
		if err != nil {
			return fmt.Errorf("registered buffer write to rank %d: %w", c.conns[i].remoteRank, err)
		}
	}
	return nil
}
