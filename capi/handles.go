package main

/*
#include <stdlib.h>
#include "../include/mscclpp.h"
#include "forward.h"
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"sync"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// commState is what a mscclppComm_t handle stands for.
type commState struct {
	comm *impl.Comm
	// inUse is held shared by every call on the communicator and exclusively by
	// mscclppCommDestroy, which therefore waits for calls already inside and
	// makes later ones fail with InvalidUsage instead of touching freed memory.
	inUse  sync.RWMutex
	closed bool
}

var (
	handlesMu sync.RWMutex
	live      = map[uintptr]*commState{} // by handle value: a destroyed handle is never found again
)

// newHandle registers c and writes its handle into *out.
func newHandle(c *impl.Comm, out *C.mscclppComm_t) {
	st := &commState{comm: c}
	h := cgo.NewHandle(st)
	handlesMu.Lock()
	live[uintptr(h)] = st
	handlesMu.Unlock()
	*(*uintptr)(unsafe.Pointer(out)) = uintptr(h) // copy the bits: the handle is not a Go pointer
}

func invalidHandle(h uintptr) error {
	return status.Errorf(status.InvalidUsage, "communicator %#x is not valid: destroyed, or never returned by mscclppCommInitRank", h)
}

// enter validates a handle passed in by the application and holds it against
// mscclppCommDestroy until leave.
func enter(c C.mscclppComm_t) (*commState, error) {
	if c == nil {
		return nil, status.Errorf(status.InvalidUsage, "comm is NULL")
	}
	h := uintptr(unsafe.Pointer(c))
	handlesMu.RLock()
	st := live[h]
	handlesMu.RUnlock()
	if st == nil {
		return nil, invalidHandle(h)
	}
	st.inUse.RLock()
	if st.closed {
		st.inUse.RUnlock()
		return nil, invalidHandle(h)
	}
	return st, nil
}

func (st *commState) leave() { st.inUse.RUnlock() }

// release forgets a handle and waits until no call is inside it; later calls fail with
// InvalidUsage. It reports false for a handle that is not live.
func release(c C.mscclppComm_t) (*commState, bool) {
	h := uintptr(unsafe.Pointer(c))
	handlesMu.Lock()
	st, ok := live[h]
	delete(live, h)
	handlesMu.Unlock()
	if !ok {
		return nil, false
	}
	cgo.Handle(h).Delete()
	st.inUse.Lock()
	st.closed = true
	st.inUse.Unlock()
	return st, true
}

// fail records err as the last error of st (may be nil) and of the process (impl/status), logs it at WARN,
// and returns its result code.
func fail(st *commState, fn string, err error) C.mscclppResult_t {
	msg := fmt.Sprintf("%s: %v", fn, err)
	logx.WarnfDepth(1, "%s", msg)
	if st != nil {
		st.comm.SetLastError(msg) // the communicator's and the process's
	} else {
		status.SetLast(msg)
	}
	return C.mscclppResult_t(status.CodeOf(err))
}

// result maps err (nil: success) for the call fn on st.
func result(st *commState, fn string, err error) C.mscclppResult_t {
	if err == nil {
		return C.mscclppSuccess
	}
	return fail(st, fn, err)
}

// guard turns a panic into InternalError plus a message; use as `defer guard(fn, &res)`.
func guard(fn string, res *C.mscclppResult_t) {
	if r := recover(); r != nil {
		*res = fail(nil, fn, status.Errorf(status.InternalError, "internal error (recovered panic): %v", r))
	}
}

// call runs one API call on comm: validate and hold the handle, dispatch, map the error.
func call(fn string, comm C.mscclppComm_t, res *C.mscclppResult_t, f func(*impl.Comm) error) {
	st, err := enter(comm)
	if err != nil {
		*res = fail(nil, fn, err)
		return
	}
	defer st.leave()
	*res = result(st, fn, f(st.comm))
}

func nullArg(name string) error {
	return status.Errorf(status.InvalidArgument, "%s is NULL", name)
}

func main() {}
