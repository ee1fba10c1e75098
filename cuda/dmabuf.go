package cuda

/*
#include "calls.h"
static const cuwSym* dmabufSyms(void) { return cuwDmabufSyms; }
*/
import "C"

import (
	"os"
	"sync"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/dynlib"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

var dmabufLibs sync.Map // driver library name -> *dmabufEntry

type dmabufEntry struct {
	once sync.Once
	lib  *dynlib.Lib
	err  error
}

// dmabufAPI is the optional dma-buf export (cuMemGetHandleForAddressRange, CUDA 11.7 and later)
// of the driver library lib, or an error saying the driver lacks it.
func dmabufAPI(lib string) (*C.cuwDmabufApi, error) {
	v, _ := dmabufLibs.LoadOrStore(lib, &dmabufEntry{})
	e := v.(*dmabufEntry)
	e.once.Do(func() {
		e.lib = dynlib.New(lib, unsafe.Pointer(C.dmabufSyms()), C.sizeof_cuwDmabufApi, status.UnhandledCudaError)
		e.err = e.lib.Load()
	})
	if e.err != nil {
		return nil, e.err
	}
	return (*C.cuwDmabufApi)(e.lib.Table()), nil
}

// DmabufSupported asks the device whether it exports dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).
func (d Device) DmabufSupported() (bool, error) {
	if err := d.check(); err != nil {
		return false, err
	}
	var (
		v    C.int
		call *C.char
	)
	if err := d.fail(C.cuwDeviceAttr(d.api, C.cuwDevice(d.Ordinal), C.CUW_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, &v, &call), call); err != nil {
		return false, err
	}
	return v != 0, nil
}

// RDMAWritesOrdered asks the device whether its kernels see GPUDirect RDMA writes into its
// memory in the order they arrived (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING at least
// CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER), and the attribute's value.
func (d Device) RDMAWritesOrdered() (bool, int, error) {
	if err := d.check(); err != nil {
		return false, 0, err
	}
	var (
		v    C.int
		call *C.char
	)
	if err := d.fail(C.cuwDeviceAttr(d.api, C.cuwDevice(d.Ordinal), C.CUW_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, &v, &call), call); err != nil {
		return false, 0, err
	}
	return v >= C.CUW_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER, int(v), nil
}

// DmabufRange is the host-page-aligned range a dma-buf of [ptr, ptr+size) covers, as the driver
// defines it (whole host pages around the buffer): its start, length and ptr's offset in it, or
// an error where the buffer itself leaves the allocation holding ptr. The pages may run past the
// allocation: cuMemAlloc carves buffers under 2 MiB out of 2 MiB chunks it maps whole (at any
// 256-byte offset) and maps larger ones in whole 2 MiB chunks, so the pages around a buffer lie
// in memory the driver mapped and exports.
func (d Device) DmabufRange(ptr, size uint64) (start, length, offset uint64, err error) {
	if size == 0 {
		return 0, 0, 0, status.Errorf(status.InvalidArgument, "dma-buf of zero bytes at %#x", ptr)
	}
	base, n, err := d.AddressRange(ptr)
	if err != nil {
		return 0, 0, 0, err
	}
	if size > n || ptr-base > n-size {
		return 0, 0, 0, status.Errorf(status.InvalidUsage, "[%#x, +%d) leaves its device allocation [%#x, +%d)", ptr, size, base, n)
	}
	page := uint64(os.Getpagesize())
	start = ptr &^ (page - 1)
	end := (ptr + size + page - 1) &^ (page - 1)
	return start, end - start, ptr - start, nil
}

// DmabufFD exports [ptr, ptr+size) of device memory as a dma-buf (for ibv_reg_dmabuf_mr): the
// file descriptor, which the caller closes, and ptr's offset in it. The exported range is the
// whole host pages holding the bytes (DmabufRange). An error says
// the device or driver offers no dma-buf export, or why this range cannot be exported.
func (d Device) DmabufFD(ptr, size uint64) (fd int, offset uint64, err error) {
	if err := d.check(); err != nil {
		return -1, 0, err
	}
	b, err := dmabufAPI(d.lib)
	if err != nil {
		return -1, 0, err
	}
	ok, err := d.DmabufSupported()
	if err != nil {
		return -1, 0, err
	}
	if !ok {
		return -1, 0, status.Errorf(status.UnhandledCudaError, "device %d does not support dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)", d.Ordinal)
	}
	start, length, off, err := d.DmabufRange(ptr, size)
	if err != nil {
		return -1, 0, err
	}
	var (
		cfd  C.int
		call *C.char
	)
	if err := d.fail(C.cuwDmabufFd(b, d.api, d.ctx(), C.cuwDevicePtr(start), C.size_t(length), &cfd, &call), call); err != nil {
		return -1, 0, err
	}
	return int(cfd), off, nil
}
