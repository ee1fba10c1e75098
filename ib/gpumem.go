package ib

/*
#include <stdlib.h>
#include "ibcore.h"
static const dynSym* ibDmabufSymsPtr(void) { return ibDmabufSyms; }
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
	d, err := x.lib.dmabuf()
	if err != nil {
		return nil, status.Errorf(status.SystemError, "ibv_reg_dmabuf_mr unavailable: %v", err)
	}
	var msg [errLen]C.char
	mr := C.ibMrRegDmabuf(x.c, d, C.uint64_t(offset), C.uint64_t(size), C.uint64_t(iova), C.int(fd), &msg[0], errLen)
	if mr == nil {
		return nil, status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return &MR{ctx: x, mr: mr, addr: iova, size: size}, nil
}

// InlineSignals reports whether q's signals go inline (the QP granted max_inline_data >= 8).
func (q *QP) InlineSignals() bool { return q.qp.maxInline >= 8 }
