//go:build mscclpp_testhooks

package conform

/*
#include <stdlib.h>
#include "loopback.h"
*/
import "C"

import "unsafe"

// Loopback is the connections of the loopback transport (loopback.c) on one context, both sides
// of each in this process.
type Loopback struct {
	p        unsafe.Pointer
	src, dst [C.LB_CONNS]unsafe.Pointer
	// Conn is connection 0, with connection 1 as its Other.
	Conn *Conn
}

// NewLoopback makes the loopback connections with buffers of size bytes on both sides.
func NewLoopback(size uint64) *Loopback {
	l := &Loopback{}
	var src, dst [C.LB_CONNS]unsafe.Pointer
	for k := range l.src {
		l.src[k], l.dst[k] = C.calloc(1, C.size_t(size)), C.calloc(1, C.size_t(size))
		src[k], dst[k] = l.src[k], l.dst[k]
	}
	l.p = C.lbNew(&src[0], &dst[0], C.uint64_t(size))
	l.Conn = l.conn(0, size)
	l.Conn.Other = l.conn(1, size)
	return l
}

func (l *Loopback) conn(k int, size uint64) *Conn {
	epoch, src, dst := C.lbPeerEpoch(l.p, C.int(k)), l.src[k], l.dst[k]
	return &Conn{
		C:           C.lbConnOf(l.p, C.int(k)),
		Size:        size,
		Epoch:       func() uint64 { return Word(epoch) },
		SetSrc:      func(off uint64, b []byte) { copy(unsafe.Slice((*byte)(unsafe.Add(src, off)), len(b)), b) },
		DstWord:     func(off uint64) uint64 { return Word(unsafe.Add(dst, off)) },
		HostSignals: true,
		Waits:       true,
		ClosePeer:   func() { C.lbClosePeer(l.p, C.int(k)) },
	}
}

// Free releases the connections.
func (l *Loopback) Free() {
	C.lbFree(l.p)
	for k := range l.src {
		C.free(l.src[k])
		C.free(l.dst[k])
	}
}
