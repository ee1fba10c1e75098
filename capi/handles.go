package main

/*
#include <stdlib.h>
#include "mscclpp.h"
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

const lastErrBytes = 1024

// commState is what a mscclppComm_t handle stands for.
type commState struct {
	comm      *impl.Comm
	mu        sync.Mutex
	lastErr   *C.char // lastErrBytes of C memory, handed out by mscclppGetLastError
	asyncSeen bool
}

var (
	handlesMu sync.RWMutex
	live      = map[uintptr]*commState{} // by handle value: a destroyed handle is never found again
)

// newHandle registers c and writes its handle into *out.
func newHandle(c *impl.Comm, out *C.mscclppComm_t) {
	st := &commState{comm: c, lastErr: (*C.char)(C.calloc(1, lastErrBytes))}
	h := cgo.NewHandle(st)
	handlesMu.Lock()
	live[uintptr(h)] = st
	handlesMu.Unlock()
	*(*uintptr)(unsafe.Pointer(out)) = uintptr(h) // copy the bits: the handle is not a Go pointer
}

// lookup validates a handle passed in by the application.
func lookup(c C.mscclppComm_t) (*commState, error) {
	if c == nil {
		return nil, status.Errorf(status.InvalidUsage, "comm is NULL")
	}
	h := uintptr(unsafe.Pointer(c))
	handlesMu.RLock()
	st := live[h]
	handlesMu.RUnlock()
	if st == nil {
		return nil, status.Errorf(status.InvalidUsage, "communicator %#x is not valid: destroyed, or never returned by mscclppCommInitRank", h)
	}
	return st, nil
}

// release forgets a handle; later lookups fail with InvalidUsage.
func release(c C.mscclppComm_t) (*commState, bool) {
	h := uintptr(unsafe.Pointer(c))
	handlesMu.Lock()
	st, ok := live[h]
	delete(live, h)
	handlesMu.Unlock()
	if ok {
		cgo.Handle(h).Delete()
	}
	return st, ok
}

func (st *commState) setLastErr(msg string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	buf := unsafe.Slice((*byte)(unsafe.Pointer(st.lastErr)), lastErrBytes)
	n := copy(buf[:lastErrBytes-1], msg)
	buf[n] = 0
}

// lastError returns the communicator's last-error text, taking in a newly found async error.
func (st *commState) lastError() *C.char {
	if !st.asyncSeen {
		if err := st.comm.AsyncErr(); err != nil {
			st.asyncSeen = true
			logx.Warnf("asynchronous error: %v", err)
			st.setLastErr(err.Error())
		}
	}
	return st.lastErr
}

// fail records err as the last error of st (may be nil) and of the process, logs it at WARN,
// and returns its result code.
func fail(st *commState, fn string, err error) C.mscclppResult_t {
	msg := fmt.Sprintf("%s: %v", fn, err)
	logx.WarnfDepth(1, "%s", msg)
	cmsg := C.CString(msg)
	C.capiSetGlobalError(cmsg)
	C.free(unsafe.Pointer(cmsg))
	if st != nil {
		st.setLastErr(msg)
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

// call runs one API call on comm: validate the handle, dispatch, map the error.
func call(fn string, comm C.mscclppComm_t, res *C.mscclppResult_t, f func(*impl.Comm) error) {
	st, err := lookup(comm)
	if err != nil {
		*res = fail(nil, fn, err)
		return
	}
	*res = result(st, fn, f(st.comm))
}

func nullArg(name string) error {
	return status.Errorf(status.InvalidArgument, "%s is NULL", name)
}

func main() {}
