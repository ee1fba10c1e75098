package sysinfo

import (
	"time"

	"golang.org/x/sys/unix"
)

// Nap sleeps for d. A sub-millisecond time.Sleep in a process with nothing
// else to run lasts a millisecond or more (the Go runtime waits for timers in
// epoll_pwait, whose timeout is in whole milliseconds); the polling loops of
// communicator set-up back off from a few microseconds, so below a
// millisecond they sleep in nanosleep(2) on their thread instead.
func Nap(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
