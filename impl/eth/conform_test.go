//go:build mscclpp_testhooks

package eth

import (
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the Ethernet transport in host mode, on two connections of one context joined
// to their peers' by TCP over 127.0.0.1 (receive threads and waits read the frames), passes the
// engine's conformance suite.
func TestConformance(t *testing.T) {
	const size = 1 << 16
	p := newTestPair(size, 30000)
	if p == nil {
		t.Fatal("the harness's connections did not start")
	}
	defer p.free()
	c := p.conn(0, size)
	c.Other = p.conn(1, size)
	conform.Run(t, c)
}
