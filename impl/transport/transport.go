// Package transport is the contract between the communicator core and its
// transports (SHM, P2P, ...): the Transport interface a transport implements
// (embedding Defaults for the capabilities it lacks), the Entry that
// lists it in impl/registry.go (like NCCL's ncclTransports array), and the
// Host a communicator offers it. The core never names a transport; each
// transport lives in its own package under impl/.
package transport

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/nodeshm"
)

// ID is an mscclppTransport_t value.
type ID int32

// Host is what a communicator offers its transports: who is where, the node segment, the
// engine state and the array of device connections handed to applications.
type Host struct {
	Rank     int
	Instance string      // names this instance of the communicator, as this rank formed it (bootstrap InstanceID)
	HostIDs  []string    // by rank
	LocalIdx int         // this rank's index among the ranks of its node
	LocalOf  map[int]int // rank -> index on this node, for the ranks of this node
	Node     *nodeshm.Segment
	Eng      *engine.Comm
	DevConns engine.DevConns
	ListenIP string        // the IP of this rank's bootstrap listener: peers reach it there
	Timeout  time.Duration // the bootstrap timeout: the bound of a transport's setup waits
	// PeersClosed tells each of peers that this rank closed its mappings of their memory
	// (briefly: a destroy waits for no peer) and calls free once every one of them has said the
	// same of this rank's memory: at once when all have, else after the destroy returned, when
	// the last one does (never, when one does not within the bootstrap timeout: the memory is
	// then kept until the process exits). Nil: nothing to wait for.
	PeersClosed func(peers []int, free func())
	// Settings holds the environment variables the registered transports declare
	// (Entry.Settings), read once by the core at mscclppCommInitRank: "" where unset.
	Settings map[string]string
}

// Setting is the value of the environment variable name as the core read it for this
// communicator ("" where unset); name must be in the transport's Entry.Settings.
func (h *Host) Setting(name string) string { return h.Settings[name] }

// OnMyNode reports whether rank peer runs on this rank's node.
func (h *Host) OnMyNode(peer int) bool {
	_, ok := h.LocalOf[peer]
	return ok
}

// HostSlot sets up connection idx to peer with its signal slot and wait counter in the node
// segment (host memory) and its triggers served by ctx: the local side of a host-mode transport.
func (h *Host) HostSlot(idx, peer, tag int, local unsafe.Pointer, ctx *engine.Ctx) Endpoint {
	epoch := h.Node.Epoch(h.LocalIdx, idx)
	wait := h.Node.Wait(h.LocalIdx, idx)
	*(*[2]uint64)(epoch) = [2]uint64{}
	*(*uint64)(wait) = 0
	h.DevConns.SetIdentity(idx, peer, tag, local, epoch, wait)
	ctx.Attach(h.DevConns, idx)
	return Endpoint{Ctx: ctx, Epoch: epoch}
}

// Registered is the handle Describe is given for a buffer of mscclppRegisterBuffer: not a
// handle of the connection (puts never name it), written by mscclppRegisteredBufferWrite.
const Registered = -1

// Buffer is one registration of a connection: handle 0 is the signal slot, 1 the connect buffer.
type Buffer struct {
	Ptr  unsafe.Pointer
	Size uint64
}

// Decl is one connection as the application declared it (mscclppConnect): entry Idx of
// Host.DevConns, to rank Peer with Tag, its buffer (handle 1) or nil, and the device name the
// application passed (mscclppConnect's ibDev) or nil.
type Decl struct {
	Idx, Peer, Tag int
	Local          unsafe.Pointer
	Dev            *string
}

// Endpoint is the local side of one connection as its transport declared it.
type Endpoint struct {
	Ctx   *engine.Ctx    // the proxy context serving the connection
	Epoch unsafe.Pointer // this rank's signal slot of the connection (registered as handle 0)
}

// Setup is what Finish completes a connection from: the connection (Idx, Peer, Tag, the
// context Declare chose), this rank's registrations by handle (0: the signal slot), and the
// peer's process id and registrations, as the peer's Describe made them (Blobs[0]: its slot).
type Setup struct {
	Idx, Peer, Tag int
	Ctx            *engine.Ctx
	Local          []Buffer
	Pid            int
	Blobs          [][]byte
}

// Connected is what the core publishes of a connection Finish set up: its engine connection,
// and the peer's signal slot and buffer (handle 1) as an application here addresses them (the
// device connection's remoteSignalEpochId and remoteBuff; nil when not addressable here).
type Connected struct {
	Eng         *engine.Conn
	RemoteEpoch unsafe.Pointer
	RemoteBuff  unsafe.Pointer
	Path        string // how puts travel, in words (an INFO line)
}

