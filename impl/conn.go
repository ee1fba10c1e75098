package impl

import (
	"fmt"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Transport is an mscclppTransport_t value.
type Transport int32

// The transports; the values are ABI.
const (
	TransportP2P Transport = 0
	TransportSHM Transport = 1
	TransportIB  Transport = 2
)

func (t Transport) String() string {
	switch t {
	case TransportP2P:
		return "P2P"
	case TransportSHM:
		return "SHM"
	case TransportIB:
		return "IB"
	}
	return fmt.Sprintf("transport(%d)", int32(t))
}

// buffer is one registration of a connection.
type buffer struct {
	ptr  unsafe.Pointer
	size uint64
}

// Conn is one declared connection.
type Conn struct {
	idx        int
	remoteRank int
	tag        int
	transport  Transport
	bufs       []buffer // by handle; 0 is the signal slot
	ctx        *engine.Ctx
	eng        *engine.Conn
}

// checkTransport says whether this communicator can serve transport t to rank peer.
func (c *Comm) checkTransport(t Transport, peer int, ibDev *string) error {
	switch t {
	case TransportSHM:
		if _, ok := c.localOf[peer]; !ok {
			return status.Errorf(status.InvalidUsage, "SHM transport to rank %d: that rank is on another host (%q, this one is %q)", peer, c.hostIDs[peer], c.hostIDs[c.rank])
		}
		return nil
	case TransportP2P:
		if c.device == deviceHost {
			return status.Errorf(status.InvalidUsage, "P2P transport to rank %d needs CUDA mode, and MSCCLPP_DEVICE=host: use mscclppTransportSHM", peer)
		}
		if _, ok := c.localOf[peer]; !ok {
			return status.Errorf(status.InvalidUsage, "P2P transport to rank %d: that rank is on another host (CUDA IPC works within a node)", peer)
		}
		return nil
	case TransportIB:
		if ibDev == nil {
			return status.Errorf(status.InvalidArgument, "IB transport to rank %d: ibDev is NULL", peer)
		}
		return status.Errorf(status.InvalidUsage, "IB transport (device %q) is not built into this library yet: use mscclppTransportSHM between ranks of one node", *ibDev)
	}
	return status.Errorf(status.InvalidUsage, "unknown transport %d (want mscclppTransportP2P=0, SHM=1 or IB=2)", int32(t))
}

// Connect declares a connection to remoteRank with tag over t; buff (may be nil) becomes handle 1.
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
	if c.setupDone {
		return status.Errorf(status.InvalidUsage, "connect to rank %d tag %d after mscclppConnectionSetup", remoteRank, tag)
	}
	if err := c.checkTransport(t, remoteRank, ibDev); err != nil {
		return err
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
	}
	cn := &Conn{idx: idx, remoteRank: remoteRank, tag: tag, transport: t}
	var epoch unsafe.Pointer
	if t == TransportP2P {
		ctx, ep, err := c.connectP2P(idx, remoteRank, tag, local)
		if err != nil {
			return fmt.Errorf("connect to rank %d tag %d: %w", remoteRank, tag, err)
		}
		cn.ctx, epoch = ctx, ep
	} else {
		epoch = c.node.Epoch(c.localIdx, idx)
		wait := c.node.Wait(c.localIdx, idx)
		*(*[2]uint64)(epoch) = [2]uint64{}
		*(*uint64)(wait) = 0
		if c.shmCtx == nil {
			x, err := engine.NewCtx(c.eng)
			if err != nil {
				return fmt.Errorf("connect to rank %d tag %d: %w", remoteRank, tag, err)
			}
			c.shmCtx = x
		}
		cn.ctx = c.shmCtx
		c.devConns.SetIdentity(idx, remoteRank, tag, local, epoch, wait)
		cn.ctx.Attach(c.devConns, idx)
	}
	cn.bufs = []buffer{{ptr: epoch, size: epochBytes}}
	if withBuffer {
		cn.bufs = append(cn.bufs, buffer{ptr: buff, size: size})
	}
	c.conns = append(c.conns, cn)
	return nil
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
	if c.setupDone {
		return 0, status.Errorf(status.InvalidUsage, "register a buffer for connection %d after mscclppConnectionSetup", connIdx)
	}
	cn := c.conns[connIdx]
	cn.bufs = append(cn.bufs, buffer{ptr: buff, size: size})
	return uint32(len(cn.bufs) - 1), nil
}

// DeviceConnections returns the array of device connections and how many there are.
func (c *Comm) DeviceConnections() (unsafe.Pointer, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.devConns.Ptr(), len(c.conns)
}

// DeviceConnection returns the device connection to remoteRank with tag.
func (c *Comm) DeviceConnection(remoteRank, tag int) (unsafe.Pointer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.conns {
		if cn.remoteRank == remoteRank && cn.tag == tag {
			return c.devConns.At(cn.idx), nil
		}
	}
	return nil, status.Errorf(status.InvalidArgument, "no connection to rank %d with tag %d", remoteRank, tag)
}
