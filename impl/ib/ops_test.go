//go:build mscclpp_testhooks

package ib

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// doubleLib is the test double of libibverbs.so.1 (tests/ib/double) built by TestMain, or ""
// with doubleErr saying why not.
var doubleLib, doubleErr string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ibopstest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	src := filepath.Join("..", "..", "tests", "ib", "double") // go test runs in the package's directory
	if b, err := exec.Command("bash", filepath.Join(src, "build.sh"), dir).CombinedOutput(); err != nil {
		doubleErr = fmt.Sprintf("building the libibverbs test double: %v\n%s", err, b)
	} else {
		doubleLib = filepath.Join(dir, "libibverbs.so.1")
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
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
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b.b[off])))
}

// loopback is two connected QPs of the double's device in one process, each with a 64 KiB MR.
type loopback struct {
	ctx        *verbs.Context
	a, b       *verbs.QP
	bufA, bufB *buffer
	mrA, mrB   *verbs.MR
}

func newLoopback(t *testing.T) *loopback {
	t.Helper()
	if doubleLib == "" {
		t.Fatal(doubleErr)
	}
	t.Setenv("MSCCLPP_IBV_DOUBLE_DIR", t.TempDir())
	lib, err := verbs.LoadPath(doubleLib)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := verbs.Open(lib, "double_0", verbs.Options{GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	return loopbackOn(t, ctx)
}

// another is a second loopback on l's device: two more connected QPs, a CQ and MRs of their own.
func (l *loopback) another(t *testing.T) *loopback { return loopbackOn(t, l.ctx) }

func loopbackOn(t *testing.T, ctx *verbs.Context) *loopback {
	t.Helper()
	l := &loopback{ctx: ctx}
	cq, err := ctx.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	if l.a, err = ctx.NewQP(cq, 8, "rank 1"); err != nil {
		t.Fatal(err)
	}
	if l.b, err = ctx.NewQP(cq, 8, "rank 0"); err != nil {
		t.Fatal(err)
	}
	l.bufA, l.bufB = newBuffer(t, 1<<16), newBuffer(t, 1<<16)
	if l.mrA, err = ctx.RegisterMR(l.bufA.addr(), 1<<16); err != nil {
		t.Fatal(err)
	}
	if l.mrB, err = ctx.RegisterMR(l.bufB.addr(), 1<<16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, e := range []error{l.mrA.Close(), l.mrB.Close(), l.a.Close(), l.b.Close(), cq.Close()} {
			if e != nil {
				t.Error(e)
			}
		}
		l.bufA.free()
		l.bufB.free()
	})
	if err := l.a.Connect(l.b.Info()); err != nil {
		t.Fatal(err)
	}
	if err := l.b.Connect(l.a.Info()); err != nil {
		t.Fatal(err)
	}
	return l
}

// signalledConn is a connection of the IB transport from QP a to QP b: l's MRs for data and a
// 16-byte signal MR on each side; sigB is the peer's signal words (device epoch, proxy epoch).
func (l *loopback) signalledConn(t *testing.T) (c testConn, sigB *buffer) {
	return l.signalledConnOn(t, nil)
}

// signalledConnOn is signalledConn on a CUDA-mode proxy's context (cuda: its state), or in host mode (nil).
func (l *loopback) signalledConnOn(t *testing.T, cuda unsafe.Pointer) (c testConn, sigB *buffer) {
	t.Helper()
	return l.signalledConnBeside(t, cuda, testConn{})
}

// signalledConnBeside is signalledConnOn as connection 1 of beside's context (or, beside the zero
// testConn, of a context of its own).
func (l *loopback) signalledConnBeside(t *testing.T, cuda unsafe.Pointer, beside testConn) (c testConn, sigB *buffer) {
	t.Helper()
	sigA, sigB := newBuffer(t, 4096), newBuffer(t, 4096)
	t.Cleanup(sigA.free)
	t.Cleanup(sigB.free)
	mrSigA, err := l.ctx.RegisterMR(sigA.addr(), 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mrSigA.Close() })
	mrSigB, err := l.ctx.RegisterMR(sigB.addr(), 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mrSigB.Close() })
	local := []verbs.MRInfo{mrSigA.Info(), l.mrA.Info()}
	remote := []verbs.MRInfo{mrSigB.Info(), l.mrB.Info()}
	st, err := NewConnState(l.a, []*verbs.MR{mrSigA, l.mrA}, remote)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Free)
	c = newTestConnBeside(st, local, remote, cuda, beside)
	t.Cleanup(c.free)
	return c, sigB
}

// TestEngOps drives ibEngOps as the engine's proxy does: Data at offsets,
// Flag (the signal count into the peer's proxy epoch word), Sync, and a
// put past the end of the peer's buffer.
func TestEngOps(t *testing.T) {
	l := newLoopback(t)
	c, sigB := l.signalledConn(t)
	for i := range l.bufA.b {
		l.bufA.b[i] = byte(i ^ 0x5a)
	}
	const data, flag, sync = 1, 2, 4
	if rc, msg := c.op(data, 1, 300, 1, 100, 1000); rc != 0 {
		t.Fatalf("Data: %d %s", rc, msg)
	}
	if rc, msg := c.op(data|flag|sync, 1, 5000, 1, 2000, 10); rc != 0 {
		t.Fatalf("Data|Flag|Sync: %d %s", rc, msg)
	}
	if l.a.Completed() != l.a.Posted() {
		t.Fatalf("after Sync: %d of %d", l.a.Completed(), l.a.Posted())
	}
	if sigB.load64(8) != 1 || sigB.load64(0) != 0 {
		t.Fatalf("peer's epoch: device %d proxy %d", sigB.load64(0), sigB.load64(8))
	}
	for i := 0; i < 1000; i++ {
		if l.bufB.b[300+i] != l.bufA.b[100+i] {
			t.Fatalf("byte %d", i)
		}
	}
	if rc, _ := c.op(flag, 0, 0, 0, 0, 0); rc != 0 || sigB.load64(8) != 2 {
		t.Fatalf("second Flag: rc %d, proxy %d", rc, sigB.load64(8))
	}
	// checked by the engine before posting: InvalidArgument
	if rc, msg := c.op(data, 1, 1<<16-4, 1, 0, 8); rc != int(status.InvalidArgument) || !strings.Contains(msg, "remote handle 1") {
		t.Fatalf("put past the end: %d %s", rc, msg)
	}
}
