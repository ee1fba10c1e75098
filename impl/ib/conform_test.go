//go:build mscclpp_testhooks

package ib

import (
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the IB transport, on two connections of one context (each two connected QPs
// of the verbs double, the connection's device view wired for host waits; in host mode the second
// runs its heartbeat, and its peer's close is the goodbye of a destroy), passes the
// engine's conformance suite in host mode and in CUDA mode (the context a CUDA-mode proxy's on
// the stand-in driver: ibCudaEngOps, only the proxy signals): host threads and the proxy signal
// at once, and the counts reach the peer's epoch in order (the count was once taken outside the
// QP's lock and posted under it).
func TestConformance(t *testing.T) {
	t.Run("HostMode", func(t *testing.T) { conformance(t, nil, true) })
	t.Run("CUDAMode", func(t *testing.T) { conformance(t, conform.NewFakeCUDA(t).State, false) })
}

func conformance(t *testing.T, cudaState unsafe.Pointer, hostSignals bool) {
	conn := func(l *loopback, c testConn, sigB *buffer) *conform.Conn {
		return &conform.Conn{
			C:           c.engConn(),
			Size:        uint64(len(l.bufB.b)),
			Epoch:       func() uint64 { return conform.Word(unsafe.Pointer(&sigB.b[8])) },
			SetSrc:      func(off uint64, b []byte) { copy(l.bufA.b[off:], b) },
			DstWord:     func(off uint64) uint64 { return conform.Word(unsafe.Pointer(&l.bufB.b[off])) },
			HostSignals: hostSignals,
			Waits:       hostSignals, // a CUDA-mode connection is waited on by kernels
			NoPeerClose: "a CUDA-mode connection takes no host waits",
		}
	}
	l := newLoopback(t)
	c, sigB := l.signalledConnOn(t, cudaState)
	l2 := l.another(t)
	o, sigO := l2.signalledConnBeside(t, nil, c)
	first := conn(l, c, sigB)
	first.Other = conn(l2, o, sigO)
	if hostSignals { // the second connection's heartbeat: its peer's close is a goodbye it reads
		beat, err := newTestBeat(l2.ctx, o, l2.a, l2.b, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(beat.close)
		first.Other.ClosePeer = beat.bye
	}
	conform.Run(t, first)
}
