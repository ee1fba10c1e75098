package ib

/*
#include <stdlib.h>
#include "heartbeat.h"
*/
import "C"

import (
	"sync"
	"time"
	"unsafe"

	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// beatSlotBytes is the memory of one connection's heartbeat slot (one 8-byte count, on a
// cache line of its own).
const beatSlotBytes = 64

// byeBound bounds the goodbyes of a destroy, all of them together.
const byeBound = 30 * time.Millisecond

// beatSlot is the registered memory the peer writes its beats into, for one connection.
type beatSlot struct {
	mem unsafe.Pointer
	mr  *verbs.MR
}

func newBeatSlot(x *verbs.Context) (*beatSlot, error) {
	mem := C.calloc(1, beatSlotBytes)
	if mem == nil {
		return nil, status.Errorf(status.SystemError, "IB heartbeat slot: out of memory")
	}
	mr, err := x.RegisterMR(uint64(uintptr(mem)), beatSlotBytes)
	if err != nil {
		C.free(mem)
		return nil, err
	}
	return &beatSlot{mem: mem, mr: mr}, nil
}

// free releases the slot once nothing can write it (its connection's QP closed).
func (s *beatSlot) free() {
	if s == nil {
		return
	}
	s.mr.Close()
	C.free(s.mem)
}

// beats ticks the heartbeats of a transport's connections (heartbeat.h) from one goroutine.
type beats struct {
	mu   sync.Mutex
	list []*C.ibBeat
	dead time.Duration // a peer silent this long is unreachable: the bootstrap timeout
	stop chan struct{}
	done chan struct{}
}

// beatTick is how often beats go out and slots are looked at: an eighth of the bound (at
// least 10 ms, at most 500 ms), so a loss is reported within dead + 0.5 s.
func beatTick(dead time.Duration) time.Duration {
	return min(max(dead/8, 10*time.Millisecond), 500*time.Millisecond)
}

// add prepares the heartbeat of connection conn (its QP in RTS): beats will go to peer's slot,
// the peer's come into mine.
func (b *beats) add(conn *engine.Conn, q *verbs.QP, mine *beatSlot, peer verbs.MRInfo) error {
	p := C.ibBeatNew((*C.engConn)(conn.Ptr()), (*C.ibQp)(q.CQP()), (*C.uint64_t)(mine.mem), C.uint64_t(peer.Addr), C.uint32_t(peer.Rkey))
	if p == nil {
		return status.Errorf(status.SystemError, "IB heartbeat: out of memory")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.list = append(b.list, p)
	return nil
}

// start arms every connection's heartbeat and starts the ticks, once every peer has set up its
// side (before, a beat could reach a QP not yet ready to accept it).
func (b *beats) start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.list {
		C.ibBeatArm(p)
	}
	if b.stop == nil && len(b.list) > 0 {
		b.stop, b.done = make(chan struct{}), make(chan struct{})
		go b.loop()
	}
}

func (b *beats) loop() {
	defer close(b.done)
	t := time.NewTicker(beatTick(b.dead))
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		b.mu.Lock()
		for _, p := range b.list {
			C.ibBeatTick(p, C.uint64_t(b.dead.Nanoseconds()))
		}
		b.mu.Unlock()
	}
}

// close stops the ticks and says goodbye on every connection (before the QPs are closed).
func (b *beats) close() {
	b.mu.Lock()
	stop := b.stop
	b.mu.Unlock()
	if stop != nil {
		close(stop)
		<-b.done
	}
	// the goodbyes share one short bound: a destroy waits for no peer (one lost with its link
	// never completes its goodbye)
	until := time.Now().Add(byeBound)
	for _, p := range b.list {
		C.ibBeatBye(p, C.int(max(time.Until(until).Milliseconds(), 1)))
		C.free(unsafe.Pointer(p))
	}
	b.list, b.stop = nil, nil
}
