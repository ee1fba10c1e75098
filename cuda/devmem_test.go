//go:build mscclpp_testhooks

package cuda

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestDmabufAsTheDriverAccepts: the driver sub-allocates small requests at any 256-byte offset,
// so the pages of one are not its own and their export is refused (and said why, before the
// driver is asked); a Block is page-aligned inside its allocation and exports; a device without
// dma-buf support is asked first and named.
func TestDmabufAsTheDriverAccepts(t *testing.T) {
	l := fake(t)
	dev, err := probeOn(t, l, "0")
	if err != nil {
		t.Fatal(err)
	}
	const size = 24 << 10
	small, err := dev.MemAlloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.MemFree(small)
	if _, _, err := dev.DmabufFD(small, size); err == nil || !strings.Contains(err.Error(), "leaves its device allocation") {
		t.Errorf("dma-buf of a sub-allocated %d bytes at %#x: %v, want refused as leaving its allocation", size, small, err)
	}
	blk, err := dev.AllocBlock(size)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.FreeBlock(blk)
	if blk.Ptr%BlockAlign != 0 || blk.Size != size {
		t.Fatalf("AllocBlock(%d) = %+v, want a %d-aligned block", size, blk, BlockAlign)
	}
	fd, off, err := dev.DmabufFD(blk.Ptr+100, 64)
	if err != nil || off != 100 {
		t.Fatalf("dma-buf of a block's bytes: fd %d offset %d, %v", fd, off, err)
	}
	syscall.Close(fd)
	// the driver itself refuses what DmabufRange would not ask: a range rounded outside
	var ce *Error
	harnessCall(fakeCuda, "fakeNoDmabuf", "1")
	defer harnessCall(fakeCuda, "fakeNoDmabuf", "0")
	if ok, err := dev.DmabufSupported(); ok || err != nil {
		t.Errorf("DmabufSupported on a device without = %v, %v", ok, err)
	}
	if _, _, err := dev.DmabufFD(blk.Ptr, 64); err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), "does not support dma-buf") {
		t.Errorf("dma-buf on a device without: %v, want the attribute named (the driver not asked)", err)
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
