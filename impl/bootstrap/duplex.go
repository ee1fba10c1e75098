package bootstrap

// One step of the large ring (coll.go, ringLarge) in one goroutine that polls
// both ring sockets: it sends a header and a slot to the successor while it
// receives a header and a slot from the predecessor, as the plain-TCP
// reference does. Kept as the one faster path of the bootstrap because a
// writer goroutine beside a reader, each parked in the netpoller at every
// full or empty socket buffer, is slower for a gather of large slots across
// hosts.

import (
	"encoding/binary"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// duplexSlice bounds one wait in poll(2): between waits the step looks at its
// deadline and at the bootstrap's abort (which closes the sockets).
const duplexSlice = 20 * time.Millisecond

// duplexStep runs one step of the large ring: it sends shdr and sslot to the next rank
// while receiving rhdr and rslot from the previous one. It returns the error to record
// (header checks included).
func (b *Bootstrap) duplexStep(shdr, sslot, rhdr, rslot []byte, op uint32, step int, deadline time.Time) error {
	total := len(shdr) + len(sslot)
	sent, recvd := 0, 0
	var idleSince time.Time // the start of the current stretch without progress (zero: none)
	for sent < total || recvd < total {
		if err := b.failed(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			if recvd == total {
				return b.ioErr(op, b.next.peer, true, os.ErrDeadlineExceeded)
			}
			return b.ioErr(op, b.prev.peer, false, os.ErrDeadlineExceeded)
		}
		progress := false
		if sent < total {
			var n int
			var e error
			if err := b.next.raw.Write(func(fd uintptr) bool {
				n, e = unix.SendmsgBuffers(int(fd), rest(shdr, sslot, sent), nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
				return true
			}); err != nil {
				return b.ioErr(op, b.next.peer, true, err)
			}
			switch {
			case n > 0:
				sent += n
				progress = true
			case e != nil && !again(e):
				return b.ioErr(op, b.next.peer, true, e)
			}
		}
		if recvd < total {
			var n int
			var e error
			if err := b.prev.raw.Read(func(fd uintptr) bool {
				n, e = unix.Readv(int(fd), rest(rhdr, rslot, recvd))
				return true
			}); err != nil {
				return b.ioErr(op, b.prev.peer, false, err)
			}
			switch {
			case n > 0:
				recvd += n
				progress = true
			case e == nil: // the predecessor closed: it may have said why first
				if recvd >= len(rhdr) {
					if err := b.abortIn(rhdr, rslot[:recvd-len(rhdr)], op); err != nil {
						return err
					}
				}
				return b.ioErr(op, b.prev.peer, false, io.EOF)
			case !again(e):
				return b.ioErr(op, b.prev.peer, false, e)
			}
		}
		if progress {
			idleSince = time.Time{}
			continue
		}
		// No progress: yield the CPU for up to the spin budget (a peer that shares it may
		// be the one to move), then sleep in poll(2) on both sockets.
		if b.spin > 0 {
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			if time.Since(idleSince) < b.spin {
				syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
				continue
			}
		}
		b.pollBoth(sent < total, recvd < total)
	}
	if err := b.abortIn(rhdr, rslot, op); err != nil {
		return err
	}
	return b.hdrMismatch(rhdr, b.prev.peer, len(rslot), op, step)
}

// pollBoth sleeps until the next ring socket may take data (with send) or the
// previous one has some (with recv), or for duplexSlice; errors are found by
// the next send or receive.
func (b *Bootstrap) pollBoth(send, recv bool) {
	_ = b.next.raw.Write(func(sfd uintptr) bool {
		_ = b.prev.raw.Read(func(rfd uintptr) bool {
			fds := make([]unix.PollFd, 0, 2)
			if send {
				fds = append(fds, unix.PollFd{Fd: int32(sfd), Events: unix.POLLOUT})
			}
			if recv {
				fds = append(fds, unix.PollFd{Fd: int32(rfd), Events: unix.POLLIN})
			}
			_, _ = unix.Poll(fds, int(duplexSlice/time.Millisecond))
			return true
		})
		return true
	})
}

// rest is the part of {hdr, slot} from byte done on.
func rest(hdr, slot []byte, done int) [][]byte {
	if done < len(hdr) {
		return [][]byte{hdr[done:], slot}
	}
	return [][]byte{slot[done-len(hdr):]}
}

// again reports whether e means that the socket has no data or no room now.
func again(e error) bool {
	return e == unix.EAGAIN || e == unix.EINTR
}

// abortIn is the error an abort frame in hdr (its text starting in text) carries, or nil.
func (b *Bootstrap) abortIn(hdr, text []byte, op uint32) error {
	if binary.LittleEndian.Uint32(hdr[16:20]) != opAbort {
		return nil
	}
	n := min(binary.LittleEndian.Uint64(hdr[8:16]), uint64(len(text)), maxAbortText)
	return b.collFailed(b.errorf(status.RemoteError, "%s failed on another rank: %s", opName(op), logx.PeerText(string(text[:n]))))
}
