package bootstrap

import (
	"io"
	"net"
	"syscall"
	"time"
)

// ringConn is a connection used by collectives (ring or star).
type ringConn struct {
	c    *net.TCPConn
	raw  syscall.RawConn
	peer int
	// dlSet is when the deadline of c was last set; see setDeadline.
	dlSet time.Time
}

func newRingConn(c *net.TCPConn, peer int) (*ringConn, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &ringConn{c: c, raw: raw, peer: peer}, nil
}

// deadlineSlack is how stale a ring deadline may get before it is set again:
// setting a deadline costs a timer update, and a collective of a few µs
// should not pay it every time. A wait is therefore bounded by between
// timeout-deadlineSlack and timeout.
const deadlineSlack = time.Millisecond

// setDeadline makes sure both directions time out at about now+timeout.
func (r *ringConn) setDeadline(now time.Time, timeout time.Duration) {
	if now.Sub(r.dlSet) > deadlineSlack {
		r.dlSet = now
		r.c.SetDeadline(now.Add(timeout))
	}
}

// readAtLeast reads into buf until at least atLeast bytes arrived (never more
// than len(buf)). Before parking in the netpoller it busy-polls the socket
// for up to spin, yielding the CPU between tries: a peer that answers
// within a few µs is seen without the ~30 µs cost of waking a sleeping
// thread.
func (r *ringConn) readAtLeast(buf []byte, atLeast int, spin time.Duration) (int, error) {
	n := 0
	var opErr error
	var start time.Time
	spinning := spin > 0
	err := r.raw.Read(func(fd uintptr) bool {
		for n < atLeast {
			m, e := syscall.Read(int(fd), buf[n:])
			switch {
			case m > 0:
				n += m
			case e == syscall.EINTR:
			case e == syscall.EAGAIN:
				if !spinning {
					return false
				}
				if start.IsZero() {
					start = time.Now()
				} else if time.Since(start) > spin {
					spinning = false
					return false
				}
				syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
			case e != nil:
				opErr = e
				return true
			default:
				opErr = io.EOF
				return true
			}
		}
		return true
	})
	if err == nil {
		err = opErr
	}
	if err == io.EOF && n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// readFull reads exactly len(buf) bytes.
func (r *ringConn) readFull(buf []byte, spin time.Duration) error {
	_, err := r.readAtLeast(buf, len(buf), spin)
	return err
}
