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

// NewProxyState creates the state of one CUDA-mode proxy context on dev, whatever transport it serves: a non-blocking stream for the copies and one for the FIFO tail, the tail word in device memory (zero) with its pinned staging words (on numaNode when >= 0), and the CPUs (none: do not bind) its proxy thread binds to; impl/cudaproxy makes it for the CUDA-mode transports (P2P, Ethernet, IB), which hang it on their engine context.
func NewProxyState(dev Device, cpus []int, numaNode int) (unsafe.Pointer, error) {
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
	var st *C.cudaProxyState
	var call *C.char
	if err := dev.fail(C.cudaProxyStateNew(dev.api, dev.ctx(), first, C.int(len(ccpus)), C.int(numaNode), &st, &call), call); err != nil {
		return nil, err
	}
	return unsafe.Pointer(st), nil
}

// SyncProxyState waits until every copy and tail publication the state's streams hold is done (its proxy stopped: nothing new is enqueued).
func SyncProxyState(state unsafe.Pointer) error {
	if state == nil {
		return nil
	}
	st := (*C.cudaProxyState)(state)
	var call *C.char
	if rc := C.cudaProxyStateSync(st, &call); rc != 0 {
		return newError(st.api, C.GoString(call), int(rc))
	}
	return nil
}

// FreeProxyState waits for the state's stream and frees it; its proxy must be stopped and its connections gone.
func FreeProxyState(state unsafe.Pointer) error {
	if state == nil {
		return nil
	}
	st := (*C.cudaProxyState)(state)
	api := st.api
	var call *C.char
	if rc := C.cudaProxyStateFree(st, &call); rc != 0 {
		return newError(api, C.GoString(call), int(rc))
	}
	return nil
}

// ProxyTail returns the device address of the state's FIFO tail word, which initiators read as triggerFifoTail.
func ProxyTail(state unsafe.Pointer) uint64 { return uint64((*C.cudaProxyState)(state).devTail) }

// BindResult reports whether the state's proxy thread has run its initialisation and, if it was asked to bind to CPUs and the system refused, why (a refusal is not a failure of the proxy).
func BindResult(state unsafe.Pointer) (done bool, err error) {
	var d, e C.int
	C.cudaProxyStateBindResult((*C.cudaProxyState)(state), &d, &e)
	if e != 0 {
		err = fmt.Errorf("pthread_setaffinity_np: %w", syscall.Errno(e))
	}
	return d != 0, err
}
