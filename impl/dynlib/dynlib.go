// Package dynlib is the one run-time loader of the vendor libraries the
// library uses but never links (CUDA, NVML, ibverbs): it opens each library
// once per process (one dlopen handle, shared by every table of its entry
// points) and fills C tables of entry points from it (dynlib.h).
package dynlib

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "dynlib.h"
*/
import "C"

import (
	"strings"
	"sync"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Lib is one vendor library and the C table of its entry points, loaded on first use.
type Lib struct {
	name  string
	syms  *C.dynSym // NULL-terminated
	size  C.size_t
	code  status.Code // the result code of a failure to load
	once  sync.Once
	err   error
	table unsafe.Pointer // C memory, never freed once filled
}

// New describes library name with its entry points syms (a const dynSym* list) filling a
// table of size bytes; a failure to load is reported with code.
func New(name string, syms unsafe.Pointer, size uintptr, code status.Code) *Lib {
	return &Lib{name: name, syms: (*C.dynSym)(syms), size: C.size_t(size), code: code}
}

// Name is the library's file name.
func (l *Lib) Name() string { return l.name }

// Load opens the library on the first call and returns the same result on every call.
func (l *Lib) Load() error {
	l.once.Do(func() { l.err = l.open() })
	return l.err
}

// Table is the filled table (nil until Load succeeded).
func (l *Lib) Table() unsafe.Pointer { return l.table }

var (
	handlesMu sync.Mutex
	handles   = map[string]unsafe.Pointer{} // library name -> its one dlopen handle, never closed
	opens     = map[string]int{}            // library name -> successful dlopen calls of it
)

// handle opens the library name on the first call for that name and returns the same handle on
// every later one (a failure is not kept: a later call tries again).
func handle(name string, code status.Code) (unsafe.Pointer, error) {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	if h, ok := handles[name]; ok {
		return h, nil
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [512]C.char
	h := C.dynOpen(cname, &msg[0], C.int(len(msg)))
	if h == nil {
		why := strings.TrimPrefix(C.GoString(&msg[0]), name+": ")
		return nil, status.Errorf(code, "no %s: %s", name, why)
	}
	handles[name] = h
	opens[name]++
	return h, nil
}

func (l *Lib) open() error {
	h, err := handle(l.name, l.code)
	if err != nil {
		return err
	}
	table := C.calloc(1, l.size)
	if table == nil {
		return status.Errorf(status.SystemError, "out of memory loading %s", l.name)
	}
	cname := C.CString(l.name)
	defer C.free(unsafe.Pointer(cname))
	var msg [512]C.char
	if C.dynResolve(h, cname, l.syms, table, &msg[0], C.int(len(msg))) != 0 {
		C.free(table)
		return status.Errorf(l.code, "%s", C.GoString(&msg[0]))
	}
	l.table = table
	return nil
}

// Opens is how many times this process has opened the library name through Lib: at most once.
func Opens(name string) int {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	return opens[name]
}

// Symbols lists the names of a NULL-terminated dynSym list (for tests and messages).
func Symbols(syms unsafe.Pointer) []string {
	var out []string
	for s := (*C.dynSym)(syms); s.name != nil; s = (*C.dynSym)(unsafe.Add(unsafe.Pointer(s), C.sizeof_dynSym)) {
		out = append(out, C.GoString(s.name))
	}
	return out
}
