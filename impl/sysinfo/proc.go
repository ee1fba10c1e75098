package sysinfo

// A process named so that it cannot be mistaken for another: a pid alone names whichever
// process the kernel gives that number next once the first one has exited, so a peer's
// process is held as a pidfd (which refers to that process only, and reads as exited once it
// has), taken from the kernel's record of who is at the other end of a unix socket rather
// than from anything the peer says.

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Proc is one process: its pid and a pidfd of it (at least 3, so that 0 can mean none).
type Proc struct {
	Pid int
	Fd  int
}

// PeerProc returns the process at the other end of unix stream socket fd: the one that
// called connect, or for a connecting socket the one that called listen (SO_PEERPIDFD, which
// names that very process; kernels before 6.5: SO_PEERCRED's pid, opened at once).
func PeerProc(fd int) (Proc, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Proc{}, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	if int(cred.Uid) != os.Geteuid() {
		return Proc{}, fmt.Errorf("pid %d, of user %d, not this process's", cred.Pid, cred.Uid)
	}
	pfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	if errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EINVAL) {
		pfd, err = unix.PidfdOpen(int(cred.Pid), 0)
	}
	if err != nil {
		return Proc{}, fmt.Errorf("a pidfd of pid %d: %w", cred.Pid, err)
	}
	p, err := adopt(int(cred.Pid), pfd)
	if err == nil && p.Exited() {
		p.Close()
		err = fmt.Errorf("pid %d has exited", cred.Pid)
	}
	return p, err
}

// adopt makes pidfd fd of pid a Proc: close-on-exec, and at least 3.
func adopt(pid, fd int) (Proc, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	_ = unix.Close(fd)
	if err != nil {
		return Proc{}, fmt.Errorf("a pidfd of pid %d: %w", pid, err)
	}
	return Proc{Pid: pid, Fd: nfd}, nil
}

// Exited reports whether p's process has exited (its pidfd polls readable); a Proc without a
// pidfd never has.
func (p Proc) Exited() bool {
	if p.Fd <= 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(p.Fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}

// Close closes p's pidfd.
func (p Proc) Close() {
	if p.Fd > 0 {
		_ = unix.Close(p.Fd)
	}
}
