package impl

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

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

// The MSCCLPP_DEVICE settings.
const (
	deviceAuto = iota // CUDA mode at the first P2P connection, which needs a GPU
	deviceHost        // host mode only: P2P is refused
	deviceCUDA        // as auto, but the driver must load and initialise at init
)

// devicePolicy reads MSCCLPP_DEVICE. The mode itself is decided at the first P2P connection
// (enterCUDA), not here: CUDA 11 runtimes create the context lazily, so at
// mscclppCommInitRank the thread may have none yet even after cudaSetDevice.
func devicePolicy() (int, error) {
	switch v := strings.ToLower(os.Getenv("MSCCLPP_DEVICE")); v {
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
func (c *Comm) enterCUDA(buf unsafe.Pointer) error {
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
	if err := c.initCUDA(dev); err != nil {
		return err
	}
	c.mode = CUDAMode
	return nil
}

// initCUDA allocates the device memory every connection's counters live in.
func (c *Comm) initCUDA(dev cuda.Device) error {
	st := &cudaState{dev: dev, ipc: map[cuda.IpcHandle]uint64{}}
	size := uint64(engine.MaxConns * (epochBytes + waitBytes))
	blk, err := dev.MemAlloc(size)
	if err != nil {
		return fmt.Errorf("rank %d: signal epochs in device memory: %w", c.rank, err)
	}
	if err := dev.Memset(blk, 0, size); err != nil {
		dev.MemFree(blk)
		return fmt.Errorf("rank %d: clear signal epochs: %w", c.rank, err)
	}
	st.block = blk
	c.cuda = st
	logx.SetDevice(dev.Ordinal)
	logx.Infof(logx.Init, "rank %d: CUDA mode on device %d (%s)", c.rank, dev.Ordinal, dev.BusID)
	return nil
}

func (st *cudaState) epoch(i int) uint64 { return st.block + uint64(i*epochBytes) }
func (st *cudaState) wait(i int) uint64 {
	return st.block + uint64(engine.MaxConns*epochBytes+i*waitBytes)
}

// p2pCtx returns the P2P proxy context, creating it (pinned FIFO, device head and tail,
// a stream, the CPUs near the GPU) on first use.
func (c *Comm) p2pCtx() (*engine.Ctx, error) {
	st := c.cuda
	if st.p2p != nil {
		return st.p2p, nil
	}
	numa, cpus, err := cuda.Topology(st.dev.BusID)
	if err != nil {
		logx.Infof(logx.Init, "rank %d: GPU topology incomplete: %v", c.rank, err)
	}
	if len(cpus) > 0 {
		logx.Infof(logx.Init, "rank %d: device %s is on NUMA node %d, CPUs %v", c.rank, st.dev.BusID, numa, cpus)
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
		logx.Infof(logx.Init, "rank %d: the P2P FIFO could not be placed on NUMA node %d (no memory policy here); carrying on", c.rank, numa)
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
	x, err := engine.NewCtxAt(c.eng, mem, cuda.P2POps(), state, head)
	if err != nil {
		return nil, fmt.Errorf("P2P proxy context: %w", err)
	}
	st.p2p = x
	return st.p2p, nil
}

// connectP2P sets up connection idx's device-side fields over P2P (entering CUDA mode first).
func (c *Comm) connectP2P(idx, remoteRank, tag int, local unsafe.Pointer) (*engine.Ctx, unsafe.Pointer, error) {
	if err := c.enterCUDA(local); err != nil {
		return nil, nil, err
	}
	ctx, err := c.p2pCtx()
	if err != nil {
		return nil, nil, err
	}
	st := c.cuda
	epoch := engine.DevPtr(st.epoch(idx))
	c.devConns.SetIdentity(idx, remoteRank, tag, local, epoch, engine.DevPtr(st.wait(idx)))
	ctx.AttachDevice(c.devConns, idx, st.devHead, cuda.P2PTail(st.p2pState))
	return ctx, epoch, nil
}

// describeIpc describes device memory for a peer: the IPC handle of its allocation and the offset.
func (c *Comm) describeIpc(b buffer) (regDesc, error) {
	h, off, err := c.cuda.dev.IpcHandleOf(uint64(uintptr(b.ptr)))
	if err != nil {
		return regDesc{}, err
	}
	return regDesc{kind: regCudaIpc, size: b.size, offset: off, ipc: h}, nil
}

// openIpc maps a peer's device allocation (once per allocation) and returns the described address.
func (c *Comm) openIpc(d regDesc) (uint64, error) {
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

// cudaWrite copies size bytes from device memory src to offset off of a peer's registration, on stream.
func (c *Comm) cudaWrite(rec engine.RegRecord, off uint64, src unsafe.Pointer, size uint64, stream uintptr) error {
	if off > rec.Size() || size > rec.Size()-off {
		return status.Errorf(status.InvalidArgument, "write of %d bytes at offset %d exceeds the peer's registered %d bytes", size, off, rec.Size())
	}
	return c.cuda.dev.CopyAsync(rec.Addr()+off, uint64(uintptr(src)), size, stream)
}

// syncCUDA waits until every copy the P2P proxy enqueued (data, signals, FIFO tail) is done, as
// upstream's proxy does before it exits; proxies must be stopped.
func (c *Comm) syncCUDA() error {
	if c.cuda == nil || c.cuda.p2pState == nil {
		return nil
	}
	if err := cuda.SyncP2PState(c.cuda.p2pState); err != nil {
		return fmt.Errorf("rank %d: waiting for the P2P proxy's copies: %w", c.rank, err)
	}
	return nil
}

// freeCUDA releases everything CUDA mode allocated; proxies must be stopped. The proxy's streams
// are synchronized and freed first: their copies write into the peers' IPC mappings, which are
// closed only after that.
func (c *Comm) freeCUDA() {
	st := c.cuda
	if st == nil {
		return
	}
	warn := func(what string, err error) {
		if err != nil {
			logx.Warnf("rank %d: CUDA teardown: %s: %v", c.rank, what, err)
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
func (c *Comm) logBinding() {
	if c.cuda == nil || c.cuda.p2pState == nil {
		return
	}
	if done, err := cuda.BindResult(c.cuda.p2pState); done && err != nil {
		logx.Infof(logx.Init, "rank %d: the P2P proxy was not bound near its GPU (%v); carrying on unbound", c.rank, err)
	}
}
