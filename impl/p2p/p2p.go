// Package p2p is the P2P transport of CUDA mode between GPUs of one node:
// registrations exchanged as CUDA IPC handles, puts and signals as
// asynchronous copies on the proxy's streams (cuda/p2p.c), the trigger FIFO
// in pinned host memory with its head in device memory. The first P2P
// connection puts the communicator in CUDA mode.
package p2p

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// ID is mscclppTransportP2P.
const ID transport.ID = 0

// Entry registers the transport; its Init reads MSCCLPP_DEVICE at every mscclppCommInitRank.
var Entry = transport.Entry{ID: ID, Name: "P2P", New: newP2P, Init: func(*transport.Host) error {
	_, err := devicePolicy(true)
	return err
}}

// cudaState is what a communicator holds in CUDA mode.
type cudaState struct {
	dev      cuda.Device
	block    uint64 // device memory: MaxConns signal epochs, then MaxConns wait counters
	p2p      *engine.Ctx
	p2pMem   unsafe.Pointer // pinned host memory holding the P2P context and its FIFO
	p2pState unsafe.Pointer // the P2P transport's CUDA context, stream and device tail
	devHead  uint64         // device memory: the P2P FIFO's head
	ipc      map[cuda.IpcHandle]uint64
}

const epochBytes, waitBytes = 16, 8

// p2p is the transport's instance for one communicator.
type p2p struct {
	h      *transport.Host
	policy int
	cuda   *cudaState // CUDA mode only (entered at the first P2P connection)
}

func newP2P(h *transport.Host) (transport.Transport, error) {
	policy, err := devicePolicy(false)
	if err != nil {
		return nil, err
	}
	return &p2p{h: h, policy: policy}, nil
}

// Mode says whether the communicator entered CUDA mode.
func (c *p2p) Mode() string {
	if c.cuda != nil {
		return "CUDA mode"
	}
	return ""
}

func (c *p2p) Check(peer int, _ *string) error {
	if c.policy == deviceHost {
		return status.Errorf(status.InvalidUsage, "P2P transport to rank %d needs CUDA mode, and MSCCLPP_DEVICE=host: use mscclppTransportSHM", peer)
	}
	if !c.h.OnMyNode(peer) {
		return status.Errorf(status.InvalidUsage, "P2P transport to rank %d: that rank is on another host (CUDA IPC works within a node)", peer)
	}
	return nil
}

// Connect sets up connection idx's device-side fields over P2P (entering CUDA mode first).
func (c *p2p) Connect(idx, peer, tag int, local unsafe.Pointer, _ *string) (transport.Endpoint, error) {
	if err := c.enterCUDA(local); err != nil {
		return transport.Endpoint{}, err
	}
	ctx, err := c.p2pCtx()
	if err != nil {
		return transport.Endpoint{}, err
	}
	st := c.cuda
	epoch := engine.DevPtr(st.epoch(idx))
	c.h.DevConns.SetIdentity(idx, peer, tag, local, epoch, engine.DevPtr(st.wait(idx)))
	ctx.AttachDevice(c.h.DevConns, idx, st.devHead, cuda.P2PTail(st.p2pState))
	return transport.Endpoint{Ctx: ctx, Epoch: epoch}, nil
}

// ipcDesc is device memory on the wire: the IPC handle of its allocation, the offset and size.
type ipcDesc struct {
	size, offset uint64
	ipc          [64]byte
}

const ipcDescBytes = 16 + 64

// Describe describes device memory for a peer: the IPC handle of its allocation and the offset.
func (c *p2p) Describe(_, _ int, b transport.Buffer) ([]byte, error) {
	h, off, err := c.cuda.dev.IpcHandleOf(uint64(uintptr(b.Ptr)))
	if err != nil {
		return nil, err
	}
	out := binary.LittleEndian.AppendUint64(nil, b.Size)
	out = binary.LittleEndian.AppendUint64(out, off)
	return append(out, h[:]...), nil
}

func (c *p2p) Import(_, _ int, blob []byte) (engine.Reg, error) {
	if len(blob) != ipcDescBytes {
		return engine.Reg{}, status.Errorf(status.RemoteError, "malformed P2P registration (%d bytes, want %d)", len(blob), ipcDescBytes)
	}
	d := ipcDesc{size: binary.LittleEndian.Uint64(blob), offset: binary.LittleEndian.Uint64(blob[8:])}
	copy(d.ipc[:], blob[16:])
	a, err := c.openIpc(d)
	if err != nil {
		return engine.Reg{}, err
	}
	return engine.Reg{Addr: a, Size: d.size}, nil
}

func (c *p2p) Finish(int, *engine.Conn, []engine.Reg, []engine.Reg, [][]byte) error { return nil }

// LocalReg: device memory, never touched by the host.
func (c *p2p) LocalReg(b transport.Buffer) engine.Reg {
	return engine.Reg{Addr: uint64(uintptr(b.Ptr)), Size: b.Size, Pid: os.Getpid()}
}

func (c *p2p) AppPointer(r engine.Reg) unsafe.Pointer { return engine.DevPtr(r.Addr) }

