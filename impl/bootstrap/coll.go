package bootstrap

import (
	"encoding/binary"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Collectives. AllGather and Barrier (an AllGather of nothing) run over one
// of two topologies:
//
//   - star, for small messages and 3 or more ranks (useStar; unless
//     Options.RingOnlyOnOneHost applies): every rank sends its slot
//     to rank 0, which answers everyone with all slots. Two hops, and every
//     rank wakes up about once per operation, which is what matters when
//     ranks outnumber CPUs (a ring needs N-1 hops and N(N-1) wake-ups).
//   - ring, for 2 ranks (one exchange) and for large slots (bandwidth spreads
//     over all links instead of converging on rank 0).
//
// Every message carries a header (sequence number, size, op, step) that the
// receiver checks, so ranks that disagree about the collective fail with
// InvalidUsage instead of misreading data. A rank that fails mid-collective
// sends an abort frame carrying the original error on the connections it
// writes to before closing them, so its neighbours report the root cause.
const (
	starMinRanks = 3
	// starMax is the largest message rank 0 sends in the star (header plus
	// all slots). The star cannot deadlock at any size (rank 0 answers a
	// rank only after reading all it sent), but rank 0 moves N times more
	// data than a ring rank does, so large slots go around the ring.
	starMax = 128 << 10
	// starHubMax bounds what rank 0 sends in one star collective (N-1 times
	// its message): past it the ring, whose every rank moves N slots, takes
	// over, so no rank's bytes per collective grow as N² (at 4-byte slots,
	// from about 2,000 ranks).
	starHubMax = 16 << 20
	// opAbort marks an abort frame; its size field is the length of the
	// error text that follows.
	opAbort = 3
	// maxAbortText bounds the text of an abort frame.
	maxAbortText = 64 << 10
	// abortWriteTimeout bounds the best-effort write of an abort frame.
	abortWriteTimeout = 100 * time.Millisecond
)

// AllGather gathers size bytes from every rank: data holds Size() slots of
// size bytes, and on return slot r holds what rank r put there.
func (b *Bootstrap) AllGather(data []byte, size int) error {
	if size <= 0 {
		return b.errorf(status.InvalidArgument, "allgather: size %d must be positive", size)
	}
	if int64(len(data)) < int64(size)*int64(b.nranks) {
		return b.errorf(status.InvalidArgument, "allgather: %d bytes of data is less than %d ranks × %d bytes", len(data), b.nranks, size)
	}
	return b.collective(data, size, opAllGather)
}

// Barrier returns once every rank has entered it.
func (b *Bootstrap) Barrier() error {
	return b.collective(nil, 0, opBarrier)
}

// collective runs an allgather of size bytes per rank (size 0: a barrier).
func (b *Bootstrap) collective(data []byte, size int, op uint32) error {
	b.collMu.Lock()
	defer b.collMu.Unlock()
	if err := b.failed(); err != nil {
		return err
	}
	if b.nranks == 1 {
		return nil
	}
	if err := b.connectRing(); err != nil {
		return err
	}
	b.seq++
	now := time.Now()
	switch {
	case b.star != nil && useStar(b.nranks, size): // 3 or more ranks, unless ringOnly
		if b.rank == 0 {
			for _, c := range b.star[1:] {
				c.setDeadline(now, b.timeout)
			}
			return b.hub(data, size, op)
		}
		b.star[0].setDeadline(now, b.timeout)
		return b.spoke(data, size, op)
	case size <= inlineMax:
		b.prev.setDeadline(now, b.timeout)
		b.next.setDeadline(now, b.timeout)
		return b.ringSmall(data, size, op)
	default:
		b.prev.setDeadline(now, b.timeout)
		b.next.setDeadline(now, b.timeout)
		return b.ringLarge(data, size, op)
	}
}

// useStar reports whether a collective of size bytes a rank of n takes the star: rank 0's
// message within starMax, and its n-1 copies within starHubMax.
func useStar(n, size int) bool {
	msg := ringHdrLen + size*n
	return msg <= starMax && (n-1)*msg <= starHubMax
}

// grow returns (*buf)[:n], reallocating when too small.
func grow(buf *[]byte, n int) []byte {
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	return (*buf)[:n]
}

// hub is rank 0's side of the star: gather every slot, then send all slots
// to everyone.
func (b *Bootstrap) hub(data []byte, size int, op uint32) error {
	n := b.nranks
	rbuf := grow(&b.rbuf, ringHdrLen+size)
	for r := 1; r < n; r++ {
		if origin, err := b.recvMsg(b.star[r], rbuf, size, op, 0); err != nil {
			return b.failColl(err, origin, b.star[1:], nil)
		}
		copy(data[r*size:(r+1)*size], rbuf[ringHdrLen:])
	}
	out := grow(&b.sbuf, ringHdrLen+n*size)
	putRingHdr(out, b.seq, n*size, op, 1)
	copy(out[ringHdrLen:], data[:n*size])
	for r := 1; r < n; r++ {
		if _, err := b.star[r].c.Write(out); err != nil {
			return b.failColl(b.ioErr(op, r, true, err), "", b.star[1:], b.star[r])
		}
	}
	return nil
}

// spoke is the side of the star of every rank but 0.
func (b *Bootstrap) spoke(data []byte, size int, op uint32) error {
	n, me, hub := b.nranks, b.rank, b.star[0]
	out := grow(&b.sbuf, ringHdrLen+size)
	putRingHdr(out, b.seq, size, op, 0)
	copy(out[ringHdrLen:], data[me*size:(me+1)*size])
	if _, err := hub.c.Write(out); err != nil {
		return b.failColl(b.ioErr(op, 0, true, err), "", nil, nil)
	}
	rbuf := grow(&b.rbuf, ringHdrLen+n*size)
	if origin, err := b.recvMsg(hub, rbuf, n*size, op, 1); err != nil {
		return b.failColl(err, origin, b.star[:1], nil)
	}
	copy(data[:n*size], rbuf[ringHdrLen:])
	return nil
}

// ringSmall writes each step's slot and then reads the next one: a slot this
// small fits in the socket buffers, so writes never wait for readers.
func (b *Bootstrap) ringSmall(data []byte, size int, op uint32) error {
	n, me := b.nranks, b.rank
	sbuf := grow(&b.sbuf, ringHdrLen+size)
	rbuf := grow(&b.rbuf, ringHdrLen+size)
	next := []*ringConn{b.next}
	for s := 0; s < n-1; s++ {
		sendSlot := (me - s + n) % n
		recvSlot := (me - s - 1 + n) % n
		putRingHdr(sbuf, b.seq, size, op, s)
		copy(sbuf[ringHdrLen:], data[sendSlot*size:(sendSlot+1)*size])
		if _, err := b.next.c.Write(sbuf); err != nil {
			return b.failColl(b.ioErr(op, b.next.peer, true, err), "", nil, nil)
		}
		if origin, err := b.recvMsg(b.prev, rbuf, size, op, s); err != nil {
			return b.failColl(err, origin, next, nil)
		}
		copy(data[recvSlot*size:(recvSlot+1)*size], rbuf[ringHdrLen:])
	}
	return nil
}

// ringLarge runs each step in one goroutine that polls both ring sockets
// (duplexStep): it sends the slot it received in the step before while
// receiving the next, as the plain-TCP reference does. It sends no abort
// frames: its writes may stop in the middle of a message.
func (b *Bootstrap) ringLarge(data []byte, size int, op uint32) error {
	n, me := b.nranks, b.rank
	shdr, rhdr := make([]byte, ringHdrLen), make([]byte, ringHdrLen)
	deadline := time.Now().Add(b.timeout)
	for s := 0; s < n-1; s++ {
		so, ro := (me-s+n)%n, (me-s-1+n)%n
		putRingHdr(shdr, b.seq, size, op, s)
		if err := b.duplexStep(shdr, data[so*size:(so+1)*size], rhdr, data[ro*size:(ro+1)*size], op, s, deadline); err != nil {
			return b.failColl(err, "", nil, nil)
		}
	}
	return b.failed()
}

// recvMsg reads one message of want payload bytes from c into buf (the
// header and payload; with a buf of only ringHdrLen bytes just the header,
// for a caller that reads the payload itself) and checks its header. On
// failure it returns the error to record and, for an abort frame, the
// original error text.
func (b *Bootstrap) recvMsg(c *ringConn, buf []byte, want int, op uint32, step int) (origin string, err error) {
	got, err := c.readAtLeast(buf, ringHdrLen, b.spin)
	if err != nil {
		return "", b.ioErr(op, c.peer, false, err)
	}
	gotSize := binary.LittleEndian.Uint64(buf[8:16])
	if binary.LittleEndian.Uint32(buf[16:20]) == opAbort && gotSize <= maxAbortText {
		text := make([]byte, gotSize)
		have := copy(text, buf[ringHdrLen:got])
		if err := c.readFull(text[have:], 0); err != nil {
			return "", b.ioErr(op, c.peer, false, err)
		}
		return string(text), b.errorf(status.RemoteError, "%s failed on another rank: %s", opName(op), logx.PeerText(string(text)))
	}
	if err := b.hdrMismatch(buf, c.peer, want, op, step); err != nil {
		return "", err
	}
	if got < len(buf) {
		if err := c.readFull(buf[got:], b.spin); err != nil {
			return "", b.ioErr(op, c.peer, false, err)
		}
	}
	return "", nil
}

// hdrMismatch is the error for a ring header (hdr) from peer that is not the one this rank
// expects (step of collective b.seq, op, want bytes), or nil.
func (b *Bootstrap) hdrMismatch(hdr []byte, peer, want int, op uint32, step int) error {
	seq := binary.LittleEndian.Uint64(hdr[0:8])
	gotSize := binary.LittleEndian.Uint64(hdr[8:16])
	gotOp := binary.LittleEndian.Uint32(hdr[16:20])
	gotStep := int(binary.LittleEndian.Uint32(hdr[20:24]))
	if seq != b.seq || gotSize != uint64(want) || gotOp != op || gotStep != step {
		return b.errorf(status.InvalidUsage,
			"%s: rank %d is in collective #%d (%s of %d bytes, step %d) while this rank is in collective #%d (%s of %d bytes, step %d)",
			opName(op), peer, seq, opName(gotOp), gotSize, gotStep, b.seq, opName(op), want, step)
	}
	return nil
}

// ioErr explains an I/O error with peer during a collective.
func (b *Bootstrap) ioErr(op uint32, peer int, sending bool, err error) error {
	if e := b.failed(); e != nil {
		return e
	}
	name := opName(op)
	switch {
	case isTimeout(err) && sending:
		return b.errorf(status.RemoteError, "%s: rank %d took no data within %v", name, peer, b.timeout)
	case isTimeout(err):
		return b.errorf(status.RemoteError, "%s: no data from rank %d within %v", name, peer, b.timeout)
	case isPeerGone(err):
		return b.errorf(status.RemoteError, "%s: rank %d closed the connection (it exited, failed or aborted)", name, peer)
	}
	return b.errorf(status.RemoteError, "%s: connection with rank %d failed: %w", name, peer, err)
}

// failColl records a collective's failure: it sends an abort frame carrying
// origin (the first failure's text; e's own text if empty) on each of
// notify but skip, then aborts the bootstrap, which closes every socket so
// the failure reaches every rank. It returns the recorded error.
func (b *Bootstrap) failColl(e error, origin string, notify []*ringConn, skip *ringConn) error {
	if err := b.failed(); err != nil {
		return err
	}
	if len(notify) > 0 {
		if origin == "" {
			origin = e.Error()
		}
		if len(origin) > maxAbortText {
			origin = origin[:maxAbortText]
		}
		frame := make([]byte, ringHdrLen+len(origin))
		putRingHdr(frame, b.seq, len(origin), opAbort, 0)
		copy(frame[ringHdrLen:], origin)
		dl := deadlineIn(min(abortWriteTimeout, b.timeout))
		for _, c := range notify {
			if c != skip {
				c.c.SetWriteDeadline(dl)
				c.c.Write(frame)
			}
		}
	}
	return b.collFailed(e)
}

// collFailed aborts the bootstrap with a collective's failure e and returns the recorded
// error; in the table's gather (collKeep) it returns e, which its caller reports through
// the root.
func (b *Bootstrap) collFailed(e error) error {
	if b.collKeep {
		return e
	}
	return b.fail(e)
}
