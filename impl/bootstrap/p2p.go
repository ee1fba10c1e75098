package bootstrap

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Send queues data for peer's Recv(rank, tag); it returns once the data is
// handed to the network (the receiver queues it; Send never waits for a
// matching Recv). Messages to one (peer, tag) arrive in order.
func (b *Bootstrap) Send(peer, tag int, data []byte) error {
	if peer < 0 || peer >= b.nranks {
		return b.errorf(status.InvalidArgument, "send: peer %d out of range for %d ranks", peer, b.nranks)
	}
	if len(data) > maxP2PMessage {
		return b.errorf(status.InvalidArgument, "send: %d bytes is more than the %d a point-to-point message may have", len(data), maxP2PMessage)
	}
	if err := b.failed(); err != nil {
		return err
	}
	if peer == b.rank {
		b.deliver(peer, tag, append([]byte(nil), data...))
		return nil
	}
	o := &b.out[peer]
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if o.c == nil {
		c, err := b.dialPeer(peer, kindP2P, deadlineIn(b.timeout))
		if err != nil {
			return err
		}
		o.c = c
	}
	var hdr [p2pHdrLen]byte
	binary.LittleEndian.PutUint64(hdr[0:8], uint64(int64(tag)))
	binary.LittleEndian.PutUint64(hdr[8:16], uint64(len(data)))
	if err := b.writeMessage(o.c, hdr[:], data); err != nil {
		if e := b.failed(); e != nil {
			return e
		}
		switch {
		case isTimeout(err):
			o.err = b.errorf(status.RemoteError, "send to rank %d tag %d: the peer took no data within %v", peer, tag, b.timeout)
		case isPeerGone(err):
			o.err = b.errorf(status.RemoteError, "send to rank %d tag %d: rank %d closed the connection (it exited, failed or aborted)", peer, tag, peer)
		default:
			o.err = b.errorf(status.RemoteError, "send to rank %d tag %d: %w", peer, tag, err)
		}
		b.untrack(o.c)
		return o.err
	}
	return nil
}

// sendChunk is how much of a point-to-point message goes out under one write deadline.
const sendChunk = 1 << 20

// writeMessage writes hdr and data to c, each sendChunk of data under a deadline of its own:
// the timeout bounds a peer that takes no data, not the time a large message takes.
func (b *Bootstrap) writeMessage(c *net.TCPConn, hdr, data []byte) error {
	first := min(len(data), sendChunk)
	c.SetWriteDeadline(deadlineIn(b.timeout))
	bufs := net.Buffers{hdr, data[:first]}
	if _, err := bufs.WriteTo(c); err != nil {
		return err
	}
	for off := first; off < len(data); off += sendChunk {
		c.SetWriteDeadline(deadlineIn(b.timeout))
		if _, err := c.Write(data[off:min(len(data), off+sendChunk)]); err != nil {
			return err
		}
	}
	return nil
}

// Recv returns the next message from peer with tag, waiting at most the
// timeout (then status.RemoteError naming peer and tag).
func (b *Bootstrap) Recv(peer, tag int) ([]byte, error) {
	return b.RecvLimit(peer, tag, maxP2PMessage)
}

// RecvLimit is Recv for a message of at most limit bytes: a longer one is
// status.InvalidUsage (the ranks disagree about what they exchange).
// Whatever limit says, a peer's message is never longer than 16 MiB, and
// the receiver allocates memory for it only as its bytes arrive.
func (b *Bootstrap) RecvLimit(peer, tag, limit int) ([]byte, error) {
	if peer < 0 || peer >= b.nranks {
		return nil, b.errorf(status.InvalidArgument, "recv: peer %d out of range for %d ranks", peer, b.nranks)
	}
	msg, err := b.recv(peer, tag)
	if err == nil && len(msg) > limit {
		return nil, b.errorf(status.InvalidUsage, "recv from rank %d tag %d: rank %d sent %d bytes, more than the %d expected",
			peer, tag, peer, len(msg), limit)
	}
	return msg, err
}

// Arrived reports whether a message from peer with tag is waiting to be received (it waits
// for nothing).
func (b *Bootstrap) Arrived(peer, tag int) bool {
	if peer < 0 || peer >= b.nranks {
		return false
	}
	b.boxMu.Lock()
	defer b.boxMu.Unlock()
	return len(b.box[boxKey{peer, tag}]) > 0
}

func (b *Bootstrap) recv(peer, tag int) ([]byte, error) {
	k := boxKey{peer, tag}
	var timer *time.Timer
	for {
		if err := b.failed(); err != nil {
			return nil, err
		}
		b.boxMu.Lock()
		if q := b.box[k]; len(q) > 0 {
			msg := q[0]
			if peer != b.rank {
				b.releaseLocked(peer, len(msg))
			}
			if len(q) == 1 {
				delete(b.box, k)
			} else {
				q[0] = nil
				b.box[k] = q[1:]
			}
			b.boxMu.Unlock()
			return msg, nil
		}
		if e := b.inErr[peer]; e != nil {
			b.boxMu.Unlock()
			if isPeerGone(e) {
				return nil, b.errorf(status.RemoteError, "recv from rank %d tag %d: rank %d closed the connection (it exited, failed or aborted)", peer, tag, peer)
			}
			return nil, b.errorf(status.RemoteError, "recv from rank %d tag %d: %w", peer, tag, e)
		}
		w := b.waiters[k]
		if w == nil {
			w = make(chan struct{})
			b.waiters[k] = w
		}
		b.boxMu.Unlock()
		if timer == nil {
			timer = time.NewTimer(b.timeout)
			defer timer.Stop()
		}
		select {
		case <-w:
		case <-b.done:
		case <-timer.C:
			return nil, b.errorf(status.RemoteError, "recv from rank %d tag %d: no message within %v", peer, tag, b.timeout)
		}
	}
}

