package impl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Triggers of mscclppConnOp.
const (
	opData = 1
	opFlag = 2
	opSync = 4
)

const eagerBuf = 1 << 20

// eagerTransport is what the SHM transport tells tests about its eager rings.
type eagerTransport interface {
	EagerRing(idx int) unsafe.Pointer
	EagerQueued(idx int) uint64
}

// eagerPair runs f on both ranks of a 2-rank communicator with one SHM connection (tag 0)
// over 1 MiB buffers of Go memory (which the peer cannot map: puts into it are eager or
// process_vm_writev), set up; dev is the connection's device entry.
func eagerPair(t *testing.T, f func(c *Comm, buf []byte, dev unsafe.Pointer) error) {
	t.Helper()
	bufs := [2][]byte{make([]byte, eagerBuf), make([]byte, eagerBuf)}
	forRanks(t, 2, func(c *Comm) error {
		buf := bufs[c.Rank()]
		if err := c.Connect(1-c.Rank(), 0, unsafe.Pointer(&buf[0]), eagerBuf, TransportSHM, nil, true); err != nil {
			return err
		}
		if err := c.ConnectionSetup(); err != nil {
			return err
		}
		return f(c, buf, c.host.DevConns.At(0))
	})
}

// eagerOf is the SHM transport of c as eagerTransport.
func eagerOf(c *Comm) eagerTransport {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, _ := c.transports[TransportSHM].(eagerTransport)
	return e
}

func op(dev unsafe.Pointer, typ, dst, src, size uint64) error {
	if rc := engine.ConnOp(dev, typ, dst, src, size); rc != status.Success {
		return fmt.Errorf("mscclppConnOp(type %d, dst %d, src %d, size %d): %v", typ, dst, src, size, rc)
	}
	return nil
}

func waitNext(dev unsafe.Pointer) error {
	if rc := engine.ConnWaitNext(dev, 20000); rc != status.Success {
		return fmt.Errorf("mscclppConnWaitNext: %v", rc)
	}
	return nil
}

func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*131 + i*7 + 1)
	}
}

// eagerRound is one round of TestEagerDataInOrder: rank 0 runs puts (each fills its source
// first) and a signal, rank 1 waits and compares its buffer with want, then acknowledges.
type eagerRound struct {
	name string
	puts [][3]uint64 // dst, size, seed
}

func (r eagerRound) want(buf []byte) []byte {
	w := make([]byte, len(buf))
	src := make([]byte, eagerBuf)
	for _, p := range r.puts {
		fill(src[:p[1]], int(p[2]))
		copy(w[p[0]:], src[:p[1]])
	}
	return w
}

func eagerRounds() []eagerRound {
	var rs []eagerRound
	for i, s := range []uint64{1, 7, 8, 31, 32, 33, 63, 64, 100, 4064, 4095, 4096, 4097, 8192, 65536} {
		// a put, then an overlapping one at the same offset: the later wins
		rs = append(rs, eagerRound{fmt.Sprintf("size-%d", s), [][3]uint64{{40, s, uint64(i)}, {40, min(s, 8), uint64(i) + 100}}})
	}
	rs = append(rs, eagerRound{"small-large-small", [][3]uint64{{0, 64, 1}, {0, 65536, 2}, {16, 8, 3}, {65500, 100, 4}}})
	var many [][3]uint64
	for j := uint64(0); j < 3000; j++ { // more than a ring holds: the sender waits for room
		many = append(many, [3]uint64{(j * 4096) % (eagerBuf / 2), 64 + (j%3)*2000, j})
	}
	return append(rs, eagerRound{"many", many})
}

