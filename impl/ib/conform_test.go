//go:build mscclpp_testhooks

package ib

import (
	"testing"
	"unsafe"

	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the IB transport, on two connected QPs of the verbs double, passes the
// engine's conformance suite: host threads and the proxy signal at once, and the counts reach
// the peer's epoch in order (the count was once taken outside the QP's lock and posted under it).
func TestConformance(t *testing.T) {
	l := newLoopback(t)
	sigA, sigB := newBuffer(t, 4096), newBuffer(t, 4096)
	defer sigA.free()
	defer sigB.free()
	mrSigA, err := l.ctx.RegisterMR(sigA.addr(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer mrSigA.Close()
	mrSigB, err := l.ctx.RegisterMR(sigB.addr(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer mrSigB.Close()
	local := []verbs.MRInfo{mrSigA.Info(), l.mrA.Info()}
	remote := []verbs.MRInfo{mrSigB.Info(), l.mrB.Info()}
	st, err := NewConnState(l.a, []*verbs.MR{mrSigA, l.mrA}, remote)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Free()
	c := newTestConn(st, local, remote)
	defer c.free()
	conform.Run(t, &conform.Conn{
		C:           c.engConn(),
		Size:        uint64(len(l.bufB.b)),
		Epoch:       func() uint64 { return conform.Word(unsafe.Pointer(&sigB.b[8])) },
		SetSrc:      func(off uint64, b []byte) { copy(l.bufA.b[off:], b) },
		DstWord:     func(off uint64) uint64 { return conform.Word(unsafe.Pointer(&l.bufB.b[off])) },
		HostSignals: true,
	})
}
