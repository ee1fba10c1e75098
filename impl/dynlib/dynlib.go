// Package dynlib is the one run-time loader of the vendor libraries the
// library uses but never links (CUDA, NVML, ibverbs): it opens a library once
// with go-nvml's pkg/dl and fills a C table of its entry points (dynlib.h).
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

	"github.com/NVIDIA/go-nvml/pkg/dl"

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

func (l *Lib) open() error {
	lib := dl.New(l.name, dl.RTLD_LAZY|dl.RTLD_LOCAL)
	if err := lib.Open(); err != nil {
		why := strings.TrimPrefix(err.Error(), l.name+": ")
		return status.Errorf(l.code, "no %s: %s", l.name, why)
	}
	table := C.calloc(1, l.size)
	if table == nil {
		_ = lib.Close()
		return status.Errorf(status.SystemError, "out of memory loading %s", l.name)
	}
	cname := C.CString(l.name)
	defer C.free(unsafe.Pointer(cname))
	var msg [512]C.char
	if C.dynResolve(cname, l.syms, table, &msg[0], C.int(len(msg))) != 0 {
		C.free(table)
		_ = lib.Close()
		return status.Errorf(l.code, "%s", C.GoString(&msg[0]))
	}
	// lib stays open: the table points into it for the life of the process.
	l.table = table
	return nil
}

// Symbols lists the names of a NULL-terminated dynSym list (for tests and messages).
func Symbols(syms unsafe.Pointer) []string {
	var out []string
	for s := (*C.dynSym)(syms); s.name != nil; s = (*C.dynSym)(unsafe.Add(unsafe.Pointer(s), C.sizeof_dynSym)) {
		out = append(out, C.GoString(s.name))
	}
	return out
}
