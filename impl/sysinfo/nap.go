package sysinfo

import "time"

// Nap sleeps for d. A sub-millisecond time.Sleep in a process with nothing
// else to run lasts a millisecond or more (the Go runtime waits for timers in
// epoll_pwait, whose timeout is in whole milliseconds); the polling loops of
// communicator set-up back off from a few microseconds, so they sleep in
// nanosleep on their thread instead, without holding a P (see blocking.go).
// From a millisecond on, time.Sleep.
func Nap(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	nanosleep(d)
}
