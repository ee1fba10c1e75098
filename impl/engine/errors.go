package engine

// The communicator's errors: its first asynchronous error, its last error, and which of its
// connections a remote error failed (engine.h, engComm).

/*
#cgo CFLAGS: -O2 -Wall
#include <stdlib.h>
#include "engine.h"
*/
import "C"

import (
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Err returns the first asynchronous error recorded on c, or nil.
func (c *Comm) Err() error {
	var buf [512]C.char
	code := C.errAsync(&c.p.err, &buf[0], C.int(len(buf)))
	if code == 0 {
		return nil
	}
	return status.Errorf(status.Code(code), "%s", C.GoString(&buf[0]))
}

// SetLast makes msg the communicator's last-error text, and the process's.
func (c *Comm) SetLast(msg string) {
	cmsg := C.CString(msg)
	defer C.free(unsafe.Pointer(cmsg))
	C.errSet(&c.p.err, 0, cmsg)
}

// LastPtr is the address of the communicator's last-error text (valid until Free).
func (c *Comm) LastPtr() unsafe.Pointer { return unsafe.Pointer(C.errLast(&c.p.err)) }

// SetErr records err on c unless an error is already recorded.
func (c *Comm) SetErr(err error) {
	msg := C.CString(err.Error())
	defer C.free(unsafe.Pointer(msg))
	C.errSetAsync(&c.p.err, C.int(status.CodeOf(err)), msg)
}

// SetBroken records err on c (SetErr) and marks the communicator lost: every wait on any of
// its connections, and every collective through the node segment, ends with a remote error.
func (c *Comm) SetBroken(err error) {
	c.SetErr(err)
	C.engSetBroken(c.p)
}

// FailConn makes err the last error of c and marks connection connID failed: waits on it end
// with a remote error; the other connections are not affected. It records no asynchronous
// error: the caller reports err itself.
func (c *Comm) FailConn(connID int, err error) {
	c.SetLast(err.Error())
	C.engMarkConnFailed(c.p, C.int(connID))
}

// ConnFailed reports whether a remote error was recorded on connection connID.
func (c *Comm) ConnFailed(connID int) bool { return C.engConnFailed(c.p, C.int(connID)) != 0 }
