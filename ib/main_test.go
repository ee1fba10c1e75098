package ib

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// doubleLib is the test double of libibverbs.so.1 built by TestMain
// (tests/ib/double), or "" with doubleErr saying why not.
var doubleLib, doubleErr string

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	if os.Getenv(spinEnv) != "" {
		os.Exit(spinMain())
	}
	dir, err := os.MkdirTemp("", "ibtest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	doubleLib, doubleErr = buildDouble(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildDouble compiles the double with gcc into dir/libibverbs.so.1.
func buildDouble(dir string) (string, string) {
	src := filepath.Join("..", "tests", "ib", "double") // go test runs in the package's directory
	out := filepath.Join(dir, "libibverbs.so.1")
	cmd := exec.Command("bash", filepath.Join(src, "build.sh"), dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Sprintf("building the libibverbs test double: %v\n%s", err, b)
	}
	return out, ""
}

// withDouble loads the double for a test with a fresh fabric directory.
func withDouble(t *testing.T) *Lib {
	t.Helper()
	if doubleLib == "" {
		t.Fatal(doubleErr)
	}
	t.Setenv("MSCCLPP_IBV_DOUBLE_DIR", t.TempDir())
	lib, err := LoadPath(doubleLib)
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// buffer is memory outside Go's heap that an MR may cover.
type buffer struct{ b []byte }

func newBuffer(t testing.TB, n int) *buffer {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	return &buffer{b}
}

func (b *buffer) addr() uint64 { return uint64(uintptr(unsafe.Pointer(&b.b[0]))) }
func (b *buffer) free()        { _ = syscall.Munmap(b.b) }

// load64 reads the 8 bytes at off as another process's RDMA write left them.
func (b *buffer) load64(off int) uint64 {
	return atomicLoad64((*uint64)(unsafe.Pointer(&b.b[off])))
}
