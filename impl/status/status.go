// Package status holds the MSCCL++ result codes and the error type that carries one.
//
// It is the one place that maps Go errors to mscclppResult_t values: every
// package returns errors built here (or wrapped around them with %w), and
// capi turns them into a code with CodeOf. Its C side (errs.h, errs.c) is the
// one home of error text below everything else: the result-code strings, the
// process's last error, each communicator's error record and the fork check.
package status

/*
#cgo CFLAGS: -O2 -Wall
#include <stdlib.h>
#include "errs.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// Code is an mscclppResult_t value.
type Code int32

// The result codes of the 0.1 API; the values are ABI.
const (
	Success            Code = 0
	UnhandledCudaError Code = 1
	SystemError        Code = 2
	InternalError      Code = 3
	InvalidArgument    Code = 4
	InvalidUsage       Code = 5
	RemoteError        Code = 6
	InProgress         Code = 7
	NumResults         Code = 8
)

// String returns the exact text mscclppGetErrorString returns for c (errs.c's table).
func (c Code) String() string { return C.GoString(C.errString(C.int(c))) }

// SetLast makes msg the process's last error (mscclppGetLastError(NULL)).
func SetLast(msg string) {
	cmsg := C.CString(msg)
	defer C.free(unsafe.Pointer(cmsg))
	C.errSet(nil, 0, cmsg)
}

// Last is the process's last error text ("" when none).
func Last() string { return C.GoString(C.errLast(nil)) }

// Error is an error that carries a result code.
type Error struct {
	Code Code
	Msg  string // the whole message, the cause's text included
	Err  error  // optional cause, for errors.Is / errors.As
}

func (e *Error) Error() string {
	if e.Msg == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code c and a formatted message; a %w verb wraps a cause.
func Errorf(c Code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: c, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// CodeOf returns the result code for err: the innermost *Error's code, else a
// code inferred from well-known causes (timeouts and dead peers are
// RemoteError, other OS errors SystemError), else InternalError.
func CodeOf(err error) Code {
	if err == nil {
		return Success
	}
	var se *Error
	if errors.As(err, &se) {
		return se.Code
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE):
		return RemoteError
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return SystemError
	}
	return InternalError
}
