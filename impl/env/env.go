// Package env reads the process environment through the C library's getenv,
// at the moment of the call.
//
// Go's os.Getenv reads a copy of the environment taken when the runtime
// started, which in a c-shared library is when the library was loaded: a
// variable the application sets with setenv(3) afterwards (or Python's
// os.environ, which calls putenv) is invisible to it. Upstream MSCCL++ reads
// its variables with getenv when it needs them, so every variable this
// library reads is declared in one table (vars.go) and read through its Var.
//
// Each variable found set (non-empty) is reported once per value to the
// function given to SetReporter, which logx uses for NCCL's
// "X set by environment to Y" lines under the ENV subsystem.
package env

/*
#include <stdlib.h>
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

var (
	reporter atomic.Pointer[func(name, value string)]
	reported sync.Map // name -> the value last reported
	cnames   sync.Map // name -> *C.char, made once: some variables are read on every collective
)

// cname returns name as a C string that lives as long as the process.
func cname(name string) *C.char {
	if p, ok := cnames.Load(name); ok {
		return p.(*C.char)
	}
	c := C.CString(name)
	if p, loaded := cnames.LoadOrStore(name, c); loaded {
		C.free(unsafe.Pointer(c))
		return p.(*C.char)
	}
	return c
}

// raw returns the variable's value as getenv sees it now, reporting nothing.
func raw(name string) (string, bool) {
	p := C.getenv(cname(name))
	if p == nil {
		return "", false
	}
	return C.GoString(p), true
}

// SetReporter sets the function told of each variable read with a value not
// reported before; nil stops the reports. f must not read the environment
// through Var.Lookup for the same name.
func SetReporter(f func(name, value string)) {
	if f == nil {
		reporter.Store(nil)
		return
	}
	reporter.Store(&f)
}

func report(name, value string) {
	if prev, ok := reported.Load(name); ok && prev.(string) == value {
		return // the common case: no write
	}
	if prev, loaded := reported.Swap(name, value); loaded && prev.(string) == value {
		return
	}
	if f := reporter.Load(); f != nil {
		(*f)(name, value)
	}
}

// Forget makes every variable be reported again at its next read. For tests.
func Forget() { reported.Clear() }
