package cuda

/*
#include "calls.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// NewP2PState creates the P2P transport state of one proxy context on dev: a non-blocking stream for the copies and one for the FIFO tail, the tail word in device memory (zero) with its pinned staging words (on numaNode when >= 0), and the CPUs (none: do not bind) its proxy thread binds to; the CUDA-mode transports (impl/p2p, impl/eth) hang it on their engine context.
func NewP2PState(dev Device, cpus []int, numaNode int) (unsafe.Pointer, error) {
	if err := dev.check(); err != nil {
		return nil, err
	}
	ccpus := make([]C.int, len(cpus))
	for i, c := range cpus {
		if c < 0 {
			return nil, status.Errorf(status.InvalidArgument, "cuda: negative cpu %d", c)
		}
		ccpus[i] = C.int(c)
	}
	var first *C.int
	if len(ccpus) > 0 {
		first = &ccpus[0]
	}
	var st *C.cudaP2PState
	var call *C.char
	if err := dev.fail(C.cudaP2PStateNew(dev.api, dev.ctx(), first, C.int(len(ccpus)), C.int(numaNode), &st, &call), call); err != nil {
		return nil, err
	}
	return unsafe.Pointer(st), nil
}

// SyncP2PState waits until every copy and tail publication the state's streams hold is done (its proxy stopped: nothing new is enqueued).
func SyncP2PState(state unsafe.Pointer) error {
	if state == nil {
		return nil
	}
	st := (*C.cudaP2PState)(state)
	var call *C.char
	if rc := C.cudaP2PStateSync(st, &call); rc != 0 {
		return newError(st.api, C.GoString(call), int(rc))
	}
	return nil
}

// FreeP2PState waits for the state's stream and frees it; its proxy must be stopped and its connections gone.
func FreeP2PState(state unsafe.Pointer) error {
	if state == nil {
		return nil
	}
	st := (*C.cudaP2PState)(state)
	api := st.api
	var call *C.char
	if rc := C.cudaP2PStateFree(st, &call); rc != 0 {
		return newError(api, C.GoString(call), int(rc))
	}
	return nil
}

// P2PTail returns the device address of the state's FIFO tail word, which initiators read as triggerFifoTail.
func P2PTail(state unsafe.Pointer) uint64 { return uint64((*C.cudaP2PState)(state).devTail) }

// BindResult reports whether the state's proxy thread has run its initialisation and, if it was asked to bind to CPUs and the system refused, why (a refusal is not a failure of the proxy).
func BindResult(state unsafe.Pointer) (done bool, err error) {
	var d, e C.int
	C.cudaP2PBindResult((*C.cudaP2PState)(state), &d, &e)
	if e != 0 {
		err = fmt.Errorf("pthread_setaffinity_np: %w", syscall.Errno(e))
	}
	return d != 0, err
}
