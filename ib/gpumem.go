package ib

/*
#include <stdlib.h>
#include "ibcore.h"
static const dynSym* ibDmabufSymsPtr(void) { return ibDmabufSyms; }
static const dynSym* ibRoSymsPtr(void) { return ibRoSyms; }
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/dynlib"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

var dmabufLibs sync.Map // library path -> *dmabufEntry

type dmabufEntry struct {
	once sync.Once
	api  *C.ibDmabufApi
	err  error
}

// dmabuf is the library's ibv_reg_dmabuf_mr, or an error saying it lacks one.
func (l *Lib) dmabuf() (*C.ibDmabufApi, error) {
	v, _ := dmabufLibs.LoadOrStore(l.path, &dmabufEntry{})
	e := v.(*dmabufEntry)
	e.once.Do(func() {
		d := dynlib.New(l.path, unsafe.Pointer(C.ibDmabufSymsPtr()), C.sizeof_ibDmabufApi, status.SystemError)
		if e.err = d.Load(); e.err == nil {
			e.api = (*C.ibDmabufApi)(d.Table())
		}
	})
	return e.api, e.err
}

// HasDmabuf reports whether the verbs library offers ibv_reg_dmabuf_mr (rdma-core 34 and later),
// and if not, why.
func (l *Lib) HasDmabuf() error {
	_, err := l.dmabuf()
	return err
}

// RegisterDmabufMR registers size bytes at offset of dma-buf fd (GPU memory the CUDA driver
// exported), addressed by work requests at iova, with RegisterMR's access. The caller may close fd
// once it returns.
func (x *Context) RegisterDmabufMR(fd int, offset, size, iova uint64) (*MR, error) {
	return x.RegisterDmabufMRAccess(fd, offset, size, iova, false)
}

// RegisterDmabufMRAccess is RegisterDmabufMR, with relaxed ordering where relaxed asks for it and
// the library knows the flag (RelaxedOrdering).
func (x *Context) RegisterDmabufMRAccess(fd int, offset, size, iova uint64, relaxed bool) (*MR, error) {
	d, err := x.lib.dmabuf()
	if err != nil {
		return nil, status.Errorf(status.SystemError, "ibv_reg_dmabuf_mr unavailable: %v", err)
	}
	ro := C.int(0)
	if relaxed && x.lib.RelaxedOrdering() {
		ro = 1
	}
	var msg [errLen]C.char
	mr := C.ibMrRegDmabuf(x.c, d, C.uint64_t(offset), C.uint64_t(size), C.uint64_t(iova), C.int(fd), ro, &msg[0], errLen)
	if mr == nil {
		return nil, status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return &MR{ctx: x, mr: mr, addr: iova, size: size}, nil
}

// InlineSignals reports whether q's signals go inline (the QP granted max_inline_data >= 8).
func (q *QP) InlineSignals() bool { return q.qp.maxInline >= 8 }

var roLibs sync.Map // library path -> *roEntry

type roEntry struct {
	once sync.Once
	api  *C.ibRoApi
}

// relaxedAPI is the library's ibv_reg_mr_iova2, or nil where it lacks one.
func (l *Lib) relaxedAPI() *C.ibRoApi {
	v, _ := roLibs.LoadOrStore(l.path, &roEntry{})
	e := v.(*roEntry)
	e.once.Do(func() {
		d := dynlib.New(l.path, unsafe.Pointer(C.ibRoSymsPtr()), C.sizeof_ibRoApi, status.SystemError)
		if d.Load() == nil {
			e.api = (*C.ibRoApi)(d.Table())
		}
	})
	return e.api
}

// RelaxedOrdering reports whether registrations may ask for relaxed ordering: the library has
// ibv_reg_mr_iova2 (IBVERBS_1.8, rdma-core 28 and later), which takes the optional access flags
// and drops them where the device lacks them (NCCL's test).
func (l *Lib) RelaxedOrdering() bool { return l.relaxedAPI() != nil }

// RegisterMRAccess is RegisterMR, with relaxed ordering (IBV_ACCESS_RELAXED_ORDERING) where
// relaxed asks for it and the library knows the flag: for data buffers, whose RDMA writes need no
// order among themselves; never for a signal slot, whose write must land after the data.
func (x *Context) RegisterMRAccess(addr, size uint64, relaxed bool) (*MR, error) {
	ro := x.lib.relaxedAPI()
	if !relaxed || ro == nil {
		return x.RegisterMR(addr, size)
	}
	var msg [errLen]C.char
	mr := C.ibMrRegRelaxed(x.c, ro, C.uint64_t(addr), C.uint64_t(size), &msg[0], errLen)
	if mr == nil {
		return nil, status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return &MR{ctx: x, mr: mr, addr: addr, size: size}, nil
}
