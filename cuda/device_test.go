//go:build mscclpp_testhooks

package cuda

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// fake returns the stand-in driver, loaded, with no failure armed.
func fake(t *testing.T) *loader {
	t.Helper()
	l := newCudaLoader(fakeCuda)
	if err := l.load(); err != nil {
		t.Fatal(err)
	}
	arm(t, "")
	return l
}

// arm makes the fake's entry point sym fail with CUDA_ERROR_OUT_OF_MEMORY until the test ends ("" disarms).
func arm(t *testing.T, sym string) {
	t.Helper()
	harnessCall(fakeCuda, "fakeFail", sym)
	t.Cleanup(func() { harnessCall(fakeCuda, "fakeFail", "") })
}

// onThread runs f locked to one OS thread whose current fake context is ctx ("0", "1", or "n" for none).
func onThread(ctx string, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		harnessCall(fakeCuda, "fakeSetCurrent", ctx)
		f()
		harnessCall(fakeCuda, "fakeSetCurrent", "0")
	}()
	<-done
}

// peek returns n bytes at device (or host) address p through the fake driver (device memory is
// not host-addressable); it panics when p..p+n is not inside one allocation.
func peek(p uint64, n int) []byte {
	b, err := harnessRead(fakeCuda, p, n)
	if err != nil {
		panic(err)
	}
	return b
}

// poke writes b at device (or host) address p through the fake driver.
func poke(p uint64, b []byte) {
	if err := harnessWrite(fakeCuda, p, b); err != nil {
		panic(err)
	}
}

func current() int { return harnessCall(fakeCuda, "fakeCurrent", "") }

func probeOn(t *testing.T, l *loader, ctx string) (dev Device, err error) {
	t.Helper()
	onThread(ctx, func() { dev, err = probe(l) })
	return
}

func TestProbeFake(t *testing.T) {
	l := fake(t)
	dev, err := probeOn(t, l, "1")
	if err != nil {
		t.Fatal(err)
	}
	if dev.Ordinal != 1 || dev.BusID != "0000:86:00.0" || dev.Ctx == nil {
		t.Errorf("Probe = %+v", dev)
	}
	_, err = probeOn(t, l, "n")
	if err == nil || err.Error() != "no current CUDA context on the calling thread (call cudaSetDevice first)" {
		t.Errorf("Probe without a context: %v", err)
	}
	if status.CodeOf(err) != status.UnhandledCudaError {
		t.Errorf("CodeOf = %v", status.CodeOf(err))
	}
	arm(t, "cuInit")
	_, err = probeOn(t, l, "0")
	var ce *Error
	if !errors.As(err, &ce) || ce.Call != "cuInit" || err.Error() != "cuInit: CUDA_ERROR_OUT_OF_MEMORY: out of memory" {
		t.Errorf("Probe with cuInit failing: %v", err)
	}
}

func TestDeviceMemory(t *testing.T) {
	l := fake(t)
	dev, err := probeOn(t, l, "0")
	if err != nil {
		t.Fatal(err)
	}
	before := harnessCall(fakeCuda, "fakeLiveAllocs", "")
	// every call keeps the calling thread's context, whichever it is
	for _, ctx := range []string{"0", "1", "n"} {
		onThread(ctx, func() {
			want := current()
			p, err := dev.MemAlloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			if err := dev.Memset(p, 0xab, 4096); err != nil {
				t.Fatal(err)
			}
			if got := peek(p+4000, 4); !bytes.Equal(got, []byte{0xab, 0xab, 0xab, 0xab}) {
				t.Errorf("Memset: % x", got)
			}
			h, off, err := dev.IpcHandleOf(p + 100)
			if err != nil || off != 100 {
				t.Fatalf("IpcHandleOf = %v, %d", err, off)
			}
			// the driver refuses a handle this process exported (a peer in the same process
			// uses the pointer itself); another process maps the same bytes elsewhere
			var ce *Error
			if _, err := dev.IpcOpen(h); !errors.As(err, &ce) || ce.Code != 201 || ce.Call != "cuIpcOpenMemHandle" {
				t.Errorf("IpcOpen of this process's own handle = %v, want cuIpcOpenMemHandle refused with 201", err)
			}
			harnessCall(fakeCuda, "fakeIpcForeign", "1")
			base, err := dev.IpcOpen(h)
			harnessCall(fakeCuda, "fakeIpcForeign", "0")
			if err != nil || base == p || !bytes.Equal(peek(base, 4096), peek(p, 4096)) {
				t.Fatalf("IpcOpen as another process = %#x, %v (the owner's at %#x)", base, err, p)
			}
			if err := dev.IpcClose(base); err != nil {
				t.Fatal(err)
			}
			q, err := dev.MemAlloc(64)
			if err != nil {
				t.Fatal(err)
			}
			if err := dev.CopyAsync(q, p+8, 32, 0); err != nil {
				t.Fatal(err)
			}
			if got := peek(q, 33); !bytes.Equal(got[:32], peek(p+8, 32)) || got[32] != 0 {
				t.Errorf("CopyAsync copied % x", got)
			}
			if err := dev.MemFree(q); err != nil {
				t.Fatal(err)
			}
			hp, err := dev.HostAlloc(64)
			if err != nil || hp == nil {
				t.Fatalf("HostAlloc = %v, %v", hp, err)
			}
			if err := dev.HostFree(hp); err != nil {
				t.Fatal(err)
			}
			if err := dev.MemFree(p); err != nil {
				t.Fatal(err)
			}
			if got := current(); got != want {
				t.Errorf("thread's context was %d, is %d after the calls", want, got)
			}
		})
	}
	if after := harnessCall(fakeCuda, "fakeLiveAllocs", ""); after != before {
		t.Errorf("allocations: %d before, %d after", before, after)
	}
	if n := harnessCall(fakeCuda, "fakeIpcOpen", ""); n != 0 {
		t.Errorf("%d IPC mappings left open", n)
	}
}

