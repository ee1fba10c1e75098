package bootstrap

/*
#cgo CFLAGS: -O2 -Wall
#include "duplex.h"
*/
import "C"

import (
	"encoding/binary"
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// duplexSlice bounds one call into C (duplex.c): between calls the step looks at its
// deadline and at the bootstrap's abort, which closes the sockets only once no call holds them.
const duplexSlice = 20 * time.Millisecond

// duplexStep runs one step of the large ring: it sends shdr and sslot to the next rank while
// receiving rhdr and rslot from the previous one, in one thread polling both sockets. It
// returns the error to record (header checks included).
func (b *Bootstrap) duplexStep(shdr, sslot, rhdr, rslot []byte, op uint32, step int, deadline time.Time) error {
	var st C.bootDuplexStep
	st.hdrLen, st.slotLen = C.size_t(len(shdr)), C.size_t(len(sslot))
	for {
		if err := b.failed(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			sending := st.recvd == st.hdrLen+st.slotLen
			peer := b.prev.peer
			if sending {
				peer = b.next.peer
			}
			return b.ioErr(op, peer, sending, os.ErrDeadlineExceeded)
		}
		var rc C.int
		var rerr error
		werr := b.next.raw.Write(func(sfd uintptr) bool {
			rerr = b.prev.raw.Read(func(rfd uintptr) bool {
				st.sfd, st.rfd = C.int(sfd), C.int(rfd)
				rc = C.bootDuplex(&st, unsafe.Pointer(&shdr[0]), unsafe.Pointer(&sslot[0]),
					unsafe.Pointer(&rhdr[0]), unsafe.Pointer(&rslot[0]), C.int(duplexSlice/time.Millisecond), C.int(b.spin/time.Microsecond))
				return true
			})
			return true
		})
		switch {
		case werr != nil:
			return b.ioErr(op, b.next.peer, true, werr)
		case rerr != nil:
			return b.ioErr(op, b.prev.peer, false, rerr)
		}
		switch rc {
		case C.BOOT_DUPLEX_SLICE:
			continue
		case C.BOOT_DUPLEX_SEND_ERR:
			return b.ioErr(op, b.next.peer, true, syscall.Errno(st.err))
		case C.BOOT_DUPLEX_RECV_ERR:
			return b.ioErr(op, b.prev.peer, false, syscall.Errno(st.err))
		case C.BOOT_DUPLEX_EOF:
			if int(st.recvd) >= len(rhdr) {
				if err := b.abortIn(rhdr, rslot[:int(st.recvd)-len(rhdr)], op); err != nil {
					return err
				}
			}
			return b.ioErr(op, b.prev.peer, false, io.EOF)
		}
		if err := b.abortIn(rhdr, rslot, op); err != nil {
			return err
		}
		return b.hdrMismatch(rhdr, b.prev.peer, len(rslot), op, step)
	}
}

// abortIn is the error an abort frame in hdr (its text starting in text) carries, or nil.
func (b *Bootstrap) abortIn(hdr, text []byte, op uint32) error {
	if binary.LittleEndian.Uint32(hdr[16:20]) != opAbort {
		return nil
	}
	n := min(binary.LittleEndian.Uint64(hdr[8:16]), uint64(len(text)), maxAbortText)
	return b.fail(b.errorf(status.RemoteError, "%s failed on another rank: %s", opName(op), text[:n]))
}
