//go:build mscclpp_testhooks

package cuda

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestDmabufAsTheDriverAccepts: a dma-buf is the whole host pages around a buffer, as the driver
// defines it. cudaMalloc buffers under 2 MiB, which the driver carves out of a 2 MiB chunk at
// 256-byte offsets, and a larger one (whole chunks of its own) all export, with the buffer's
// offset in the first page; the driver itself refuses a range not page-aligned or leaving its
// chunk; a device without dma-buf support is asked first and named.
func TestDmabufAsTheDriverAccepts(t *testing.T) {
	l := fake(t)
	dev, err := probeOn(t, l, "0")
	if err != nil {
		t.Fatal(err)
	}
	page := uint64(os.Getpagesize())
	var small uint64
	for _, size := range []uint64{4 << 10, 1 << 20, 2<<20 + 256} {
		p, err := dev.MemAlloc(size)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.MemFree(p)
		if size < 2<<20 {
			if p%page == 0 {
				t.Fatalf("the driver placed %d bytes at %#x, on a page boundary: the case is not tested", size, p)
			}
			small = p
		}
		fd, off, err := dev.DmabufFD(p, size)
		if err != nil || off != p%page {
			t.Errorf("dma-buf of %d cudaMalloc bytes at %#x: fd %d offset %d, %v; want offset %d", size, p, fd, off, err, p%page)
			continue
		}
		syscall.Close(fd)
	}
	if _, _, err := dev.DmabufFD(small, 4<<20); err == nil || status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), "leaves its device allocation") {
		t.Errorf("dma-buf of 4 MiB at a 4 KiB buffer: %v, want InvalidUsage: leaves its device allocation", err)
	}
	chunk := small &^ (2<<20 - 1) // the driver's 2 MiB chunk holding the small buffers
	if err := dev.testExport(chunk, 2<<20); err != nil {
		t.Errorf("the driver refused its whole chunk [%#x, +2 MiB): %v", chunk, err)
	}
	for _, r := range []struct {
		what     string
		start, n uint64
	}{
		{"start not page-aligned", small, page},
		{"length not page-aligned", chunk, page + 256},
		{"past the chunk's end", chunk + page, 2 << 20},
		{"before the chunk's start", chunk - page, 2 * page},
	} {
		var ce *Error
		if err := dev.testExport(r.start, r.n); !errors.As(err, &ce) {
			t.Errorf("the driver exported [%#x, +%d) (%s): %v, want refused", r.start, r.n, r.what, err)
		}
	}
	harnessCall(fakeCuda, "fakeNoDmabuf", "1")
	defer harnessCall(fakeCuda, "fakeNoDmabuf", "0")
	if ok, err := dev.DmabufSupported(); ok || err != nil {
		t.Errorf("DmabufSupported on a device without = %v, %v", ok, err)
	}
	var ce *Error
	if _, _, err := dev.DmabufFD(small, 64); err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), "does not support dma-buf") {
		t.Errorf("dma-buf on a device without: %v, want the attribute named (the driver not asked)", err)
	}
}

// TestPoolMemoryUnshareable: memory from cudaMallocAsync (the device's memory pool) or mapped
// with the VMM API is refused with InvalidUsage naming UnshareableMemory and its kind, as the
// driver says it has no legacy IPC handle; cudaMalloc and pinned host memory are not.
func TestPoolMemoryUnshareable(t *testing.T) {
	l := fake(t)
	dev, err := probeOn(t, l, "0")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := TestMallocAsync(dev, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.MemFree(pool)
	err = checkShareable(l, pool+4096, 4096)
	if status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), UnshareableMemory) || !strings.Contains(err.Error(), "cudaMallocAsync") {
		t.Errorf("pool memory: %v, want InvalidUsage naming cudaMallocAsync and %q", err, UnshareableMemory)
	}
	vmm, err := TestVMMAlloc(dev, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	err = checkShareable(l, vmm, 2<<20)
	if status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), UnshareableMemory) || !strings.Contains(err.Error(), "the VMM API") {
		t.Errorf("VMM memory: %v, want InvalidUsage naming the VMM API and %q", err, UnshareableMemory)
	}
	p, err := dev.MemAlloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.MemFree(p)
	if err := checkShareable(l, p, 4096); err != nil {
		t.Errorf("cudaMalloc memory refused: %v", err)
	}
	h, err := dev.HostAlloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.HostFree(h)
	if err := checkShareable(l, uint64(uintptr(h)), 4096); err != nil {
		t.Errorf("pinned host memory refused: %v", err)
	}
}

// TestEnablePeerAccess: peer access between the two devices' contexts, enabled once and
// tolerated when already enabled; a context of the same device needs none.
func TestEnablePeerAccess(t *testing.T) {
	l := fake(t)
	d0, err := probeOn(t, l, "0")
	if err != nil {
		t.Fatal(err)
	}
	d1, err := probeOn(t, l, "1")
	if err != nil {
		t.Fatal(err)
	}
	if err := d0.EnablePeerAccess(d0); err != nil {
		t.Errorf("peer access to its own context: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := d0.EnablePeerAccess(d1); err != nil {
			t.Errorf("peer access 0 -> 1 (call %d): %v", i+1, err)
		}
	}
	if harnessCall(fakeCuda, "fakePeerAccess", "01") != 1 || harnessCall(fakeCuda, "fakePeerAccess", "10") != 0 {
		t.Errorf("peer access 0->1 %d, 1->0 %d; want 1 and 0", harnessCall(fakeCuda, "fakePeerAccess", "01"), harnessCall(fakeCuda, "fakePeerAccess", "10"))
	}
	arm(t, "cuCtxEnablePeerAccess")
	if err := d1.EnablePeerAccess(d0); err == nil || !strings.Contains(err.Error(), "device 1 cannot access device 0") {
		t.Errorf("peer access refused by the driver: %v", err)
	}
}
