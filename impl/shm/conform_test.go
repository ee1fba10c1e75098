//go:build mscclpp_testhooks

package shm

import (
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the SHM transport (connections without an eager ring: puts of up to
// SHM_COPY_LOCKED bytes go with their signal under one acquisition of the engine's signal lock),
// on two connections of one context, passes the engine's conformance suite.
func TestConformance(t *testing.T) {
	const size = 1 << 16
	tc := newTestConn(size)
	defer tc.free()
	conn := func(k int) *conform.Conn {
		return &conform.Conn{
			C:           tc.conn(k),
			Size:        size,
			Epoch:       func() uint64 { return conform.Word(tc.peerEpoch(k)) },
			SetSrc:      func(off uint64, b []byte) { copy(unsafe.Slice((*byte)(unsafe.Add(tc.src[k], off)), len(b)), b) },
			DstWord:     func(off uint64) uint64 { return conform.Word(unsafe.Add(tc.dst[k], off)) },
			HostSignals: true,
			Waits:       true,
			PeerExits:   true,
		}
	}
	c := conn(0)
	c.Other = conn(1)
	conform.Run(t, c)
}