func (c *p2p) PutPath([]engine.Reg) string {
	return "cuMemcpyDtoDAsync into the peer's buffer opened through CUDA IPC"
}

// Write copies size bytes from device memory src to offset off of a peer's registration, on stream.
func (c *p2p) Write(rec engine.RegRecord, off uint64, src unsafe.Pointer, size uint64, stream uintptr) error {
	if off > rec.Size() || size > rec.Size()-off {
		return status.Errorf(status.InvalidArgument, "write of %d bytes at offset %d exceeds the peer's registered %d bytes", size, off, rec.Size())
	}
	return c.cuda.dev.CopyAsync(rec.Addr()+off, uint64(uintptr(src)), size, stream)
}

func (c *p2p) Contexts() []*engine.Ctx {
	if c.cuda == nil || c.cuda.p2p == nil {
		return nil
	}
	return []*engine.Ctx{c.cuda.p2p}
}

// Stopped reports the proxy's CPU binding and waits for the copies it enqueued.
func (c *p2p) Stopped() error {
	c.logBinding()
	return c.syncCUDA()
}

func (c *p2p) Close() error {
	c.freeCUDA()
	return nil
}

// The MSCCLPP_DEVICE settings.
const (
	deviceAuto = iota // CUDA mode at the first P2P connection, which needs a GPU
	deviceHost        // host mode only: P2P is refused
	deviceCUDA        // as auto, but the driver must load and initialise at init
)

// devicePolicy reads MSCCLPP_DEVICE; atInit also says in an INFO line what it means now and
// checks that the driver works where the setting demands it. The mode itself is decided at the
// first P2P connection (enterCUDA), not at init: CUDA 11 runtimes create the context lazily, so
// at mscclppCommInitRank the thread may have none yet even after cudaSetDevice.
func devicePolicy(atInit bool) (int, error) {
	v := strings.ToLower(os.Getenv("MSCCLPP_DEVICE"))
	if !atInit {
		switch v {
		case "host":
			return deviceHost, nil
		case "cuda":
			return deviceCUDA, nil
		}
		return deviceAuto, nil
	}
	switch v {
	case "host":
		logx.Infof(logx.Init, "host mode: MSCCLPP_DEVICE=host")
		return deviceHost, nil
	case "", "auto":
		switch {
		case !cuda.InUse():
			logx.Infof(logx.Init, "host mode: the application has not loaded the CUDA driver (a P2P connection would look for a GPU)")
		default:
			if err := cuda.Init(); err != nil {
				logx.Infof(logx.Init, "host mode: %v", err)
			} else {
				logx.Infof(logx.Init, "host mode until the first P2P connection, which enters CUDA mode on its buffer's GPU")
			}
		}
		return deviceAuto, nil
	case "cuda":
		if err := cuda.Init(); err != nil {
			code := status.CodeOf(err)
			if code == status.InternalError {
				code = status.InvalidUsage
			}
			return deviceCUDA, &status.Error{Code: code, Msg: "MSCCLPP_DEVICE=cuda, but CUDA is unavailable: " + err.Error(), Err: err}
		}
		return deviceCUDA, nil
	default:
		return deviceAuto, status.Errorf(status.InvalidArgument, "MSCCLPP_DEVICE=%q: want host, cuda or auto", v)
	}
}

// enterCUDA switches the communicator to CUDA mode on its first P2P connection: the GPU is the
// one whose context allocated buf (device memory), else the context current on the calling thread.
func (c *p2p) enterCUDA(buf unsafe.Pointer) error {
	if c.cuda != nil {
		return nil
	}
	var dev cuda.Device
	var err error
	if buf != nil {
		var perr error
		if dev, perr = cuda.ProbePointer(uint64(uintptr(buf))); perr != nil {
			dev, err = cuda.Probe()
			if err != nil {
				err = fmt.Errorf("%w; nor does the buffer %p tell (%v)", err, buf, perr)
			}
		}
	} else {
		dev, err = cuda.Probe()
	}
	if err != nil {
		return &status.Error{Code: status.InvalidUsage, Msg: "P2P needs CUDA mode, and no GPU was found: " + err.Error(), Err: err}
	}
	return c.initCUDA(dev)
}

// initCUDA allocates the device memory every connection's counters live in.
func (c *p2p) initCUDA(dev cuda.Device) error {
	st := &cudaState{dev: dev, ipc: map[cuda.IpcHandle]uint64{}}
	size := uint64(engine.MaxConns * (epochBytes + waitBytes))
	blk, err := dev.MemAlloc(size)
	if err != nil {
		return fmt.Errorf("rank %d: signal epochs in device memory: %w", c.h.Rank, err)
	}
	if err := dev.Memset(blk, 0, size); err != nil {
		dev.MemFree(blk)
		return fmt.Errorf("rank %d: clear signal epochs: %w", c.h.Rank, err)
	}
	st.block = blk
	c.cuda = st
	logx.SetDevice(dev.Ordinal)
	logx.Infof(logx.Init, "rank %d: CUDA mode on device %d (%s)", c.h.Rank, dev.Ordinal, dev.BusID)
	return nil
}

