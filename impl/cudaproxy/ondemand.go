package cudaproxy

import (
	"fmt"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// DeviceOf reports whether p is device memory, and of which GPU (only where the application
// loaded the driver: device memory cannot exist otherwise).
func DeviceOf(p unsafe.Pointer) (cuda.Device, bool) {
	if p == nil || !cuda.InUse() {
		return cuda.Device{}, false
	}
	dev, err := cuda.ProbePointer(uint64(uintptr(p)))
	return dev, err == nil
}

// OnDemand is the CUDA-mode proxy of a transport that runs in host mode until a connection's
// buffer is device memory (Ethernet, IB): it starts the proxy then, and serves every later
// connection over device memory, or without a buffer, through it.
type OnDemand struct {
	*Proxy // nil until the first connection over device memory
	// Name is the transport's name and Means what CUDA mode means for it: the INFO line when
	// the proxy starts.
	Name, Means string
	Ops         unsafe.Pointer                            // the transport's CUDA-mode engOps table
	State       func(state unsafe.Pointer) unsafe.Pointer // the context's transport state over cuda's proxy state; nil: that state itself
}

// Serves reports whether a connection with buffer p goes through the CUDA-mode proxy, and on
// which device: p is device memory, or there is no buffer and the proxy runs already.
func (o *OnDemand) Serves(p unsafe.Pointer) (cuda.Device, bool) {
	if dev, ok := DeviceOf(p); ok {
		return dev, true
	}
	return cuda.Device{}, p == nil && o.Proxy != nil
}

// Declare attaches connection d to the proxy (its counters in device memory, its triggers
// pushed by kernels into the proxy's FIFO), starting the proxy on dev at the first call.
func (o *OnDemand) Declare(h *transport.Host, d transport.Decl, dev cuda.Device) (transport.Endpoint, error) {
	if o.Proxy == nil {
		px, err := New(dev, h.Rank)
		if err != nil {
			return transport.Endpoint{}, err
		}
		state := o.State
		if state == nil {
			state = func(s unsafe.Pointer) unsafe.Pointer { return s }
		}
		if _, err := px.Start(h.Eng, o.Ops, state); err != nil {
			px.Free()
			return transport.Endpoint{}, fmt.Errorf("%s transport in CUDA mode: %w", o.Name, err)
		}
		o.Proxy = px
		logx.Infof(logx.Net, "rank %d: %s transport in CUDA mode on device %d: %s", h.Rank, o.Name, dev.Ordinal, o.Means)
	}
	return transport.Endpoint{Ctx: o.Ctx, Epoch: o.Attach(h.DevConns, d.Idx, d.Peer, d.Tag, d.Local)}, nil
}

// Mode says whether device buffers put the transport in CUDA mode (a transport's Mode).
func (o *OnDemand) Mode() string {
	if o.Proxy != nil {
		return "CUDA mode"
	}
	return ""
}
