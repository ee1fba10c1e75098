//go:build mscclpp_testhooks

package ib

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine/conform"
)

// TestConformance: the IB transport, on two connected QPs of the verbs double, passes the
// engine's conformance suite in host mode and in CUDA mode (the context a CUDA-mode proxy's on
// the stand-in driver: ibCudaEngOps, only the proxy signals): host threads and the proxy signal
// at once, and the counts reach the peer's epoch in order (the count was once taken outside the
// QP's lock and posted under it).
func TestConformance(t *testing.T) {
	t.Run("HostMode", func(t *testing.T) { conformance(t, nil, true) })
	t.Run("CUDAMode", func(t *testing.T) { conformance(t, fakeProxyState(t), false) })
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

// fakeProxyState is a CUDA-mode proxy's state on the stand-in driver (cuda/testdata/fakecuda.c,
// built here), freed at the test's end after the connections made later.
func fakeProxyState(t *testing.T) unsafe.Pointer {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	src := filepath.Join("..", "..", "cuda", "testdata", "fakecuda.c")
	if b, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", lib, src, "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in driver: %v\n%s", err, b)
	}
	dev, err := cuda.TestLoadDevice(lib, "0")
	if err != nil {
		t.Fatal(err)
	}
	state, err := cuda.NewProxyState(dev, nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cuda.FreeProxyState(state); err != nil {
			t.Error(err)
		}
	})
	return state
}