func TestDeviceErrors(t *testing.T) {
	l := fake(t)
	dev, err := probeOn(t, l, "0")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sym, call string
		run       func() error
	}{
		{"cuMemAlloc_v2", "cuMemAlloc", func() error { _, err := dev.MemAlloc(8); return err }},
		{"cuMemFree_v2", "cuMemFree", func() error { return dev.MemFree(1) }},
		{"cuMemsetD8_v2", "cuMemsetD8", func() error { return dev.Memset(1, 0, 1) }},
		{"cuMemHostAlloc", "cuMemHostAlloc", func() error { _, err := dev.HostAlloc(8); return err }},
		{"cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer", func() error { _, err := dev.HostAlloc(8); return err }},
		{"cuMemGetAddressRange_v2", "cuMemGetAddressRange", func() error { _, _, err := dev.IpcHandleOf(1); return err }},
		{"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle", func() error { _, err := dev.IpcOpen(IpcHandle{}); return err }},
		{"cuIpcCloseMemHandle", "cuIpcCloseMemHandle", func() error { return dev.IpcClose(1) }},
		{"cuMemcpyAsync", "cuMemcpyAsync", func() error { return dev.CopyAsync(1, 2, 0, 0) }},
		{"cuCtxGetCurrent", "cuCtxGetCurrent", func() error { _, err := dev.MemAlloc(8); return err }},
	}
	for _, c := range cases {
		arm(t, c.sym)
		err := c.run()
		var ce *Error
		if !errors.As(err, &ce) || ce.Call != c.call || ce.Code != 2 || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
			t.Errorf("%s failing: got %v, want a %s error", c.sym, err, c.call)
		}
		if status.CodeOf(err) != status.UnhandledCudaError {
			t.Errorf("%s failing: CodeOf = %v", c.sym, status.CodeOf(err))
		}
	}
	// switching to the device's context fails only when it is not already current
	arm(t, "cuCtxSetCurrent")
	onThread("1", func() {
		_, err := dev.MemAlloc(8)
		if err == nil || !strings.HasPrefix(err.Error(), "cuCtxSetCurrent: ") {
			t.Errorf("MemAlloc from another context with cuCtxSetCurrent failing: %v", err)
		}
	})
	arm(t, "")
	// without unified addressing HostAlloc refuses, and frees what it got
	harnessCall(fakeCuda, "fakeNoUva", "1")
	defer harnessCall(fakeCuda, "fakeNoUva", "0")
	if _, err := dev.HostAlloc(8); err == nil || !strings.Contains(err.Error(), "unified addressing is required") {
		t.Errorf("HostAlloc without UVA: %v", err)
	}
	var zero Device
	if _, err := zero.MemAlloc(8); err == nil {
		t.Error("a zero Device allocated memory")
	}
}

// TestRetainPrimary: a Device whose context is its primary context holds a reference on it
// between RetainPrimary and ReleasePrimary; a failing retain is an error naming the call.
func TestRetainPrimary(t *testing.T) {
	l := fake(t)
	dev, err := probeOn(t, l, "0")
	if err != nil {
		t.Fatal(err)
	}
	before := harnessCall(fakeCuda, "fakePrimaryRefs", "0")
	retained, err := dev.RetainPrimary()
	if err != nil || !retained {
		t.Fatalf("RetainPrimary = %v, %v; want a reference on the primary context", retained, err)
	}
	if n := harnessCall(fakeCuda, "fakePrimaryRefs", "0"); n != before+1 {
		t.Errorf("%d references after RetainPrimary, want %d", n, before+1)
	}
	if err := dev.ReleasePrimary(); err != nil {
		t.Fatal(err)
	}
	if n := harnessCall(fakeCuda, "fakePrimaryRefs", "0"); n != before {
		t.Errorf("%d references after ReleasePrimary, want %d", n, before)
	}
	arm(t, "cuDevicePrimaryCtxRetain")
	defer arm(t, "")
	var ce *Error
	if _, err := dev.RetainPrimary(); !errors.As(err, &ce) || ce.Call != "cuDevicePrimaryCtxRetain" {
		t.Errorf("RetainPrimary with the retain failing: %v", err)
	}
}

// TestProbePointer: a thread without a current context (CUDA 11 before the runtime's first call
// on it) finds the GPU from a buffer's context, and keeps having none.
func TestProbePointer(t *testing.T) {
	l := fake(t)
	dev, err := probeOn(t, l, "1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := dev.MemAlloc(256)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.MemFree(p)
	onThread("n", func() {
		got, err := probePointer(l, p+100)
		if err != nil {
			t.Fatal(err)
		}
		if got.Ordinal != 1 || got.Ctx != dev.Ctx || got.BusID != "0000:86:00.0" {
			t.Errorf("ProbePointer = %+v, want device 1", got)
		}
		if c := current(); c != -1 {
			t.Errorf("the thread has context %d after the probe, want none", c)
		}
		host := make([]byte, 8)
		_, err = probePointer(l, uint64(uintptr(unsafe.Pointer(&host[0]))))
		var ce *Error
		if !errors.As(err, &ce) || ce.Call != "cuPointerGetAttribute" {
			t.Errorf("ProbePointer of host memory: %v", err)
		}
	})
	// pinned host memory: the driver names its context as for device memory
	hp, err := dev.HostAlloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.HostFree(hp)
	if got, err := probePointer(l, uint64(uintptr(hp))+8); err == nil || !strings.Contains(err.Error(), "pinned host memory") {
		t.Errorf("ProbePointer of pinned host memory = %+v, %v; want refused as host memory", got, err)
	}
}