// TestEagerDataInOrder: puts of every size around the eager threshold (4096) arrive intact,
// overlapping puts to the same bytes land in order (a direct put after eager ones does not
// overtake them), and a full ring holds the sender back without losing data.
func TestEagerDataInOrder(t *testing.T) {
	rounds := eagerRounds()
	eagerPair(t, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		for i, r := range rounds {
			if c.Rank() == 0 {
				for k, p := range r.puts {
					fill(buf[eagerBuf/2:eagerBuf/2+p[1]], int(p[2]))
					typ := uint64(opData)
					if k == len(r.puts)-1 && i%2 == 0 {
						typ |= opFlag // every other round the signal goes with the last put
					}
					if err := op(dev, typ, p[0], eagerBuf/2, p[1]); err != nil {
						return fmt.Errorf("%s: %w", r.name, err)
					}
				}
				if i%2 == 1 {
					if err := op(dev, opFlag, 0, 0, 1); err != nil {
						return err
					}
				}
				if err := waitNext(dev); err != nil { // rank 1 checked
					return fmt.Errorf("%s: %w", r.name, err)
				}
				continue
			}
			if err := waitNext(dev); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			want := r.want(buf[:eagerBuf/2])
			if k := firstDiff(buf[:eagerBuf/2], want); k >= 0 {
				return fmt.Errorf("round %s: byte %d is %d, want %d", r.name, k, buf[k], want[k])
			}
			clear(buf)
			if err := op(dev, opFlag, 0, 0, 1); err != nil {
				return err
			}
		}
		if c.Rank() == 0 && eagerOf(c).EagerQueued(0) == 0 {
			return fmt.Errorf("no put went through the eager ring")
		}
		return nil
	})
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestEagerVisibleWithoutReceiverCall: an eager put lands in the receiver's buffer while the
// receiver makes no call at all (its lander thread lands it).
func TestEagerVisibleWithoutReceiverCall(t *testing.T) {
	eagerPair(t, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		const off = 4096
		want := uint64(0x1122334455667788)
		if c.Rank() == 0 {
			binary.LittleEndian.PutUint64(buf, want)
			if err := op(dev, opData, off, 0, 8); err != nil {
				return err
			}
			if eagerOf(c).EagerQueued(0) == 0 {
				return fmt.Errorf("the put did not go through the eager ring")
			}
		} else {
			p := (*uint64)(unsafe.Pointer(&buf[off]))
			deadline := time.Now().Add(10 * time.Second)
			for atomic.LoadUint64(p) != want {
				if time.Now().After(deadline) {
					return fmt.Errorf("the put never landed without a call: %#x", atomic.LoadUint64(p))
				}
				time.Sleep(50 * time.Microsecond)
			}
		}
		return c.Barrier()
	})
}

// TestEagerDisabled: MSCCLPP_EAGER_BYTES=0 turns the ring off; puts still arrive.
func TestEagerDisabled(t *testing.T) {
	t.Setenv("MSCCLPP_EAGER_BYTES", "0")
	eagerPair(t, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 0 {
			fill(buf[:64], 9)
			if err := op(dev, opData|opFlag, 0, 0, 64); err != nil {
				return err
			}
			if p := eagerOf(c).EagerRing(0); p != nil {
				return fmt.Errorf("a ring is in use with MSCCLPP_EAGER_BYTES=0")
			}
			return nil
		}
		if err := waitNext(dev); err != nil {
			return err
		}
		want := make([]byte, 64)
		fill(want, 9)
		if !bytes.Equal(buf[:64], want) {
			return fmt.Errorf("received %v", buf[:64])
		}
		return nil
	})
}

// TestEagerForgedEntry: an entry that points outside the receiver's registrations is refused
// (RemoteError naming the connection), not landed.
func TestEagerForgedEntry(t *testing.T) {
	eagerPair(t, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 0 {
			hdr := eagerOf(c).EagerRing(0)
			if hdr == nil {
				return fmt.Errorf("no eager ring")
			}
			// the layout of ring.h: head at byte 64, slots after 4096 bytes; an entry of 8 bytes for
			// handle 1 at offset 1 TiB
			head := (*uint64)(unsafe.Add(hdr, 64))
			pos := atomic.LoadUint64(head)
			nslots := uint64(*(*uint32)(unsafe.Add(hdr, 8)))
			e := unsafe.Add(hdr, 4096+int((pos%nslots)*64))
			*(*uint64)(unsafe.Add(e, 8)) = 1 << 40
			*(*uint32)(unsafe.Add(e, 16)) = 1
			*(*uint32)(unsafe.Add(e, 20)) = 8
			*(*uint64)(unsafe.Add(e, 24)) = 1
			atomic.StoreUint64(head, pos+1)
			atomic.StoreUint64((*uint64)(e), pos+1)
			return c.Barrier()
		}
		rc := engine.ConnWaitNext(dev, 20000)
		err := c.host.Eng.Err()
		if rc != status.RemoteError || err == nil || !strings.Contains(err.Error(), "outside this rank's registrations") ||
			!strings.Contains(err.Error(), "rank 0") {
			return fmt.Errorf("wait after a forged entry: %v, %v; want RemoteError saying the entry is outside the registrations", rc, err)
		}
		return c.Barrier()
	})
}

