package bootstrap

// fdConn: a rank's connection to the root on one blocking socket, used
// from the calling thread with plain system calls. A rank's registration
// is a handful of small messages in lock step (challenge, register, table,
// ready, done); Go's net dialer and network poller cost more CPU than the
// messages themselves there (the dialer's resolver and goroutines, a
// netpoller registration, a park and wake-up per read). Deadlines are the
// socket's SO_RCVTIMEO / SO_SNDTIMEO (set when a deadline is, a read or
// write that times out early retries with what is left), so a blocked
// read or write ends at about the deadline with os.ErrDeadlineExceeded, as
// a net.Conn's does. Close shuts the socket down first, which wakes a
// reader blocked in another goroutine; the descriptor is closed once no
// call uses it any more.

import (
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

type fdConn struct {
	fd            int
	local, remote netip.AddrPort
	rdl, wdl      atomic.Int64 // read and write deadlines, Unix ns; 0: none

	mu     sync.Mutex
	users  int  // calls using fd now
	closed bool // Close was called; fd is closed when users drops to 0
}

// dialFD connects to addr (one attempt) within deadline on a blocking
// socket with TCP_NODELAY. Errors are *net.OpError as net.Dial's are.
func dialFD(addr netip.AddrPort, deadline time.Time) (*fdConn, error) {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	fail := func(call string, e error) (*fdConn, error) {
		if e == unix.EINPROGRESS || e == unix.EAGAIN {
			e = os.ErrDeadlineExceeded // connect's SO_SNDTIMEO ran out
		} else {
			e = os.NewSyscallError(call, e)
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(addr), Err: e}
	}
	left := time.Until(deadline)
	if left <= 0 {
		return fail("connect", unix.EINPROGRESS)
	}
	var family int
	var sa unix.Sockaddr
	if a := addr.Addr(); a.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: a.As4()}
	} else {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(addr.Port()), Addr: a.As16(), ZoneId: zoneID(a)}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail("socket", err)
	}
	c := &fdConn{fd: fd, remote: addr}
	if err := c.setTimeout(unix.SO_SNDTIMEO, left); err != nil {
		unix.Close(fd)
		return fail("setsockopt", err)
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	// Without holding a P, as the reads below: a rank waiting for the root's
	// answers does not keep the Go runtime's monitor polling.
	err = sysinfo.BlockingConnect(fd, sa)
	for err == unix.EINTR { // a signal: the connection goes on forming
		err = awaitConnected(fd, deadline)
	}
	if err != nil {
		unix.Close(fd)
		return fail("connect", err)
	}
	if lsa, err := unix.Getsockname(fd); err == nil {
		c.local = sockaddrPort(lsa)
	}
	c.wdl.Store(deadline.UnixNano())
	return c, nil
}

// awaitConnected waits until the connect of fd, interrupted by a signal,
// ends (its error, or nil) or deadline passes (EINPROGRESS); EINTR again
// when another signal came.
func awaitConnected(fd int, deadline time.Time) error {
	left := time.Until(deadline)
	if left <= 0 {
		return unix.EINPROGRESS
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	n, err := unix.Poll(fds, int((left+time.Millisecond-1)/time.Millisecond))
	switch {
	case err != nil:
		return err
	case n == 0:
		return unix.EINPROGRESS
	}
	soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if soErr != 0 {
		return unix.Errno(soErr)
	}
	return nil
}

// zoneID is the interface index of a link-local IPv6 address's zone, or 0.
func zoneID(a netip.Addr) uint32 {
	if z := a.Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			return uint32(ifi.Index)
		}
	}
	return 0
}

func sockaddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// setTimeout sets SO_RCVTIMEO or SO_SNDTIMEO to d (0: none; a positive d
// is at least 1 µs, since a zero timeval means none).
func (c *fdConn) setTimeout(opt int, d time.Duration) error {
	if d > 0 && d < time.Microsecond {
		d = time.Microsecond
	}
	tv := unix.NsecToTimeval(d.Nanoseconds())
	return unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, opt, &tv)
}

// acquire marks a call using fd; false once closed.
func (c *fdConn) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.users++
	return true
}

// release ends a call; the last one after Close closes fd. It reports
// whether Close was called meanwhile.
func (c *fdConn) release() (closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users--
	if c.closed && c.users == 0 {
		unix.Close(c.fd)
	}
	return c.closed
}

// io runs one read or write (do) until it moves data or fails; EAGAIN
// before the deadline dl (the socket's timeout ran out early) retries.
func (c *fdConn) io(op string, dl *atomic.Int64, opt int, do func() (int, error)) (int, error) {
	if !c.acquire() {
		return 0, c.opErr(op, net.ErrClosed)
	}
	for {
		n, err := do()
		if c.release() {
			return 0, c.opErr(op, net.ErrClosed)
		}
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			d := dl.Load()
			left := time.Until(time.Unix(0, d))
			if d == 0 || left > 0 {
				if d != 0 {
					c.setTimeout(opt, left)
				}
				break
			}
			return 0, c.opErr(op, os.ErrDeadlineExceeded)
		case err != nil:
			return 0, c.opErr(op, os.NewSyscallError(op, err))
		default:
			return n, nil
		}
		if !c.acquire() {
			return 0, c.opErr(op, net.ErrClosed)
		}
	}
}

func (c *fdConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: net.TCPAddrFromAddrPort(c.local), Addr: net.TCPAddrFromAddrPort(c.remote), Err: err}
}

// Read reads what arrived (at least 1 byte), io.EOF once the peer closed.
func (c *fdConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if d := c.rdl.Load(); d != 0 && time.Now().UnixNano() >= d {
		return 0, c.opErr("read", os.ErrDeadlineExceeded)
	}
	n, err := c.io("read", &c.rdl, unix.SO_RCVTIMEO, func() (int, error) {
		return sysinfo.BlockingRead(c.fd, p)
	})
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

// Write writes all of p (a blocking socket writes it all unless interrupted).
func (c *fdConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		if d := c.wdl.Load(); d != 0 && time.Now().UnixNano() >= d {
			return done, c.opErr("write", os.ErrDeadlineExceeded)
		}
		n, err := c.io("write", &c.wdl, unix.SO_SNDTIMEO, func() (int, error) {
			return unix.SendmsgN(c.fd, p[done:], nil, nil, unix.MSG_NOSIGNAL)
		})
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// Close shuts the connection down (waking a blocked reader) and closes it
// once no call uses it.
func (c *fdConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr("close", net.ErrClosed)
	}
	c.closed = true
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
	if c.users == 0 {
		unix.Close(c.fd)
	}
	return nil
}

func (c *fdConn) LocalAddr() net.Addr  { return net.TCPAddrFromAddrPort(c.local) }
func (c *fdConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.remote) }

func (c *fdConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *fdConn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(&c.rdl, unix.SO_RCVTIMEO, t)
}

func (c *fdConn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(&c.wdl, unix.SO_SNDTIMEO, t)
}

// setDeadline records t and sets the socket's timeout to what is left of it.
func (c *fdConn) setDeadline(dl *atomic.Int64, opt int, t time.Time) error {
	if !c.acquire() {
		return c.opErr("set", net.ErrClosed)
	}
	defer c.release()
	var d int64
	var left time.Duration
	if !t.IsZero() {
		d, left = t.UnixNano(), time.Until(t)
		if left <= 0 {
			left = time.Microsecond // the next call sees the deadline passed
		}
	}
	dl.Store(d)
	return c.setTimeout(opt, left)
}
