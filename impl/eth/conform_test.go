//go:build mscclpp_testhooks

package eth

import (
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the Ethernet transport, on two connections of one context joined to their
// peers' by TCP over 127.0.0.1 (receive threads and waits read the frames), passes the engine's
// conformance suite in host mode and in CUDA mode (the sender's buffers device memory of the
// stand-in driver, sent through pinned staging buffers; only the proxy signals).
func TestConformance(t *testing.T) {
	const size = 1 << 16
	for _, mode := range []string{"HostMode", "CUDAMode"} {
		t.Run(mode, func(t *testing.T) {
			var fake *conform.FakeCUDA
			if mode == "CUDAMode" {
				fake = conform.NewFakeCUDA(t)
			}
			p, err := newTestPair(size, 30000, fake)
			if err != nil {
				t.Fatal(err)
			}
			defer p.free()
			c, o := p.conn(0, size), p.conn(1, size)
			if fake != nil {
				c, o = p.cudaConn(0, size), p.cudaConn(1, size)
			}
			c.Other = o
			conform.Run(t, c)
		})
	}
}
