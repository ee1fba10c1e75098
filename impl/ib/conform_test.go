//go:build mscclpp_testhooks

package ib

import (
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the IB transport, on two connected QPs of the verbs double, passes the
// engine's conformance suite in host mode and in CUDA mode (the context a CUDA-mode proxy's on
// the stand-in driver: ibCudaEngOps, only the proxy signals): host threads and the proxy signal
// at once, and the counts reach the peer's epoch in order (the count was once taken outside the
// QP's lock and posted under it).
func TestConformance(t *testing.T) {
	t.Run("HostMode", func(t *testing.T) { conformance(t, nil, true) })
	t.Run("CUDAMode", func(t *testing.T) { conformance(t, conform.NewFakeCUDA(t).State, false) })
}

func conformance(t *testing.T, cudaState unsafe.Pointer, hostSignals bool) {
	l := newLoopback(t)
	c, sigB := l.signalledConnOn(t, cudaState)
	conform.Run(t, &conform.Conn{
		C:           c.engConn(),
		Size:        uint64(len(l.bufB.b)),
		Epoch:       func() uint64 { return conform.Word(unsafe.Pointer(&sigB.b[8])) },
		SetSrc:      func(off uint64, b []byte) { copy(l.bufA.b[off:], b) },
		DstWord:     func(off uint64) uint64 { return conform.Word(unsafe.Pointer(&l.bufB.b[off])) },
		HostSignals: hostSignals,
		Fails:       "this package's loopback builds one signalled connection per context",
		NoPeerClose: "IB learns of a closed peer through its heartbeat (heartbeat.go), which the verbs double's loopback does not run",
	})
}