// TestForgedEagerRing: what a peer claims about its eager ring is checked against the memory
// before the ring is used: an arena larger than the memfd, another file, a ring that does not
// fit in the arena (by its size or its offset) or whose header is not one fail setup with
// RemoteError naming the rank.
func TestForgedEagerRing(t *testing.T) {
	const (
		wIno     = 4 // the ring's inode (regRaw blobs of shm's desc)
		wRegSize = 5 // the size of the rings' arena
		wOffset  = 6 // the ring's offset in it
	)
	word := func(m *setupMsg, i int) uint64 { return binary.LittleEndian.Uint64(m.blobs[1][8*i:]) }
	cases := []struct {
		name, want string
		forge      func(m *setupMsg)
	}{
		{"size-1GiB", "claims a region of 1073741824 bytes", func(m *setupMsg) { setWord(m, 1, wRegSize, 1<<30) }},
		{"other-file", "is not the region the peer registered", func(m *setupMsg) { setWord(m, 1, wIno, word(m, wIno)+1) }},
		{"size-4KiB", "lies outside its 4096-byte region", func(m *setupMsg) { setWord(m, 1, wRegSize, 4096) }},
		{"offset-past-end", "lies outside its", func(m *setupMsg) { setWord(m, 1, wOffset, 1<<40) }},
		{"offset-in-last-ring", "is malformed", func(m *setupMsg) { setWord(m, 1, wOffset, word(m, wRegSize)-4096) }},
	}
	malloced := func(c *Comm) (func(), error) {
		buf := make([]byte, 4096)
		return nil, c.Connect(1-c.Rank(), 3, unsafe.Pointer(&buf[0]), 4096, TransportSHM, nil, true)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := forgedSetupOver(t, malloced, tc.forge)
			if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "rank 0") ||
				!strings.Contains(err.Error(), tc.want) {
				t.Fatalf("setup with a forged ring: %v; want RemoteError naming rank 0 and saying %q", err, tc.want)
			}
		})
	}
	if err := forgedSetupOver(t, malloced, nil); err != nil {
		t.Fatalf("genuine setup: %v", err)
	}
}

// TestEagerSleepingWaiter: with waits that sleep at once (futex on the epoch, sleepers counted
// in the ring's header), round trips of eager puts with signals each arrive intact: a signal
// queued in the ring wakes the waiter or is seen by it before it sleeps.
func TestEagerSleepingWaiter(t *testing.T) {
	t.Setenv("MSCCLPP_WAIT_SPIN", "0")
	t.Setenv("MSCCLPP_WAIT_YIELD", "0")
	eagerPair(t, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		const rounds = 300
		for i := 0; i < rounds; i++ {
			if c.Rank() == i%2 { // the ranks take turns sending
				fill(buf[eagerBuf/2:eagerBuf/2+24], i)
				if err := op(dev, opData|opFlag, 8, eagerBuf/2, 24); err != nil {
					return err
				}
				continue
			}
			if err := waitNext(dev); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
			want := make([]byte, 24)
			fill(want, i)
			if !bytes.Equal(buf[8:32], want) {
				return fmt.Errorf("round %d: received %v, want %v", i, buf[8:32], want)
			}
		}
		if eagerOf(c).EagerQueued(0) == 0 {
			return fmt.Errorf("no put went through the eager ring")
		}
		return nil
	})
}

