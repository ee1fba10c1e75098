//go:build mscclpp_testhooks

package p2p

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the P2P transport (CUDA mode on the stand-in driver: only the proxy
// signals, a host thread puts), on two connections of one context, passes the engine's
// conformance suite.
func TestConformance(t *testing.T) {
	f := newFixture(t, nil)
	src, err := f.dev.MemAlloc(bufSize)
	if err != nil {
		t.Fatal(err)
	}
	defer f.dev.MemFree(src)
	dst, err := f.dev.MemAlloc(bufSize)
	if err != nil {
		t.Fatal(err)
	}
	defer f.dev.MemFree(dst)
	conn := func(c, epoch unsafe.Pointer, src, dst uint64) *conform.Conn {
		return &conform.Conn{
			C:         c,
			Size:      bufSize,
			Epoch:     func() uint64 { return conform.Word(epoch) },
			SetSrc:    func(off uint64, b []byte) { poke(src+off, b) },
			DstWord:   func(off uint64) uint64 { return binary.LittleEndian.Uint64(peek(dst+off, 8)) },
			Waits:     true,
			PeerExits: true,
		}
	}
	c := conn(f.h.engConn(), f.h.peerEpoch(), f.src, f.dst)
	oc, oe := f.h.addConn(src, bufSize, dst, bufSize)
	c.Other = conn(oc, oe, src, dst)
	conform.Run(t, c)
}
