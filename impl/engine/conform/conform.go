//go:build mscclpp_testhooks

// Package conform is the one conformance suite of the engine's contract with a transport
// (impl/engine/transport.h): every transport's package runs Run over a connection of its own
// (SHM, Ethernet, IB on the verbs double, P2P on the fake driver, and a loopback transport
// built from the contract alone), so that a rule the transports share is tested the same way
// on each.
package conform

/*
#cgo CFLAGS: -O2 -Wall
#include "conform.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	_ "github.com/mscclpp-go/mscclpp/impl/engine" // the engine's C, which conform.c calls
)

const (
	data   = 1 // mscclppData
	flag   = 2 // mscclppFlag
	syncOp = 4 // mscclppSync

	invalidArgument = 4 // mscclppInvalidArgument
	remoteError     = 6 // mscclppRemoteError
	inProgress      = 7 // mscclppInProgress: a wait timed out
)

// Conn is one connection of a transport under test, seen from its sending side.
type Conn struct {
	// C is the sending side's engConn (its ops table set, its communicator and context wired;
	// the context registered, so that its proxy can serve its FIFO).
	C unsafe.Pointer
	// Size is the bytes of handle 1 on both sides: puts go from local handle 1 to remote handle 1.
	Size uint64
	// Epoch reads the peer's epoch of the connection, where the signals land.
	Epoch func() uint64
	// SetSrc writes b into local handle 1 at off; DstWord reads the 8-byte word of remote handle
	// 1 at off, as the peer sees it.
	SetSrc  func(off uint64, b []byte)
	DstWord func(off uint64) uint64
	// HostSignals: host threads may signal the connection (else only the proxy does, as in CUDA mode).
	HostSignals bool
	// Waits: the connection's device view is wired for host waits (mscclppConnWaitNext on it
	// waits for the peer's signals to this side: its FIFO at the context, its epoch and counter).
	Waits bool
	// Other is a second connection of the same transport on the same context, or nil (Fails says
	// why): a failed operation on this one must fail only this one.
	Other *Conn
	// Break makes the transport fail this connection its own way (a lost socket, a QP in error):
	// its next operation returns mscclppRemoteError. Nil: the suite fails the connection's
	// operations through its ops table (engConnFail with mscclppRemoteError, as a transport does).
	Break func()
	// ClosePeer closes the peer's side of the connection as a destroy or an exit does, so that the
	// transport learns it; nil where the transport cannot (NoPeerClose says why).
	ClosePeer   func()
	NoPeerClose string
	// PeerExits: the transport learns of a closed peer from its process's exit (the engine's pid
	// check of every wait, as SHM and P2P do): the suite makes a child process the connection's
	// peer and kills it, where ClosePeer is nil.
	PeerExits bool
	// Fails says why Other is nil.
	Fails string
}

// Word is a reader of the 8-byte word at p (for Conn.Epoch and Conn.DstWord over host memory).
func Word(p unsafe.Pointer) uint64 { return uint64(C.cfLoad64(p)) }

func (c *Conn) do(typ, dstOff, srcOff, size uint64) int {
	return int(C.cfDo(c.C, C.uint64_t(typ), 1, C.uint64_t(dstOff), 1, C.uint64_t(srcOff), C.uint64_t(size)))
}

// awaitEpoch polls the peer's epoch until it reaches want or 10 s passed; it returns the last value read.
func (c *Conn) awaitEpoch(want uint64) uint64 {
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := c.Epoch()
		if v >= want || time.Now().After(deadline) {
			return v
		}
		runtime.Gosched()
	}
}

// Run runs every case of the suite on c, in order, as subtests of t. The last two end
// connections: FailedOpFailsOnlyItsConnection fails c, PeerCloseWakesSleepers closes the peer
// of c.Other (of c where there is no Other).
func Run(t *testing.T, c *Conn) {
	t.Run("SignalsInOrder", func(t *testing.T) { signalsInOrder(t, c) })
	t.Run("DataBeforeSignal", func(t *testing.T) { dataBeforeSignal(t, c) })
	t.Run("RefusedKeepsConnection", func(t *testing.T) { refusedKeepsConnection(t, c) })
	t.Run("FailedOpFailsOnlyItsConnection", func(t *testing.T) { failedOpFailsOnlyItsConnection(t, c) })
	closing := c
	if c.Other != nil {
		closing = c.Other
	}
	t.Run("PeerCloseWakesSleepers", func(t *testing.T) { peerCloseWakesSleepers(t, closing) })
}

// signalsInOrder: host threads and the proxy signal the connection at once (Flag, and puts with a
// Flag); the peer's epoch never goes backwards, and ends at the number of signals sent.
func signalsInOrder(t *testing.T, c *Conn) {
	const threads, each, proxied = 4, 3000, 3000
	base := uint64(C.cfSignalsDone(c.C))
	var stop atomic.Bool
	var backwards atomic.Int64
	var lowest, highest atomic.Uint64
	var watch sync.WaitGroup
	watch.Add(1)
	go func() { // the peer: its epoch never goes down
		defer watch.Done()
		last := c.Epoch()
		for !stop.Load() {
			if v := c.Epoch(); v < last {
				if backwards.Add(1) == 1 {
					highest.Store(last)
					lowest.Store(v)
				}
			} else {
				last = v
			}
		}
	}()
	C.cfWatch(c.C)
	if C.cfProxyStart(c.C) != 0 {
		t.Fatal("the proxy did not start")
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	hostThreads := 0
	if c.HostSignals {
		hostThreads = threads
	}
	for i := 0; i < hostThreads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for k := 0; k < each; k++ {
				typ, size := uint64(flag), uint64(0)
				if k%2 == 1 {
					typ, size = data|flag, 8
				}
				if rc := c.do(typ, uint64(i)*8, uint64(i)*8, size); rc != 0 {
					failed.Add(1)
					return
				}
			}
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if C.cfPushFlags(c.C, proxied) != 0 {
			failed.Add(1)
		}
	}()
	wg.Wait()
	C.cfProxyStop(c.C)
	var calls C.uint64_t
	inversions := C.cfUnwatch(&calls)
	if rc := c.do(syncOp, 0, 0, 0); rc != 0 {
		t.Errorf("Sync after the signals: %d", rc)
	}
	want := base + uint64(hostThreads*each+proxied)
	got := c.awaitEpoch(want)
	stop.Store(true)
	watch.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d signallers failed", failed.Load())
	}
	if inversions != 0 {
		t.Errorf("%d of %d signal values reached the transport below one it had already sent: the engine's signal lock does not order them",
			inversions, calls)
	}
	if n := backwards.Load(); n != 0 {
		t.Errorf("the peer's epoch went backwards %d times (first from %d to %d): two signallers sent their counts out of order",
			n, highest.Load(), lowest.Load())
	}
	if got != want {
		t.Errorf("the peer's epoch ended at %d, want %d (%d host threads x %d signals and %d through the proxy)",
			got, want, hostThreads, each, proxied)
	}
}

// dataBeforeSignal: a put with a signal; once the peer sees the signal's count it sees the put's
// data (each round puts its own number, from a source of its own).
func dataBeforeSignal(t *testing.T, c *Conn) {
	rounds := c.Size/8 - 1
	if rounds > 200 {
		rounds = 200
	}
	base := c.Epoch()
	var stop atomic.Bool
	var bad atomic.Int64
	var seen sync.WaitGroup
	seen.Add(1)
	go func() {
		defer seen.Done()
		for !stop.Load() {
			e := c.Epoch()
			if e > base && c.DstWord(0) < e-base {
				bad.Add(1)
			}
		}
	}()
	var b [8]byte
	for i := uint64(1); i <= rounds; i++ {
		*(*uint64)(unsafe.Pointer(&b[0])) = i
		c.SetSrc(8*i, b[:])
		if rc := c.do(data|flag, 0, 8*i, 8); rc != 0 {
			t.Fatalf("round %d: put with a signal: %d", i, rc)
		}
	}
	if rc := c.do(syncOp, 0, 0, 0); rc != 0 {
		t.Errorf("Sync: %d", rc)
	}
	got := c.awaitEpoch(base + rounds)
	stop.Store(true)
	seen.Wait()
	if got != base+rounds {
		t.Errorf("the peer's epoch is %d, want %d", got, base+rounds)
	}
	if w := c.DstWord(0); w != rounds {
		t.Errorf("the peer's word is %d after the last round, want %d", w, rounds)
	}
	if n := bad.Load(); n != 0 {
		t.Errorf("%d times the peer saw a signal before the data it announces", n)
	}
}

// refusedKeepsConnection: a put the engine's checks refuse returns mscclppInvalidArgument (the
// proxy's "refused, keep serving") and does not mark the connection failed; the next signal goes.
func refusedKeepsConnection(t *testing.T, c *Conn) {
	base := c.Epoch()
	if rc := c.do(data|flag, c.Size-4, 0, 8); rc != invalidArgument {
		t.Errorf("a put past the end of the peer's buffer returned %d, want %d (mscclppInvalidArgument)", rc, invalidArgument)
	}
	if C.cfFailed(c.C) != 0 {
		t.Errorf("a refused put marked the connection failed")
	}
	if rc := c.do(flag|syncOp, 0, 0, 0); rc != 0 {
		t.Fatalf("a signal after the refused put: %d", rc)
	}
	if got := c.awaitEpoch(base + 1); got != base+1 {
		t.Errorf("the peer's epoch is %d after the signal, want %d (the refused put sent no signal)", got, base+1)
	}
}