func (st *cudaState) epoch(i int) uint64 { return st.block + uint64(i*epochBytes) }
func (st *cudaState) wait(i int) uint64 {
	return st.block + uint64(engine.MaxConns*epochBytes+i*waitBytes)
}

// p2pCtx returns the P2P proxy context, creating it (pinned FIFO, device head and tail,
// a stream, the CPUs near the GPU) on first use.
func (c *p2p) p2pCtx() (*engine.Ctx, error) {
	st := c.cuda
	if st.p2p != nil {
		return st.p2p, nil
	}
	numa, cpus, err := cuda.Topology(st.dev.BusID)
	if err != nil {
		logx.Infof(logx.Init, "rank %d: GPU topology incomplete: %v", c.h.Rank, err)
	}
	if len(cpus) > 0 {
		logx.Infof(logx.Init, "rank %d: device %s is on NUMA node %d, CPUs %v", c.h.Rank, st.dev.BusID, numa, cpus)
	}
	state, err := cuda.NewP2PState(st.dev, cpus, numa)
	if err != nil {
		return nil, fmt.Errorf("P2P proxy streams: %w", err)
	}
	// the proxy polls the FIFO without pause: keep its pages next to the GPU's CPUs
	mem, placed, err := st.dev.HostAllocOnNode(engine.CtxSize, numa)
	if err != nil {
		cuda.FreeP2PState(state)
		return nil, fmt.Errorf("P2P FIFO in pinned memory: %w", err)
	}
	if numa >= 0 && !placed {
		logx.Infof(logx.Init, "rank %d: the P2P FIFO could not be placed on NUMA node %d (no memory policy here); carrying on", c.h.Rank, numa)
	}
	head, err := st.dev.MemAlloc(8)
	if err == nil {
		err = st.dev.Memset(head, 0, 8)
	}
	if err != nil {
		st.dev.HostFree(mem)
		cuda.FreeP2PState(state)
		return nil, fmt.Errorf("P2P FIFO head in device memory: %w", err)
	}
	st.p2pState, st.p2pMem, st.devHead = state, mem, head
	x, err := engine.NewCtxAt(c.h.Eng, mem, cuda.P2POps(), state, head)
	if err != nil {
		return nil, fmt.Errorf("P2P proxy context: %w", err)
	}
	st.p2p = x
	return st.p2p, nil
}

// openIpc maps a peer's device allocation (once per allocation) and returns the described address.
func (c *p2p) openIpc(d ipcDesc) (uint64, error) {
	if c.cuda == nil {
		return 0, status.Errorf(status.InvalidUsage, "the peer registered device memory, but this rank runs in host mode")
	}
	h := cuda.IpcHandle(d.ipc)
	base, ok := c.cuda.ipc[h]
	if !ok {
		var err error
		if base, err = c.cuda.dev.IpcOpen(h); err != nil {
			return 0, err
		}
		c.cuda.ipc[h] = base
	}
	return base + d.offset, nil
}

// syncCUDA waits until every copy the P2P proxy enqueued (data, signals, FIFO tail) is done, as
// upstream's proxy does before it exits; proxies must be stopped.
func (c *p2p) syncCUDA() error {
	if c.cuda == nil || c.cuda.p2pState == nil {
		return nil
	}
	if err := cuda.SyncP2PState(c.cuda.p2pState); err != nil {
		return fmt.Errorf("rank %d: waiting for the P2P proxy's copies: %w", c.h.Rank, err)
	}
	return nil
}

// freeCUDA releases everything CUDA mode allocated; proxies must be stopped. The proxy's streams
// are synchronized and freed first: their copies write into the peers' IPC mappings, which are
// closed only after that.
func (c *p2p) freeCUDA() {
	st := c.cuda
	if st == nil {
		return
	}
	warn := func(what string, err error) {
		if err != nil {
			logx.Warnf("rank %d: CUDA teardown: %s: %v", c.h.Rank, what, err)
		}
	}
	if st.p2p != nil {
		st.p2p.Invalidate()
		warn("P2P streams", cuda.FreeP2PState(st.p2pState))
		warn("P2P FIFO", st.dev.HostFree(st.p2pMem))
		warn("P2P FIFO head", st.dev.MemFree(st.devHead))
		st.p2p, st.p2pState, st.p2pMem = nil, nil, nil
	}
	for _, base := range st.ipc {
		warn("closing a peer's IPC mapping", st.dev.IpcClose(base))
	}
	warn("signal epochs", st.dev.MemFree(st.block))
	c.cuda = nil
}

// logBinding reports, once the P2P proxy thread has started, whether it was bound near its GPU.
func (c *p2p) logBinding() {
	if c.cuda == nil || c.cuda.p2pState == nil {
		return
	}
	if done, err := cuda.BindResult(c.cuda.p2pState); done && err != nil {
		logx.Infof(logx.Init, "rank %d: the P2P proxy was not bound near its GPU (%v); carrying on unbound", c.h.Rank, err)
	}
}
