//go:build mscclpp_testhooks

package conform

import (
	"os"
	"os/exec"
	"path/filepath"
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
	f := &FakeCUDA{Lib: filepath.Join(t.TempDir(), "libfakecuda.so")}
	src := filepath.Join(moduleRoot(t), "cuda", "testdata", "fakecuda.c")
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

// moduleRoot is the directory of go.mod above the test's working directory (its package's
// directory, where go test runs it); the source file's own path is module-relative under -trimpath.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = up
	}
}
