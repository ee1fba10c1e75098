package impl

import (
	"fmt"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// Transport is an mscclppTransport_t value.
type Transport = transport.ID

// Conn is one declared connection.
type Conn struct {
	idx        int
	remoteRank int
	tag        int
	entry      transport.Entry // its transport's registry entry: ID, name, logging subsystem
	tr         transport.Transport
	bufs       []transport.Buffer // by handle; 0 is the signal slot
	ctx        *engine.Ctx
	eng        *engine.Conn
	// failed is why setting the connection up failed (here or on the peer's side): it stays
	// failed and is not set up again. A connection whose peer had not declared its mirror yet
	// is not failed: the next setup tries it again.
	failed error
}

// transportFor returns transport t's registry entry and this communicator's instance of it,
// making the instance on first use.
func (c *Comm) transportFor(t Transport) (transport.Entry, transport.Transport, error) {
	e, err := lookupTransport(t)
	if err != nil {
		return e, nil, err
	}
	if tr, ok := c.transports[t]; ok {
		return e, tr, nil
	}
	tr, err := e.New(&c.host)
	if err != nil {
		return e, nil, fmt.Errorf("%s transport: %w", e.Name, err)
	}
	c.transports[t] = tr
	c.trOrder = append(c.trOrder, t)
	return e, tr, nil
}

// Connect declares a connection to remoteRank with tag over t; buff (may be nil) becomes handle 1.
// It may come at any time: the next ConnectionSetup sets it up.
func (c *Comm) Connect(remoteRank, tag int, buff unsafe.Pointer, size uint64, t Transport, ibDev *string, withBuffer bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if remoteRank < 0 || remoteRank >= c.nranks {
		return status.Errorf(status.InvalidArgument, "remote rank %d out of range 0..%d", remoteRank, c.nranks-1)
	}
	if remoteRank == c.rank {
		return status.Errorf(status.InvalidArgument, "rank %d cannot connect to itself", remoteRank)
	}
	if withBuffer && (buff == nil || size == 0) {
		return status.Errorf(status.InvalidArgument, "connect to rank %d tag %d: buffer %p of %d bytes (use mscclppConnectWithoutBuffer for none)", remoteRank, tag, buff, size)
	}
	if withBuffer {
		if err := c.refuseUnshareable("mscclppConnect", buff, size); err != nil {
			return fmt.Errorf("connect to rank %d tag %d: %w", remoteRank, tag, err)
		}
	}
	entry, tr, err := c.transportFor(t)
	if err != nil {
		return fmt.Errorf("connect to rank %d tag %d: %w", remoteRank, tag, err)
	}
	if len(c.conns) >= engine.MaxConns {
		return status.Errorf(status.InvalidUsage, "too many connections: at most %d per communicator", engine.MaxConns)
	}
	for _, o := range c.conns {
		if o.remoteRank == remoteRank && o.tag == tag {
			return status.Errorf(status.InvalidArgument, "a connection to rank %d with tag %d already exists (index %d)", remoteRank, tag, o.idx)
		}
	}
	idx := len(c.conns)
	var local unsafe.Pointer
	if withBuffer {
		local = buff
		if err := c.claimGPU(buff); err != nil {
			return fmt.Errorf("connect to rank %d tag %d: %w", remoteRank, tag, err)
		}
	}
	ep, err := tr.Declare(transport.Decl{Idx: idx, Peer: remoteRank, Tag: tag, Local: local, Dev: ibDev})
	if err != nil {
		return fmt.Errorf("connect to rank %d tag %d: %w", remoteRank, tag, err)
	}
	cn := &Conn{idx: idx, remoteRank: remoteRank, tag: tag, entry: entry, tr: tr, ctx: ep.Ctx}
	cn.bufs = []transport.Buffer{{Ptr: ep.Epoch, Size: engine.EpochBytes}}
	if withBuffer {
		cn.bufs = append(cn.bufs, transport.Buffer{Ptr: buff, Size: size})
	}
	c.conns = append(c.conns, cn)
	if withBuffer {
		c.pin(cn, buff, size)
	}
	c.logConnect(cn, local, size)
	return nil
}

// pin keeps an mscclppHostAlloc buffer of cn from being freed while the communicator lives.
func (c *Comm) pin(cn *Conn, buff unsafe.Pointer, size uint64) {
	what := fmt.Sprintf("connection %d (rank %d, tag %d) of rank %d's communicator", cn.idx, cn.remoteRank, cn.tag, c.rank)
	if p := hostmem.PinRange(buff, size, what); p != nil {
		c.pins = append(c.pins, p)
	}
}

// RegisterBufferForConnection registers buff as the next handle of connection connIdx.
func (c *Comm) RegisterBufferForConnection(connIdx int, buff unsafe.Pointer, size uint64) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if connIdx < 0 || connIdx >= len(c.conns) {
		return 0, status.Errorf(status.InvalidArgument, "connIdx %d out of range: %d connections", connIdx, len(c.conns))
	}
	if buff == nil || size == 0 {
		return 0, status.Errorf(status.InvalidArgument, "register buffer %p of %d bytes for connection %d", buff, size, connIdx)
	}
	if err := c.refuseUnshareable("mscclppRegisterBufferForConnection", buff, size); err != nil {
		return 0, fmt.Errorf("register buffer for connection %d: %w", connIdx, err)
	}
	cn := c.conns[connIdx]
	if cn.eng != nil {
		return 0, status.Errorf(status.InvalidUsage, "connection %d (rank %d tag %d) is already set up: register its buffers before the mscclppConnectionSetup that sets it up (or use mscclppRegisterBuffer)", connIdx, cn.remoteRank, cn.tag)
	}
	cn.bufs = append(cn.bufs, transport.Buffer{Ptr: buff, Size: size})
	c.pin(cn, buff, size)
	c.logRegisterForConn(cn, len(cn.bufs)-1, buff, size)
	return uint32(len(cn.bufs) - 1), nil
}

// DeviceConnections returns the array of device connections and how many there are.
func (c *Comm) DeviceConnections() (unsafe.Pointer, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.host.DevConns.Ptr(), len(c.conns)
}

// DeviceConnection returns the device connection to remoteRank with tag.
func (c *Comm) DeviceConnection(remoteRank, tag int) (unsafe.Pointer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.conns {
		if cn.remoteRank == remoteRank && cn.tag == tag {
			return c.host.DevConns.At(cn.idx), nil
		}
	}
	return nil, status.Errorf(status.InvalidArgument, "no connection to rank %d with tag %d", remoteRank, tag)
}

// logConnect says that a connection was declared.
func (c *Comm) logConnect(cn *Conn, buff unsafe.Pointer, size uint64) {
	logx.Infof(logx.Init|cn.entry.Subsys, "rank %d: connection %d to rank %d tag %d declared over %v (buffer %p, %d bytes); it is set up by the next mscclppConnectionSetup",
		c.rank, cn.idx, cn.remoteRank, cn.tag, cn.entry.Name, buff, size)
}

// logRegisterForConn says that a buffer became handle h of connection cn.
func (c *Comm) logRegisterForConn(cn *Conn, h int, buff unsafe.Pointer, size uint64) {
	logx.Infof(cn.entry.Subsys, "rank %d: buffer %p (%d bytes) registered as handle %d of connection %d to rank %d over %v",
		c.rank, buff, size, h, cn.idx, cn.remoteRank, cn.entry.Name)
}
