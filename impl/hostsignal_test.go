package impl

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// hostAllocPair runs f on both ranks of a 2-rank communicator with one SHM connection (tag 0)
// over mscclppHostAlloc buffers of size bytes, which each side maps: puts are one memcpy and
// signals the direct path of shm.c.
func hostAllocPair(t *testing.T, size uint64, f func(c *Comm, buf []byte, dev unsafe.Pointer) error) {
	t.Helper()
	forRanks(t, 2, func(c *Comm) error {
		p, err := hostmem.Alloc(size)
		if err != nil {
			return err
		}
		buf := unsafe.Slice((*byte)(p), size)
		if err := c.Connect(1-c.Rank(), 0, p, size, TransportSHM, nil, true); err != nil {
			return err
		}
		if err := c.ConnectionSetup(); err != nil {
			return err
		}
		if c.host.DevConns.RemoteBuff(0) == nil {
			return errors.New("the peer's mscclppHostAlloc buffer is not mapped")
		}
		return f(c, buf, c.host.DevConns.At(0))
	})
}

// Host threads signalling one connection at once: every signal is counted once (the peer's
// waits reach the total, none times out), every put's data arrived, and the device epoch
// counts every call.
func TestHostSignalConcurrent(t *testing.T) {
	const threads, rounds = 4, 5000
	hostAllocPair(t, 4096, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 1 {
			for i := 0; i < threads*rounds; i++ {
				if err := waitNext(dev); err != nil {
					return err
				}
			}
			for g := 0; g < threads; g++ { // each thread's slot holds its last round
				if got := *(*uint64)(unsafe.Pointer(&buf[g*64])); got != rounds {
					return errors.New("a thread's last put did not arrive before its signal")
				}
			}
			return waitNext(dev) // rank 0 checked its device epoch
		}
		var wg sync.WaitGroup
		var bad atomic.Int32
		for g := 0; g < threads; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				slot := (*uint64)(unsafe.Pointer(&buf[g*64]))
				for i := 1; i <= rounds; i++ {
					atomic.StoreUint64(slot, uint64(i))
					if engine.ConnSignalOp(dev, opData|opFlag, uint64(g*64), uint64(g*64), 8) != status.Success {
						bad.Add(1)
					}
				}
			}(g)
		}
		wg.Wait()
		if bad.Load() != 0 {
			return errors.New("a concurrent putWithSignal failed: " + status.Last())
		}
		if got := atomic.LoadUint64((*uint64)(c.host.DevConns.LocalEpoch(0))); got != threads*rounds {
			return errors.New("the device epoch did not count every putWithSignal")
		}
		return op(dev, opFlag, 0, 0, 1)
	})
}

// mscclppConnSignalOp refuses what mscclppConnOp refuses, with its words, and increments the
// device epoch whenever the connection is one (as epochIncrement() then the op did); a put past
// the end sends no signal.
func TestConnSignalOpErrors(t *testing.T) {
	hostAllocPair(t, 4096, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 1 {
			return waitNext(dev) // the one good signal below
		}
		epoch := (*uint64)(c.host.DevConns.LocalEpoch(0))
		if rc := engine.ConnSignalOp(dev, opData|opFlag, 4090, 0, 8); rc != status.InvalidArgument {
			return errors.New("a put past the end was not refused: " + rc.String())
		}
		if !strings.Contains(status.Last(), "put writes 8 bytes at offset 4090") {
			return errors.New("unexpected message for a put past the end: " + status.Last())
		}
		if atomic.LoadUint64(epoch) != 1 {
			return errors.New("the device epoch was not incremented by a refused putWithSignal")
		}
		var foreign [128]byte // a struct the library never handed out
		if rc := engine.ConnSignalOp(unsafe.Pointer(&foreign[0]), opData|opFlag, 0, 0, 8); rc != status.InvalidUsage {
			return errors.New("a foreign connection was not refused: " + rc.String())
		}
		if !strings.HasPrefix(status.Last(), "mscclppConnOp: not a connection") {
			return errors.New("unexpected message for a foreign connection: " + status.Last())
		}
		if rc := engine.ConnSignalOp(nil, opFlag, 0, 0, 1); rc != status.InvalidArgument ||
			status.Last() != "mscclppDevConnSignal (mscclppConnSignalOp): conn is NULL" {
			return errors.New("unexpected result for a NULL connection: " + status.Last())
		}
		if atomic.LoadUint64(epoch) != 1 {
			return errors.New("a refused connection changed the device epoch")
		}
		if rc := engine.ConnSignalOp(dev, opData|opFlag, 0, 0, 8); rc != status.Success {
			return errors.New("a good putWithSignal failed: " + status.Last())
		}
		if atomic.LoadUint64(epoch) != 2 {
			return errors.New("the device epoch did not count a good putWithSignal")
		}
		return nil
	})
}

// Small puts into mapped memory (the sizes shm.c copies inline, and around them) land exactly:
// every byte of the put, none beside it.
func TestHostAllocSmallPuts(t *testing.T) {
	hostAllocPair(t, 4096, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		round := 0
		for size := uint64(1); size <= 24; size++ {
			for _, off := range []uint64{0, 3, 61, 4096 - size} {
				round++
				if c.Rank() == 0 {
					fill(buf[off:off+size], round)
					if err := op(dev, opData|opFlag, off, off, size); err != nil {
						return err
					}
					if err := waitNext(dev); err != nil { // rank 1 checked and cleared
						return err
					}
					continue
				}
				if err := waitNext(dev); err != nil {
					return err
				}
				want := make([]byte, size)
				fill(want, round)
				if !bytes.Equal(buf[off:off+size], want) {
					return fmt.Errorf("a %d-byte put at offset %d landed as %x, not %x", size, off, buf[off:off+size], want)
				}
				for i, b := range buf {
					if b != 0 && (uint64(i) < off || uint64(i) >= off+size) {
						return fmt.Errorf("a %d-byte put at offset %d wrote byte %d", size, off, i)
					}
				}
				clear(buf)
				if err := op(dev, opFlag, 0, 0, 1); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
