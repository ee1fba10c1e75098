//go:build mscclpp_testhooks

package engine

// #include "objects.h"
import "C"

import "unsafe"

// RetargetForTest points registration record p (an engReg) at address addr of process pid, as
// if the kernel had given its owner's pid to another process that has memory there.
func RetargetForTest(p unsafe.Pointer, pid int, addr uint64) {
	r := (*C.engReg)(p)
	r.pid, r.addr = C.int(pid), C.uint64_t(addr)
}

// RetargetPeerForTest makes c's peer pid pid, keeping its pidfd, as if the kernel had given the
// peer's pid to process pid.
func (c *Conn) RetargetPeerForTest(pid int) { c.p.peerPid = C.int(pid) }
