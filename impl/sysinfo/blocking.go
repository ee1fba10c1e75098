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
