//go:build mscclpp_testhooks

package shm

import (
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the SHM transport (a connection without an eager ring: puts of up to
// SHM_COPY_LOCKED bytes go with their signal under one acquisition of the engine's signal lock)
// passes the engine's conformance suite.
func TestConformance(t *testing.T) {
	const size = 1 << 16
	tc := newTestConn(size)
	defer tc.free()
	conform.Run(t, &conform.Conn{
		C:           tc.conn(),
		Size:        size,
		Epoch:       func() uint64 { return conform.Word(tc.peerEpoch()) },
		SetSrc:      func(off uint64, b []byte) { copy(unsafe.Slice((*byte)(unsafe.Add(tc.src, off)), len(b)), b) },
		DstWord:     func(off uint64) uint64 { return conform.Word(unsafe.Add(tc.dst, off)) },
		HostSignals: true,
		Fails:       "this package's harness builds one connection per context",
		Waits:       true,
		PeerExits:   true,
	})
}
