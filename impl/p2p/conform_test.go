//go:build mscclpp_testhooks

package p2p

import (
	"encoding/binary"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the P2P transport (CUDA mode on the stand-in driver: only the proxy
// signals, a host thread puts) passes the engine's conformance suite.
func TestConformance(t *testing.T) {
	f := newFixture(t, nil)
	epoch := f.h.peerEpoch()
	conform.Run(t, &conform.Conn{
		C:         f.h.engConn(),
		Size:      bufSize,
		Epoch:     func() uint64 { return conform.Word(epoch) },
		SetSrc:    func(off uint64, b []byte) { poke(f.src+off, b) },
		DstWord:   func(off uint64) uint64 { return binary.LittleEndian.Uint64(peek(f.dst+off, 8)) },
		Fails:     "this package's fixture builds one connection per context",
		Waits:     true,
		PeerExits: true,
	})
}
