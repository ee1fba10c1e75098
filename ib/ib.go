// Package ib is the InfiniBand provider of libmscclpp: it loads
// libibverbs.so.1 at run time (dlopen, never linked; entry points by
// dlvsym at IBVERBS_1.1), finds devices (through the verbs device list,
// with github.com/Mellanox/rdmamap to map network interfaces and PCI
// addresses to RDMA devices), and sets up what an RC connection needs: a
// device context and PD, memory regions, a completion queue, an RC queue
// pair and its INIT -> RTR -> RTS transitions from a QPInfo exchanged
// through the bootstrap.
//
// The data path is C (ibcore.h): ibWrite, ibWriteSignal, ibPoll, ibFlush,
// called without entering Go; the IB transport (impl/ib) wraps them as an
// engOps table of the C engine. This package is the verbs binding only: it
// never imports the engine or a transport.
//
// Building it needs no libibverbs-dev: ibvapi.h declares the verbs it uses
// with their real layouts (checked against verbs.h where installed).
//
// Environment: MSCCLPP_IBV_SO names the library to load instead of
// libibverbs.so.1; MSCCLPP_IB_GID_INDEX the GID index (default 0; RoCE
// needs a populated GID, InfiniBand routes by LID).
package ib

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "ibcore.h"
static const dynSym* ibSymsPtr(void) { return ibSyms; }
*/
import "C"

import (
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/dynlib"
	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// DefaultLibrary is the verbs library Load opens unless MSCCLPP_IBV_SO names another.
const DefaultLibrary = "libibverbs.so.1"

// The variables that choose this package's settings: the communicator's core reads them
// (impl/ib declares them) and hands their values to Load and Open.
const (
	EnvLibrary  = string(env.IBVSo)
	EnvGIDIndex = string(env.IBGIDIndex)
)

// Lib is one loaded libibverbs: a C table of its entry points, kept for the
// life of the process (the library is never closed).
type Lib struct {
	path string
	api  *C.ibApi
}

// Path is the name the library was opened with.
func (l *Lib) Path() string { return l.path }

var libs struct {
	sync.Mutex
	m map[string]*libEntry
}

type libEntry struct {
	once sync.Once
	lib  *Lib
	err  error
}

// Load opens the verbs library at path (MSCCLPP_IBV_SO as the caller read it; "":
// DefaultLibrary) once per process and returns the same result on every call.
func Load(path string) (*Lib, error) {
	if path == "" {
		path = DefaultLibrary
	}
	return LoadPath(path)
}

// LoadPath opens the verbs library at path once (per path) and resolves
// every entry point; a missing library or symbol is an error naming it.
func LoadPath(path string) (*Lib, error) {
	libs.Lock()
	if libs.m == nil {
		libs.m = map[string]*libEntry{}
	}
	e := libs.m[path]
	if e == nil {
		e = &libEntry{}
		libs.m[path] = e
	}
	libs.Unlock()
	e.once.Do(func() {
		l := dynlib.New(path, unsafe.Pointer(C.ibSymsPtr()), C.sizeof_ibApi, status.SystemError)
		if err := l.Load(); err != nil {
			e.err = status.Errorf(status.SystemError, "IB unavailable: %s", strings.TrimPrefix(err.Error(), "no "))
			return
		}
		e.lib = &Lib{path: path, api: (*C.ibApi)(l.Table())}
	})
	return e.lib, e.err
}

// DeviceNames lists the devices the verbs library reports (none is not an error).
func (l *Lib) DeviceNames() ([]string, error) {
	const max = 64
	names := (*[max][C.IBA_SYSFS_NAME_MAX]C.char)(C.calloc(max, C.IBA_SYSFS_NAME_MAX))
	defer C.free(unsafe.Pointer(names))
	var msg [512]C.char
	n := C.ibDeviceNames(l.api, &names[0], max, &msg[0], C.int(len(msg)))
	if n < 0 {
		return nil, status.Errorf(status.SystemError, "%s: %s", l.path, C.GoString(&msg[0]))
	}
	out := make([]string, 0, int(n))
	for i := 0; i < int(n); i++ {
		out = append(out, C.GoString(&names[i][0]))
	}
	return out, nil
}

// ParseGIDIndex parses a MSCCLPP_IB_GID_INDEX value: -1 for "" (Open picks one), else a GID
// index from 0 to 255; anything else is an error naming the variable.
func ParseGIDIndex(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return -1, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > 255 {
		return 0, status.Errorf(status.InvalidArgument, "%s=%q: want a GID index from 0 to 255", EnvGIDIndex, s)
	}
	return v, nil
}

func cerr(msg *C.char) string { return C.GoString(msg) }