// deliver queues a message and wakes its receivers, or hands it to its tag's handler.
func (b *Bootstrap) deliver(peer, tag int, msg []byte) {
	if b.handle(peer, tag, msg) {
		return
	}
	k := boxKey{peer, tag}
	b.boxMu.Lock()
	b.box[k] = append(b.box[k], msg)
	if w := b.waiters[k]; w != nil {
		close(w)
		delete(b.waiters, k)
	}
	b.boxMu.Unlock()
}

// endPeer records that the connection from peer ended and wakes every
// receiver waiting on it.
func (b *Bootstrap) endPeer(peer int, err error) {
	b.boxMu.Lock()
	if b.inErr[peer] == nil {
		b.inErr[peer] = err
	}
	for k, w := range b.waiters {
		if k.peer == peer {
			close(w)
			delete(b.waiters, k)
		}
	}
	b.boxMu.Unlock()
}

// readPeer queues every message arriving from peer until the connection ends.
func (b *Bootstrap) readPeer(peer int, c *net.TCPConn) {
	r := bufio.NewReaderSize(c, 16<<10)
	var hdr [p2pHdrLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			b.endPeer(peer, err)
			b.untrack(c)
			return
		}
		tag := int(int64(binary.LittleEndian.Uint64(hdr[0:8])))
		n := binary.LittleEndian.Uint64(hdr[8:16])
		if n > maxP2PMessage {
			err := fmt.Errorf("rank %d announced a message of %d bytes, more than the %d a point-to-point message may have", peer, n, maxP2PMessage)
			b.logf(true, "bootstrap rank %d: %v", b.rank, err)
			b.endPeer(peer, err)
			b.untrack(c)
			return
		}
		if limit := b.handlerLimit(tag); limit >= 0 && n > uint64(limit) {
			if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil { // never held in memory
				b.endPeer(peer, err)
				b.untrack(c)
				return
			}
			b.refuseHandled(peer, tag, int(n), limit)
			continue
		}
		if err := b.admit(peer, int(n)); err != nil {
			b.logf(true, "bootstrap rank %d: %v; closing the connection from rank %d", b.rank, err, peer)
			b.endPeer(peer, err)
			b.untrack(c)
			return
		}
		msg, err := readChunked(r, int(n))
		if err != nil {
			b.boxMu.Lock()
			b.releaseLocked(peer, int(n))
			b.boxMu.Unlock()
			b.endPeer(peer, err)
			b.untrack(c)
			return
		}
		b.deliver(peer, tag, msg)
	}
}

// Bounds of the memory that messages nobody has received yet may hold: a message that
// arrives before its Recv (the usual case for setup messages) waits in a queue, but a peer
// that sends on tags this rank never receives must not grow that queue without limit.
// Each message also counts queueOverhead bytes, so that empty messages are bounded too.
const (
	maxQueuedPerPeer = 64 << 20
	maxQueuedTotal   = 256 << 20
)

// queueLimits are a rank's bounds of the bytes queued per peer and in all.
type queueLimits struct{ perPeer, total int }

const queueOverhead = 64

func queueCost(n int) int { return n + queueOverhead }

// admit reserves queue room for a message of n bytes from peer (released when a Recv takes
// it), or returns why the message is refused.
func (b *Bootstrap) admit(peer, n int) error {
	cost := queueCost(n)
	b.boxMu.Lock()
	defer b.boxMu.Unlock()
	if b.queued[peer]+cost > b.qLimit.perPeer {
		return fmt.Errorf("rank %d sent a message of %d bytes while %d bytes of its messages wait unreceived, more than the %d bytes queued per peer (messages on tags nobody receives?)",
			peer, n, b.queued[peer], b.qLimit.perPeer)
	}
	if b.qTotal+cost > b.qLimit.total {
		return fmt.Errorf("rank %d sent a message of %d bytes while %d bytes of messages from all peers wait unreceived, more than the %d bytes queued in all (messages on tags nobody receives?)",
			peer, n, b.qTotal, b.qLimit.total)
	}
	b.queued[peer] += cost
	b.qTotal += cost
	return nil
}

// releaseLocked returns the queue room of a message of n bytes from peer (boxMu held).
func (b *Bootstrap) releaseLocked(peer, n int) {
	b.queued[peer] -= queueCost(n)
	b.qTotal -= queueCost(n)
}

// readChunked reads n bytes, growing the buffer only as data arrives (at
// most doubling what arrived), so an announced length that the peer does
// not send costs this side at most p2pChunk.
func readChunked(r io.Reader, n int) ([]byte, error) {
	msg := make([]byte, 0, min(n, p2pChunk))
	for len(msg) < n {
		if len(msg) == cap(msg) {
			msg = slices.Grow(msg, min(n-len(msg), max(len(msg), p2pChunk)))
		}
		m, err := r.Read(msg[len(msg):min(n, cap(msg))])
		msg = msg[:len(msg)+m]
		if err != nil && len(msg) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return msg, nil
}

// PeerConns is how many point-to-point connections this rank opened (one per peer it sent to).
func (b *Bootstrap) PeerConns() int {
	n := 0
	for i := range b.out {
		o := &b.out[i]
		o.mu.Lock()
		if o.c != nil {
			n++
		}
		o.mu.Unlock()
	}
	return n
}