// Transport is one transport of one communicator, what NCCL's struct ncclTransport is: the
// core declares a connection, sends the blob of each registration, finishes the connection
// from the peer's blobs, serves mscclppRegisterBuffer and mscclppRegisteredBufferWrite, and
// closes. The last four methods are capabilities a transport may lack: it embeds Defaults and
// writes only those it has.
//
// This is the control plane of the one contract between the core and a transport; its data
// plane is the transport's C engOps table, whose rules impl/engine/transport.h states in full.
// In short, the same rules on both sides:
//   - Concurrency: the core calls these methods one at a time, under its control-plane lock;
//     the engOps entries (op, sendSignal, putSignal, the waits) run meanwhile on the proxy thread
//     and any number of host threads at once, and Write and Abort run while they do. Close runs
//     once, after the proxies stopped and no host call is inside a context.
//   - Signals belong to the engine: a transport never counts them. The engine picks each value
//     under the connection's signal lock and calls sendSignal with it held; the transport
//     delivers the value after the data of every operation that returned before, as it is.
//   - Return codes (status codes here, mscclppResult_t in C): InvalidArgument refuses one
//     request (bad handles, offsets, sizes) and everything goes on; RemoteError fails only that
//     connection (its peer or the path to it: marked failed, its waits end, the others go on);
//     anything else fails the call here, and the whole context in the data plane. A failure is
//     recorded (engConnFail in C) before it is returned.
//   - Peer close: a transport that learns the peer's side is gone sets the connection's
//     peerClosed and wakes the threads asleep on its epoch, so their waits end with RemoteError
//     at once instead of at their deadline.
type Transport interface {
	// Declare checks that the connection can be served (an error says why not) and sets up
	// its local side: the proxy context serving it and its signal slot.
	Declare(d Decl) (Endpoint, error)
	// Describe is registration b (handle h, or Registered) of connection idx as an opaque
	// blob for the peer. It may be called before or after the connection is set up.
	Describe(idx, h int, b Buffer) ([]byte, error)
	// Finish imports the peer's blobs, builds and wires the connection's engine connection
	// (Host.Wire) and returns what the device connection needs.
	Finish(s Setup) (Connected, error)
	// ImportRegistered turns the blob the peer (pid) described for a buffer of
	// mscclppRegisterBuffer (handle Registered) over connection idx into a registration, and
	// the address an application here uses for it (nil when not addressable here).
	ImportRegistered(idx, peerPid int, blob []byte) (engine.Reg, unsafe.Pointer, error)
	// Write copies size bytes of src to offset off of a peer's Registered registration over
	// connection idx (mscclppRegisteredBufferWrite); the connection is set up.
	Write(idx int, rec engine.RegRecord, off uint64, src unsafe.Pointer, size uint64, stream uintptr) error
	// Close releases everything; the proxies are stopped and no host call is inside a context.
	Close() error

	// Stopped completes the work still in flight once the proxies stopped (this rank's writes);
	// mscclppProxyStop ends with a barrier after every rank's.
	Stopped() error
	// Abort, called by mscclppCommDestroy before the proxies stop (their contexts already marked
	// closing), makes every send that waits for a peer (a full socket or send queue) give up at
	// once and tells the peers, where it can, that this side closes. Destroy then waits for no peer.
	Abort()
	// SetUp acts once mscclppConnectionSetup's closing barrier passed, when every peer has set up
	// its side of every connection (e.g. start heartbeats).
	SetUp()
	// Mode is the communicator's mode as this transport sees it (CUDA mode), or "" for no opinion.
	Mode() string
}

// Defaults are the capabilities a transport lacks, for it to embed: nothing in flight, nothing
// to abort, nothing after setup, no opinion on the mode.
type Defaults struct{}

// Stopped has nothing to complete.
func (Defaults) Stopped() error { return nil }

// Abort has nothing to give up.
func (Defaults) Abort() {}

// SetUp has nothing to start.
func (Defaults) SetUp() {}

// Mode has no opinion.
func (Defaults) Mode() string { return "" }

// Entry is one transport in the registry (impl/registry.go).
type Entry struct {
	ID     ID
	Name   string
	Subsys logx.Subsys // the logging subsystem of its INFO lines
	// New makes the transport's instance for one communicator (at its first connection over it).
	New func(h *Host) (Transport, error)
	// Init, when set, runs at every mscclppCommInitRank (e.g. to check settings that make init fail).
	Init func(h *Host) error
	// Settings names the environment variables the transport reads: the core reads them (and
	// logs each), the transport parses them from Host.Setting and holds their defaults.
	Settings []string
}

// ImportAll imports the peer's blobs of s by handle with imp: how a transport's Finish begins.
func ImportAll(s Setup, imp func(h int, blob []byte) (engine.Reg, error)) ([]engine.Reg, error) {
	remote := make([]engine.Reg, len(s.Blobs))
	for h, blob := range s.Blobs {
		r, err := imp(h, blob)
		if err != nil {
			return nil, fmt.Errorf("handle %d: %w", h, err)
		}
		remote[h] = r
	}
	return remote, nil
}

// LocalRegs is this rank's registrations of s as the engine sees them, through reg.
func LocalRegs(s Setup, reg func(Buffer) engine.Reg) []engine.Reg {
	local := make([]engine.Reg, len(s.Local))
	for h, b := range s.Local {
		local[h] = reg(b)
	}
	return local
}

// Wire builds the engine connection of s over its context with its registrations (local
// this rank's, remote the peer's) and publishes it to the proxy. remoteEpoch is the peer's
// signal slot where this process addresses it (SHM-style signals store into it), else nil.
func (h *Host) Wire(s Setup, local, remote []engine.Reg, remoteEpoch unsafe.Pointer) *engine.Conn {
	conn := s.Ctx.NewConn(h.Eng, h.DevConns, s.Idx, s.Peer, s.Tag)
	conn.SetLocal(local)
	var remoteProxyEpoch unsafe.Pointer
	if remoteEpoch != nil {
		remoteProxyEpoch = unsafe.Add(remoteEpoch, 8)
	}
	conn.SetRemote(remote, remoteProxyEpoch, s.Pid)
	return conn
}
