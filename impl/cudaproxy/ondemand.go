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

// OnDemand holds the CUDA-mode proxies of a transport that runs in host mode until a
// connection's buffer is device memory (Ethernet, IB): one per GPU the connections' buffers live
// on, started at the first connection over that GPU's memory, so that each connection's FIFO
// head and tail and its epochs are in its own GPU's memory. A connection without a buffer goes
// to the first proxy, once one runs.
type OnDemand struct {
	// Name is the transport's name and Means what CUDA mode means for it: the INFO line when
	// a proxy starts.
	Name, Means string
	Ops         unsafe.Pointer                            // the transport's CUDA-mode engOps table
	State       func(state unsafe.Pointer) unsafe.Pointer // a context's transport state over cuda's proxy state; nil: that state itself

	proxies []*Proxy       // in the order they started, one per GPU
	of      map[int]*Proxy // by connection index: the proxy serving it
}

// Serves reports whether a connection with buffer p goes through a CUDA-mode proxy, and on
// which device: p is device memory, or there is no buffer and a proxy runs already.
func (o *OnDemand) Serves(p unsafe.Pointer) (cuda.Device, bool) {
	if dev, ok := DeviceOf(p); ok {
		return dev, true
	}
	if p == nil && len(o.proxies) > 0 {
		return o.proxies[0].Dev, true
	}
	return cuda.Device{}, false
}

// Declare attaches connection d to dev's proxy (its counters in dev's memory, its triggers
// pushed by kernels into that proxy's FIFO), starting the proxy at dev's first connection.
func (o *OnDemand) Declare(h *transport.Host, d transport.Decl, dev cuda.Device) (transport.Endpoint, error) {
	px := o.on(dev.Ordinal)
	if px == nil {
		var err error
		if px, err = o.start(h, dev); err != nil {
			return transport.Endpoint{}, err
		}
	}
	if o.of == nil {
		o.of = map[int]*Proxy{}
	}
	o.of[d.Idx] = px
	return transport.Endpoint{Ctx: px.Ctx, Epoch: px.Attach(h.DevConns, d.Idx, d.Peer, d.Tag, d.Local)}, nil
}

// on returns the proxy of device ordinal, or nil.
func (o *OnDemand) on(ordinal int) *Proxy {
	for _, px := range o.proxies {
		if px.Dev.Ordinal == ordinal {
			return px
		}
	}
	return nil
}

// start starts the proxy of dev.
func (o *OnDemand) start(h *transport.Host, dev cuda.Device) (*Proxy, error) {
	px, err := New(dev, h.Rank)
	if err != nil {
		return nil, err
	}
	state := o.State
	if state == nil {
		state = func(s unsafe.Pointer) unsafe.Pointer { return s }
	}
	if _, err := px.Start(h.Eng, o.Ops, state); err != nil {
		px.Free()
		return nil, fmt.Errorf("%s transport in CUDA mode on device %d: %w", o.Name, dev.Ordinal, err)
	}
	o.proxies = append(o.proxies, px)
	logx.Infof(logx.Net, "rank %d: %s transport in CUDA mode on device %d: %s", h.Rank, o.Name, dev.Ordinal, o.Means)
	return px, nil
}

// Of returns the proxy serving connection idx, or nil (a host-mode connection).
func (o *OnDemand) Of(idx int) *Proxy { return o.of[idx] }

// Proxies returns the running proxies, one per GPU, in the order they started.
func (o *OnDemand) Proxies() []*Proxy { return o.proxies }

// Mode says whether device buffers put the transport in CUDA mode (a transport's Mode).
func (o *OnDemand) Mode() string {
	if len(o.proxies) > 0 {
		return "CUDA mode"
	}
	return ""
}

// Sync waits, for every proxy, until each copy it enqueued is done (the proxies must be
// stopped), saying first whether its thread was bound near its GPU.
func (o *OnDemand) Sync() error {
	for _, px := range o.proxies {
		px.LogBinding()
		if err := px.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// CloseContexts closes every proxy's context: no call is inside one afterwards.
func (o *OnDemand) CloseContexts() {
	for _, px := range o.proxies {
		px.Ctx.Close()
	}
}

// Free frees every proxy (after CloseContexts), leaving none.
func (o *OnDemand) Free() {
	for _, px := range o.proxies {
		px.Free()
	}
	o.proxies, o.of = nil, nil
}
