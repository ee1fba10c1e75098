package cuda

/*
#include "calls.h"
*/
import "C"

import (
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// BlockAlign is where Block allocations start: the driver's large-page granularity, so that a
// block's pages belong to it alone and a dma-buf of them is an export the driver accepts.
const BlockAlign = 2 << 20

// Block is device memory the library allocates for RDMA as well as for kernels: Ptr is on a
// BlockAlign boundary and the Size bytes from it lie inside one allocation (base).
type Block struct {
	Ptr, Size uint64
	base      uint64
}

// AllocBlock allocates size bytes of device memory on a BlockAlign boundary (whole large pages
// of its own: small cuMemAlloc requests are carved by the driver out of a shared chunk at any
// 256-byte offset).
func (d Device) AllocBlock(size uint64) (Block, error) {
	n := (size + BlockAlign - 1) &^ (BlockAlign - 1)
	if n == 0 {
		n = BlockAlign
	}
	p, err := d.MemAlloc(n)
	if err != nil {
		return Block{}, err
	}
	if p%BlockAlign == 0 {
		return Block{Ptr: p, Size: size, base: p}, nil
	}
	// a driver that placed it elsewhere: one large page more, and its aligned part
	if err := d.MemFree(p); err != nil {
		return Block{}, err
	}
	if p, err = d.MemAlloc(n + BlockAlign); err != nil {
		return Block{}, err
	}
	return Block{Ptr: (p + BlockAlign - 1) &^ (BlockAlign - 1), Size: size, base: p}, nil
}

// FreeBlock frees a Block of AllocBlock.
func (d Device) FreeBlock(b Block) error {
	if b.base == 0 {
		return nil
	}
	return d.MemFree(b.base)
}

// AddressRange returns the base and size of the allocation holding ptr (cuMemGetAddressRange).
func (d Device) AddressRange(ptr uint64) (base, size uint64, err error) {
	if err := d.check(); err != nil {
		return 0, 0, err
	}
	var (
		b    C.cuwDevicePtr
		n    C.size_t
		call *C.char
	)
	if err := d.fail(C.cuwAddressRange(d.api, d.ctx(), C.cuwDevicePtr(ptr), &b, &n, &call), call); err != nil {
		return 0, 0, err
	}
	return uint64(b), uint64(n), nil
}

// EnablePeerAccess lets d's context reach peer's device memory directly (cuCtxEnablePeerAccess;
// already enabled, by this library or the application, is success). Contexts of one device need
// nothing: it returns nil for them.
func (d Device) EnablePeerAccess(peer Device) error {
	if err := d.check(); err != nil {
		return err
	}
	if err := peer.check(); err != nil {
		return err
	}
	if peer.Ctx == d.Ctx || peer.Ordinal == d.Ordinal {
		return nil
	}
	var call *C.char
	if err := d.fail(C.cuwEnablePeer(d.api, d.ctx(), C.cuwContext(peer.Ctx), &call), call); err != nil {
		return status.Errorf(status.CodeOf(err), "device %d cannot access device %d's memory: %w", d.Ordinal, peer.Ordinal, err)
	}
	return nil
}

// BufferID returns the driver's id of the allocation holding ptr (CU_POINTER_ATTRIBUTE_BUFFER_ID:
// never reused in a process, so a buffer freed and allocated again at the same address has
// another), with the allocation's base and size.
func (d Device) BufferID(ptr uint64) (id, base, size uint64, err error) {
	if err := d.check(); err != nil {
		return 0, 0, 0, err
	}
	var (
		cid  C.ulonglong
		call *C.char
	)
	if err := d.fail(C.cuwBufferId(d.api, C.cuwDevicePtr(ptr), &cid, &call), call); err != nil {
		return 0, 0, 0, err
	}
	base, size, err = d.AddressRange(ptr)
	return uint64(cid), base, size, err
}

// StreamSync waits for everything enqueued on stream (a CUstream or cudaStream_t; 0: the default
// stream) with d's context current.
func (d Device) StreamSync(stream uintptr) error {
	if err := d.check(); err != nil {
		return err
	}
	var call *C.char
	return d.fail(C.cuwStreamSync(d.api, d.ctx(), C.uintptr_t(stream), &call), call)
}
