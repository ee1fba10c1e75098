// Package cudaproxy holds what a CUDA-mode transport's proxy needs, whatever moves its data:
// the device block of signal epochs and wait counters, and a proxy context whose trigger FIFO
// is pinned host memory near the GPU with its head and tail in device memory, served by a
// thread bound near the GPU with the streams of cuda's proxy state (cuda/proxystate.c).
//
// cudaproxy.c (cudaproxy.h) holds the C side those transports' engOps tables share: the
// proxy thread's setup and the FIFO tail's publication, over cuda's proxy state.
// ondemand.go holds what Ethernet and IB share, which start a proxy per GPU at their first
// connection over that GPU's memory.
package cudaproxy

/*
#cgo CFLAGS: -O2 -Wall
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// epochBytes and waitBytes: a connection's signal epochs and its wait counter.
const epochBytes, waitBytes = engine.EpochBytes, 8

// Proxy is one CUDA-mode proxy context and the device memory of its connections' counters.
type Proxy struct {
	Dev   cuda.Device
	rank  int
	block cuda.Block     // device memory: MaxConns signal epochs, then MaxConns wait counters
	State unsafe.Pointer // cuda's proxy state: the context, streams and device tail
	// Transport is the context's transport state over State (what Start's transport returned)
	Transport unsafe.Pointer
	mem       unsafe.Pointer // pinned host memory holding the engine context and its FIFO
	head      uint64         // device memory: the FIFO's head
	// retained: New holds a reference on the primary context (the one the library allocates in)
	retained bool
	Ctx      *engine.Ctx
}

// New retains dev's primary context when that is the context the library allocates in (released
// by Free: the application may drop its own references meanwhile) and allocates the counters'
// block in dev's memory for rank's connections.
func New(dev cuda.Device, rank int) (*Proxy, error) {
	retained, err := dev.RetainPrimary()
	if err != nil {
		return nil, fmt.Errorf("rank %d: retaining the primary context of device %d: %w", rank, dev.Ordinal, err)
	}
	release := func() {
		if retained {
			dev.ReleasePrimary()
		}
	}
	// on a large-page boundary: IB registers it for the NIC (a dma-buf of its pages)
	size := uint64(engine.MaxConns * (epochBytes + waitBytes))
	blk, err := dev.AllocBlock(size)
	if err == nil {
		if err = dev.Memset(blk.Ptr, 0, size); err != nil {
			dev.FreeBlock(blk)
		}
	}
	if err != nil {
		release()
		return nil, fmt.Errorf("rank %d: signal epochs in device memory: %w", rank, err)
	}
	return &Proxy{Dev: dev, rank: rank, block: blk, retained: retained}, nil
}

// Epoch is the device address of connection i's signal epoch.
func (p *Proxy) Epoch(i int) uint64 { return p.block.Ptr + uint64(i*epochBytes) }

// Wait is the device address of connection i's wait counter.
func (p *Proxy) Wait(i int) uint64 {
	return p.block.Ptr + uint64(engine.MaxConns*epochBytes+i*waitBytes)
}

// Start creates the proxy context on first use, for a transport's ops table (a const engOps*)
// whose per-context state transport(state) returns.
func (p *Proxy) Start(eng *engine.Comm, ops unsafe.Pointer, transport func(state unsafe.Pointer) unsafe.Pointer) (*engine.Ctx, error) {
	if p.Ctx != nil {
		return p.Ctx, nil
	}
	numa, cpus, err := cuda.Topology(p.Dev.BusID)
	if err != nil {
		logx.Infof(logx.Init, "rank %d: GPU topology incomplete: %v", p.rank, err)
	}
	if len(cpus) > 0 {
		logx.Infof(logx.Init, "rank %d: device %s is on NUMA node %d, CPUs %v", p.rank, p.Dev.BusID, numa, cpus)
	}
	state, err := cuda.NewProxyState(p.Dev, cpus, numa)
	if err != nil {
		return nil, fmt.Errorf("proxy streams: %w", err)
	}
	// the proxy polls the FIFO without pause: keep its pages next to the GPU's CPUs
	mem, placed, err := p.Dev.HostAllocOnNode(engine.CtxSize, numa)
	if err != nil {
		cuda.FreeProxyState(state)
		return nil, fmt.Errorf("FIFO in pinned memory: %w", err)
	}
	if numa >= 0 && !placed {
		logx.Infof(logx.Init, "rank %d: the FIFO could not be placed on NUMA node %d (no memory policy here); carrying on", p.rank, numa)
	}
	head, err := p.Dev.MemAlloc(8)
	if err == nil {
		err = p.Dev.Memset(head, 0, 8)
	}
	if err != nil {
		p.Dev.HostFree(mem)
		cuda.FreeProxyState(state)
		return nil, fmt.Errorf("FIFO head in device memory: %w", err)
	}
	p.State, p.mem, p.head, p.Transport = state, mem, head, transport(state)
	x, err := engine.NewCtxAt(eng, mem, ops, p.Transport, head)
	if err != nil {
		return nil, fmt.Errorf("proxy context: %w", err)
	}
	p.Ctx = x
	return x, nil
}

// Attach sets up entry idx of d for a connection to peer served by the proxy: counters in the
// device block, FIFO head and tail in device memory. It returns the epoch's device address.
func (p *Proxy) Attach(d engine.DevConns, idx, peer, tag int, local unsafe.Pointer) unsafe.Pointer {
	epoch := engine.DevPtr(p.Epoch(idx))
	d.SetIdentity(idx, peer, tag, local, epoch, engine.DevPtr(p.Wait(idx)))
	p.Ctx.AttachDevice(d, idx, p.head, cuda.ProxyTail(p.State))
	return epoch
}

// Sync waits until every copy the proxy enqueued (data, signals, FIFO tail) is done, as
// upstream's proxy does before it exits; the proxy must be stopped.
func (p *Proxy) Sync() error {
	if p == nil || p.State == nil {
		return nil
	}
	if err := cuda.SyncProxyState(p.State); err != nil {
		return fmt.Errorf("rank %d: waiting for the proxy's copies: %w", p.rank, err)
	}
	return nil
}

// LogBinding reports, once the proxy thread has started, whether it was bound near its GPU.
func (p *Proxy) LogBinding() {
	if p == nil || p.State == nil {
		return
	}
	if done, err := cuda.BindResult(p.State); done && err != nil {
		logx.Infof(logx.Init, "rank %d: the proxy was not bound near its GPU (%v); carrying on unbound", p.rank, err)
	}
}

// FreeContext closes the proxy context and frees its streams, FIFO and head (streams first:
// they are synchronized as they are freed); the proxy must be stopped. The counters' block
// stays until Free.
func (p *Proxy) FreeContext() {
	if p == nil || p.Ctx == nil {
		return
	}
	p.Ctx.Invalidate()
	p.warn("proxy streams", cuda.FreeProxyState(p.State))
	p.warn("FIFO", p.Dev.HostFree(p.mem))
	p.warn("FIFO head", p.Dev.MemFree(p.head))
	p.Ctx, p.State, p.mem, p.Transport = nil, nil, nil, nil
}

// Free frees the counters' block (after FreeContext; peers that mapped it through CUDA IPC must
// have closed their mappings) and releases the primary context New retained.
func (p *Proxy) Free() {
	if p == nil || p.block.Ptr == 0 {
		return
	}
	p.FreeContext()
	p.warn("signal epochs", p.Dev.FreeBlock(p.block))
	if p.retained {
		p.warn("releasing the primary context", p.Dev.ReleasePrimary())
	}
	p.block, p.retained = cuda.Block{}, false
}

func (p *Proxy) warn(what string, err error) {
	if err != nil {
		logx.Warnf("rank %d: CUDA teardown: %s: %v", p.rank, what, err)
	}
}
