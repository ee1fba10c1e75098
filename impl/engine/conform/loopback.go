//go:build mscclpp_testhooks

package conform

/*
#include <stdlib.h>
#include "loopback.h"
*/
import "C"

import "unsafe"

// Loopback is a connection of the loopback transport (loopback.c), both sides in this process.
type Loopback struct {
	p        unsafe.Pointer
	src, dst unsafe.Pointer
	Conn     *Conn
}

// NewLoopback makes a loopback connection with buffers of size bytes on both sides.
func NewLoopback(size uint64) *Loopback {
	l := &Loopback{src: C.calloc(1, C.size_t(size)), dst: C.calloc(1, C.size_t(size))}
	l.p = C.lbNew(l.src, l.dst, C.uint64_t(size))
	epoch := C.lbPeerEpoch(l.p)
	l.Conn = &Conn{
		C:           C.lbConnOf(l.p),
		Size:        size,
		Epoch:       func() uint64 { return Word(epoch) },
		SetSrc:      func(off uint64, b []byte) { copy(unsafe.Slice((*byte)(unsafe.Add(l.src, off)), len(b)), b) },
		DstWord:     func(off uint64) uint64 { return Word(unsafe.Add(l.dst, off)) },
		HostSignals: true,
	}
	return l
}

// Free releases the connection.
func (l *Loopback) Free() {
	C.lbFree(l.p)
	C.free(l.src)
	C.free(l.dst)
}
