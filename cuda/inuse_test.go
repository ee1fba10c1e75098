package cuda

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/dl"
)

// InUse answers whether the driver library is loaded without loading it: false before the
// library is loaded, true once it is, also when it was loaded under another file name of the
// same stem (the development symlink libX.so of libX.so.1) and is named by its soname.
func TestInUseSeesLoadedLibrary(t *testing.T) {
	dir := t.TempDir()
	// a stand-in whose file is libinusetest.so and whose soname is libinusetest.so.1
	path := filepath.Join(dir, "libinusetest.so")
	args := []string{"-shared", "-fPIC", "-o", path, "-Wl,-soname,libinusetest.so.1", filepath.Join("testdata", "fakenvml.c")}
	if b, err := exec.Command(cc(), args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc(), args, err, b)
	}
	t.Setenv("MSCCLPP_CUDA_LIBRARY", "libinusetest.so.1")
	if InUse() {
		t.Fatal("InUse before the library was loaded")
	}
	t.Setenv("MSCCLPP_CUDA_LIBRARY", path)
	if InUse() {
		t.Fatal("InUse (by path) before the library was loaded")
	}
	lib := dl.New(path, dl.RTLD_LAZY|dl.RTLD_LOCAL)
	if err := lib.Open(); err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if !InUse() {
		t.Fatal("not InUse (by path) once loaded")
	}
	t.Setenv("MSCCLPP_CUDA_LIBRARY", "libinusetest.so.1")
	if !InUse() {
		t.Fatal("not InUse (by soname) once loaded as libinusetest.so")
	}
	t.Setenv("MSCCLPP_CUDA_LIBRARY", "libinusetest-other.so.1")
	if InUse() {
		t.Fatal("InUse for a library of another name")
	}
}
