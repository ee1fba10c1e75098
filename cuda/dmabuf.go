package cuda

/*
#include "calls.h"
static const cuwSym* dmabufSyms(void) { return cuwDmabufSyms; }
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/dynlib"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

var dmabuf struct {
	once sync.Once
	lib  *dynlib.Lib
	err  error
}

// dmabufAPI is the driver's optional dma-buf export (cuMemGetHandleForAddressRange, CUDA 11.7
// and later), or an error saying the driver lacks it.
func dmabufAPI() (*C.cuwDmabufApi, error) {
	dmabuf.once.Do(func() {
		dmabuf.lib = dynlib.New(libraryName(), unsafe.Pointer(C.dmabufSyms()), C.sizeof_cuwDmabufApi, status.UnhandledCudaError)
		dmabuf.err = dmabuf.lib.Load()
	})
	if dmabuf.err != nil {
		return nil, dmabuf.err
	}
	return (*C.cuwDmabufApi)(dmabuf.lib.Table()), nil
}

// DmabufFD exports the device allocation holding [ptr, ptr+size) as a dma-buf (for
// ibv_reg_dmabuf_mr): the file descriptor, which the caller closes, and ptr's offset in it.
// An error says the driver offers no dma-buf export or refused this range.
func (d Device) DmabufFD(ptr, size uint64) (fd int, offset uint64, err error) {
	if err := d.check(); err != nil {
		return -1, 0, err
	}
	b, err := dmabufAPI()
	if err != nil {
		return -1, 0, err
	}
	var (
		cfd  C.int
		off  C.uint64_t
		call *C.char
	)
	if err := d.fail(C.cuwDmabufFd(d.api, b, d.ctx(), C.cuwDevicePtr(ptr), C.size_t(size), &cfd, &off, &call), call); err != nil {
		return -1, 0, err
	}
	return int(cfd), uint64(off), nil
}