// TestEagerThroughFifo: triggers the proxy serves (pushed into the FIFO) take the eager path
// too, in order with a host signal: small puts to the same bytes (the later wins), a large
// one between them, then a signal from the host thread.
func TestEagerThroughFifo(t *testing.T) {
	eagerPair(t, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if err := c.ProxyLaunch(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fill(buf[eagerBuf/2:], 1)
			for _, p := range [][3]uint64{{0, 0, 64}, {0, 4096, 65536}, {8, 100, 16}, {8, 200, 8}} {
				if seq := engine.FifoPush(dev, opData, p[0], eagerBuf/2+p[1], p[2]); seq == engine.PushFailed {
					return fmt.Errorf("push %v failed", p)
				}
			}
			if err := op(dev, opFlag, 0, 0, 1); err != nil { // covers the triggers pushed before it
				return err
			}
		} else {
			if err := waitNext(dev); err != nil {
				return err
			}
			src := make([]byte, eagerBuf/2)
			fill(src, 1)
			want := make([]byte, 65536)
			copy(want, src[4096:4096+65536])
			copy(want[8:], src[200:208])
			copy(want[16:], src[108:116])
			if k := firstDiff(buf[:65536], want); k >= 0 {
				return fmt.Errorf("byte %d is %d, want %d", k, buf[k], want[k])
			}
		}
		if err := c.ProxyStop(); err != nil {
			return err
		}
		if c.Rank() == 0 && eagerOf(c).EagerQueued(0) == 0 {
			return fmt.Errorf("no put went through the eager ring")
		}
		return nil
	})
}

// TestEagerReceiverDestroyed: a receiver that destroys its communicator lands nothing more; a
// sender that then fills the ring gets RemoteError saying so instead of waiting for ever.
func TestEagerReceiverDestroyed(t *testing.T) {
	addr := freeAddr(t)
	bufs := [2][]byte{make([]byte, eagerBuf), make([]byte, eagerBuf)}
	destroyed := make(chan struct{})
	runRanks(t, 2, func(r int) error {
		c, err := InitRank(2, addr, r)
		if err != nil {
			return err
		}
		if err = c.Connect(1-r, 0, unsafe.Pointer(&bufs[r][0]), eagerBuf, TransportSHM, nil, true); err == nil {
			err = c.ConnectionSetup()
		}
		if r == 1 {
			defer close(destroyed)
			return errors.Join(err, c.Destroy())
		}
		<-destroyed
		dev := c.host.DevConns.At(0)
		rc := status.Success
		for i := 0; i < 10000 && rc == status.Success; i++ {
			rc = engine.ConnOp(dev, opData, 0, 0, 4096)
		}
		err = nil
		if e := c.host.Eng.Err(); rc != status.RemoteError || e == nil || !strings.Contains(e.Error(), "rank 1 destroyed its communicator") {
			err = fmt.Errorf("puts to a destroyed receiver: %v, %v; want RemoteError saying rank 1 destroyed its communicator", rc, e)
		}
		return errors.Join(err, c.Destroy())
	})
}

// TestEagerSignalAfterData: a signal that follows eager puts is published only once their
// data landed, also to a receiver that makes no call and reads its epoch directly (as a
// device-style wait does): it never sees the signal before the data.
func TestEagerSignalAfterData(t *testing.T) {
	eagerPair(t, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		epoch := (*uint64)(unsafe.Add(c.host.DevConns.LocalEpoch(0), 8))
		for i := uint64(1); i <= 200; i++ {
			if c.Rank() == 0 {
				binary.LittleEndian.PutUint64(buf[eagerBuf/2:], i)
				if err := op(dev, opData, 64, eagerBuf/2, 8); err != nil {
					return err
				}
				if err := op(dev, opFlag, 0, 0, 1); err != nil {
					return err
				}
				if err := waitNext(dev); err != nil { // rank 1 looked
					return err
				}
				continue
			}
			deadline := time.Now().Add(20 * time.Second)
			for atomic.LoadUint64(epoch) < i {
				if time.Now().After(deadline) {
					return fmt.Errorf("round %d: no signal", i)
				}
			}
			if got := atomic.LoadUint64((*uint64)(unsafe.Pointer(&buf[64]))); got != i {
				return fmt.Errorf("round %d: the signal arrived before the data (%d)", i, got)
			}
			if err := op(dev, opFlag, 0, 0, 1); err != nil {
				return err
			}
		}
		return nil
	})
}
