package engine

/*
#include "engine.h"
#include "report.h"
*/
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// HangFunc is told, once per communicator, that a signal wait on conn for epoch want has made no
// progress for waited: comm is the communicator's engine state (Comm.Ptr).
type HangFunc func(comm unsafe.Pointer, conn *Conn, want uint64, waited time.Duration)

var hangFunc atomic.Pointer[HangFunc]

// SetHangFunc sets the function that makes the hang report (nil: none).
func SetHangFunc(f HangFunc) {
	if f == nil {
		hangFunc.Store(nil)
		return
	}
	hangFunc.Store(&f)
}

// engGoHangReport is report.c's way into Go: it runs on the waiting thread, once per communicator.
//
//export engGoHangReport
func engGoHangReport(comm *C.engComm, conn *C.engConn, want, waitedNs C.uint64_t) {
	defer func() { _ = recover() }() // a report must not take the wait down with it
	if f := hangFunc.Load(); f != nil {
		(*f)(unsafe.Pointer(comm), &Conn{p: conn}, uint64(want), time.Duration(waitedNs))
	}
}

// SetHangReport makes a signal wait on this communicator that made no progress for d report once
// (0: never).
func (c *Comm) SetHangReport(d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.p.hangReportNs = C.uint64_t(d)
}

// LastText is the communicator's last error text ("" when none).
func (c *Comm) LastText() string {
	if p := C.errLast(&c.p.err); p != nil {
		return C.GoString(p)
	}
	return ""
}

// ConnStat is a snapshot of a connection's counters for reports.
type ConnStat struct {
	ConnID, Peer, Tag, PeerPid int
	Transport                  string
	Device                     bool   // CUDA mode: epochs and FIFO head in device memory, not read
	WaitingFor, Signalled      uint64 // the epoch the last wait waited for; the one the peer's signals reached
	SignalsSent, BytesPut      uint64
	StallWant                  uint64        // the epoch a wait without progress waited for (0: none)
	Stalled                    time.Duration // for how long, when the peer has not reached StallWant
	Head, Tail, Served         uint64
	ProxyRunning               bool
	PeerGone, PeerClosed       bool
}

// Stat reads c's counters.
func (c *Conn) Stat() ConnStat {
	var s C.engConnStat
	C.engConnSnapshot(c.p, &s)
	return ConnStat{
		ConnID: int(s.connId), Peer: int(s.peerRank), Tag: int(s.tag), PeerPid: int(s.peerPid),
		Transport: C.GoString(s.transport), Device: s.device != 0,
		WaitingFor: uint64(s.waitingFor), Signalled: uint64(s.signalled),
		SignalsSent: uint64(s.signalsSent), BytesPut: uint64(s.bytesPut),
		StallWant: uint64(s.stallWant), Stalled: time.Duration(s.stalledNs),
		Head: uint64(s.head), Tail: uint64(s.tail), Served: uint64(s.served),
		ProxyRunning: s.proxyRunning != 0, PeerGone: s.peerGone != 0, PeerClosed: s.peerClosed != 0,
	}
}
