package cuda

/*
#include "calls.h"
*/
import "C"

import (
	"strconv"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Error is a failed driver call; status.CodeOf maps it (and errors wrapping it) to UnhandledCudaError.
type Error struct {
	Call string // the driver call, e.g. "cuMemAlloc"
	Code int    // its CUresult
	Name string // the result's name, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Desc string // the driver's description, e.g. "out of memory"
}

// Error returns "<call>: <NAME>: <description>".
func (e *Error) Error() string {
	if e.Desc == "" {
		return e.Call + ": " + e.Name
	}
	return e.Call + ": " + e.Name + ": " + e.Desc
}

// As lets errors.As find a *status.Error with code UnhandledCudaError in e.
func (e *Error) As(target any) bool {
	if t, ok := target.(**status.Error); ok {
		*t = &status.Error{Code: status.UnhandledCudaError, Msg: e.Error()}
		return true
	}
	return false
}

// newError names code with the driver's table when api is loaded, else with the built-in one.
func newError(api *C.cuwApi, call string, code int) *Error {
	e := &Error{Call: call, Code: code}
	if api != nil {
		if s := C.cuwErrorName(api, C.int(code)); s != nil {
			e.Name = C.GoString(s)
		}
		if s := C.cuwErrorString(api, C.int(code)); s != nil {
			e.Desc = C.GoString(s)
		}
	}
	if k, ok := knownErrors[code]; ok {
		if e.Name == "" {
			e.Name = k[0]
		}
		if e.Desc == "" {
			e.Desc = k[1]
		}
	}
	if e.Name == "" {
		e.Name = "CUresult " + strconv.Itoa(code)
	}
	return e
}

// NewError returns the error for a driver call that returned code (names from the built-in table).
func NewError(call string, code int) *Error { return newError(nil, call, code) }
