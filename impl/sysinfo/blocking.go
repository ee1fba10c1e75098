package sysinfo

// System calls that are expected to block, made the way the Go runtime makes
// its own (runtime.entersyscallblock, the path os/signal and gVisor use):
// the goroutine's P is handed back before the call rather than held in a
// syscall state. A P held in a syscall keeps the runtime's monitor thread
// (sysmon) awake, polling every 20 µs for the first millisecond of the
// call and less often later; when ranks outnumber CPUs every one of those
// wake-ups is a context switch taken from a rank that has work (perf: 15-25
// % of a rank's init CPU at 16 ranks on 2 CPUs). With the P handed back and
// nothing else to run, sysmon sleeps until the call returns.

import (
	"runtime"
	"syscall"
	"time"
	"unsafe" // and go:linkname

	"golang.org/x/sys/unix"
)

//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// BlockingSyscall6 makes system call trap, which is expected to block, without holding a P.
// Pointer arguments must be kept alive by the caller (runtime.KeepAlive).
//
//go:nosplit
//go:norace
func BlockingSyscall6(trap, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, unix.Errno) {
	entersyscallblock()
	r, _, e := syscall.RawSyscall6(trap, a1, a2, a3, a4, a5, a6)
	exitsyscall()
	return r, unix.Errno(e)
}

// nanosleep sleeps for d on this thread (what is left after a signal is slept too).
func nanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for {
		_, e := BlockingSyscall6(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0, 0)
		if e != unix.EINTR {
			return
		}
	}
}

// BlockingRead reads from fd into p (len(p) > 0) without holding a P.
func BlockingRead(fd int, p []byte) (int, error) {
	r, e := BlockingSyscall6(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
	runtime.KeepAlive(p)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// BlockingConnect connects fd to sa (an IPv4 or IPv6 address; any other kind is connected
// holding the P) without holding a P.
func BlockingConnect(fd int, sa unix.Sockaddr) error {
	var p unsafe.Pointer
	var l uintptr
	var in4 unix.RawSockaddrInet4
	var in6 unix.RawSockaddrInet6
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		in4.Family, in4.Addr = unix.AF_INET, a.Addr
		putPort(&in4.Port, a.Port)
		p, l = unsafe.Pointer(&in4), unsafe.Sizeof(in4)
	case *unix.SockaddrInet6:
		in6.Family, in6.Addr, in6.Scope_id = unix.AF_INET6, a.Addr, a.ZoneId
		putPort(&in6.Port, a.Port)
		p, l = unsafe.Pointer(&in6), unsafe.Sizeof(in6)
	default:
		return unix.Connect(fd, sa)
	}
	_, e := BlockingSyscall6(unix.SYS_CONNECT, uintptr(fd), uintptr(p), l, 0, 0, 0)
	runtime.KeepAlive(p)
	if e != 0 {
		return e
	}
	return nil
}

// putPort stores port in network byte order.
func putPort(dst *uint16, port int) {
	b := (*[2]byte)(unsafe.Pointer(dst))
	b[0], b[1] = byte(port>>8), byte(port)
}
