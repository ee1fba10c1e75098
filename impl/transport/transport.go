// Package transport is the contract between the communicator core and its
// transports (SHM, P2P, ...): the Transport interface a transport implements,
// the Host a communicator offers it, and the registry of transports by their
// mscclppTransport_t value, like NCCL's ncclTransport array. The core never
// names a transport; each transport lives in its own package and is listed
// once in impl/registry.go.
package transport

import (
	"fmt"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/nodeshm"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// ID is an mscclppTransport_t value.
type ID int32

// Host is what a communicator offers its transports: who is where, the node segment, the
// engine state and the array of device connections handed to applications.
type Host struct {
	Rank, NRanks int
	HostIDs      []string    // by rank
	LocalIdx     int         // this rank's index among the ranks of its node
	LocalOf      map[int]int // rank -> index on this node, for the ranks of this node
	Node         *nodeshm.Segment
	Eng          *engine.Comm
	DevConns     engine.DevConns
	ListenIP     string        // the IP of this rank's bootstrap listener: peers reach it there
	Timeout      time.Duration // the bootstrap timeout: the bound of a transport's setup waits
}

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

// Registered is the handle Describe and Import are given for a buffer of mscclppRegisterBuffer:
// not a handle of the connection (puts never name it), written by mscclppRegisteredBufferWrite.
const Registered = -1

// Buffer is one registration of a connection: handle 0 is the signal slot, 1 the connect buffer.
type Buffer struct {
	Ptr  unsafe.Pointer
	Size uint64
}

// Endpoint is the local side of one connection as its transport set it up.
type Endpoint struct {
	Ctx   *engine.Ctx    // the proxy context serving the connection
	Epoch unsafe.Pointer // this rank's signal slot of the connection (registered as handle 0)
}

// Transport is one transport of one communicator. The core calls it under its control-plane lock.
type Transport interface {
	// Check says whether a connection to peer can be served (nil) or why not; dev is the
	// device name the application passed (mscclppConnect's ibDev), or nil.
	Check(peer int, dev *string) error
	// Connect sets up the local side of connection idx (entry idx of Host.DevConns) to peer;
	// dev is what Check was given.
	Connect(idx, peer, tag int, local unsafe.Pointer, dev *string) (Endpoint, error)
	// Describe is registration b (handle h, or Registered) of connection idx as an opaque
	// blob for the peer. It may be called before or after the connection is set up.
	Describe(idx, h int, b Buffer) ([]byte, error)
	// Import turns a blob the peer (pid) described for handle h (or Registered) of connection
	// idx into a registration usable here.
	Import(idx, h, peerPid int, blob []byte) (engine.Reg, error)
	// Finish completes connection idx once both sides' registrations are installed in conn.
	Finish(idx int, conn *engine.Conn, local, remote []engine.Reg, remoteBlobs [][]byte) error
	// LocalReg is how this rank's own registration b looks to the engine (e.g. not host-addressable).
	LocalReg(b Buffer) engine.Reg
	// AppPointer is the address an application on this rank uses for a peer's registration.
	AppPointer(r engine.Reg) unsafe.Pointer
	// PutPath says in words how puts to a peer's registrations travel (an INFO line).
	PutPath(remote []engine.Reg) string
	// Write copies size bytes of src to offset off of a peer's Registered registration over
	// connection idx (mscclppRegisteredBufferWrite); the connection is set up.
	Write(idx int, rec engine.RegRecord, off uint64, src unsafe.Pointer, size uint64, stream uintptr) error
	// Contexts are the proxy contexts this transport created.
	Contexts() []*engine.Ctx
	// Stopped runs once the proxies stopped: complete the work they left in flight (this
	// rank's writes); mscclppProxyStop ends with a barrier after every rank's Stopped.
	Stopped() error
	// Close releases everything; the proxies are stopped and no host call is inside a context.
	Close() error
}

// SetUpper is implemented by transports that act once mscclppConnectionSetup's closing barrier
// passed, when every peer has set up its side of every connection (e.g. start heartbeats).
type SetUpper interface {
	SetUp()
}

// Moder is implemented by transports that change the communicator's mode (CUDA mode).
type Moder interface {
	// Mode is the communicator's mode as this transport sees it, or "" for no opinion.
	Mode() string
}

// Entry is one transport in the registry.
type Entry struct {
	ID   ID
	Name string
	// New makes the transport's instance for one communicator (at its first connection over it).
	New func(h *Host) (Transport, error)
	// Init, when set, runs at every mscclppCommInitRank (e.g. to read settings that make init fail).
	Init func(h *Host) error
}

var (
	mu      sync.RWMutex
	entries = map[ID]Entry{}
)

// Register adds e to the registry; registering an ID twice is a programming error.
func Register(e Entry) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := entries[e.ID]; dup {
		panic(fmt.Sprintf("transport %d (%s) registered twice", e.ID, e.Name))
	}
	entries[e.ID] = e
}

// Lookup returns the registered transport id.
func Lookup(id ID) (Entry, error) {
	mu.RLock()
	defer mu.RUnlock()
	if e, ok := entries[id]; ok {
		return e, nil
	}
	return Entry{}, status.Errorf(status.InvalidUsage, "unknown transport %d (this library has %s)", int32(id), names())
}

// All returns the registered transports by ID.
func All() []Entry {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Name is the registered name of id, or "transport(id)".
func Name(id ID) string {
	if e, err := Lookup(id); err == nil {
		return e.Name
	}
	return fmt.Sprintf("transport(%d)", int32(id))
}

func names() string {
	s := ""
	for _, e := range All() {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s=%d", e.Name, int32(e.ID))
	}
	return s
}
