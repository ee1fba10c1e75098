//go:build mscclpp_testhooks

package conform

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
)

// FakeCUDA is the stand-in driver (cuda/testdata/fakecuda.c, built for the test) with its device,
// fake context 0 current, and a CUDA-mode proxy's state on it, freed at the test's end (after
// what the test registers later): how a transport's CUDA mode joins the suite without a GPU.
type FakeCUDA struct {
	Lib   string
	Dev   cuda.Device
	State unsafe.Pointer
}

// NewFakeCUDA builds and loads the stand-in driver and makes the proxy state.
func NewFakeCUDA(t *testing.T) *FakeCUDA {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	_, file, _, _ := runtime.Caller(0)
	f := &FakeCUDA{Lib: filepath.Join(t.TempDir(), "libfakecuda.so")}
	src := filepath.Join(filepath.Dir(file), "..", "..", "..", "cuda", "testdata", "fakecuda.c")
	if b, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", f.Lib, src, "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in driver: %v\n%s", err, b)
	}
	var err error
	if f.Dev, err = cuda.TestLoadDevice(f.Lib, "0"); err != nil {
		t.Fatal(err)
	}
	if f.State, err = cuda.NewProxyState(f.Dev, nil, -1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cuda.FreeProxyState(f.State); err != nil {
			t.Error(err)
		}
	})
	return f
}

// Write writes b at device address p.
func (f *FakeCUDA) Write(p uint64, b []byte) {
	if err := cuda.TestLibWrite(f.Lib, p, b); err != nil {
		panic(err)
	}
}
