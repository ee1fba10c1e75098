package nodeshm

// Waiting on a word of the segment without polling: the ranks of a node
// sleep in FUTEX_WAIT on the word (shared futexes: the segment is mapped by
// several processes) and the rank that changes it wakes them.

import (
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	futexWait = 0 // FUTEX_WAIT, not private: the word is shared between processes
	futexWake = 1 // FUTEX_WAKE
)

// waitChange sleeps until the 64-bit counter at w may no longer be old, or for at most
// max. The futex is the counter's low 32 bits (little endian), which is where a count
// below 2^32 changes.
func waitChange(w *uint64, old uint64, max time.Duration) {
	ts := unix.NsecToTimespec(int64(max))
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait, uintptr(uint32(old)), uintptr(unsafe.Pointer(&ts)), 0, 0)
	runtime.KeepAlive(w)
}

// wakeAll wakes every rank sleeping in waitChange on w.
func wakeAll(w *uint64) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}
