package impl

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/nodeshm"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// collByte is byte i of rank r's block in gather number g of size bytes per rank.
func collByte(r, i, g, size int) byte { return byte(r*131 + i*7 + i>>11 + g*17 + size) }

// fillBlocks sets dst[i] = f(i) for each i, where f repeats every 256 bytes within each aligned
// block of blockBytes (a multiple of 256): it computes the first 256 of a block and copies them,
// which the race detector checks as one range instead of byte after byte.
func fillBlocks(dst []byte, blockBytes int, f func(i int) byte) {
	for start := 0; start < len(dst); start += blockBytes {
		blk := dst[start:min(len(dst), start+blockBytes)]
		for i := range blk[:min(len(blk), 256)] {
			blk[i] = f(start + i)
		}
		for filled := 256; filled < len(blk); filled *= 2 {
			copy(blk[filled:], blk[:filled])
		}
	}
}

// collBlock fills dst, rank r's block in gather g, with collByte(r, i, g, size) for each i (7 is
// odd: 7i repeats every 256 bytes, and i>>11 is the same within 2048).
func collBlock(dst []byte, r, g, size int) {
	fillBlocks(dst, 2048, func(i int) byte { return collByte(r, i, g, size) })
}

// gatherChecked runs one AllGather of size bytes per rank on c (or a barrier when size is 0)
// and checks every byte that arrived.
func gatherChecked(c *Comm, size, g int) error {
	if size == 0 {
		return c.Barrier()
	}
	n, me := c.Size(), c.Rank()
	want := make([]byte, n*size)
	for r := 0; r < n; r++ {
		collBlock(want[r*size:(r+1)*size], r, g, size)
	}
	buf := bytes.Repeat([]byte{0xEE}, n*size) // stale data a gather must overwrite
	copy(buf[me*size:(me+1)*size], want[me*size:])
	if err := c.AllGather(unsafe.Pointer(&buf[0]), size); err != nil {
		return fmt.Errorf("gather %d of %d bytes: %w", g, size, err)
	}
	if bytes.Equal(buf, want) {
		return nil
	}
	for i := range buf {
		if buf[i] != want[i] {
			return fmt.Errorf("gather %d of %d bytes: rank %d's byte %d = %#x, want %#x", g, size, i/size, i%size, buf[i], want[i])
		}
	}
	return nil
}

// Gathers through the node segment of many sizes, a slot and more included and sizes that are
// no multiple of a slot, at several rank counts; every byte of every rank checked.
func TestAllGatherShmSizes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3, 5, 8} {
		slot := nodeshm.CollSlotBytesFor(n)
		sizes := []int{1, 3, slot - 1, slot, slot + 1, 2 * slot, 3*slot + 13, 1<<20 + 5}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			forRanks(t, n, func(c *Comm) error {
				if !c.shmCollectives(1 << 20) {
					return fmt.Errorf("a single-node communicator does not gather through the node segment")
				}
				for g, size := range sizes {
					if err := gatherChecked(c, size, g); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
	t.Run("2x3MiB", func(t *testing.T) {
		t.Parallel()
		forRanks(t, 2, func(c *Comm) error { return gatherChecked(c, 3<<20+1, 0) })
	})
}

// A gather of 1 MiB per rank between 2 local ranks takes at most 2 rounds through the node
// segment (each round waits for the peer: a handoff between CPUs, or a wake-up), and 4 ranks
// at most 4; every byte checked.
func TestAllGatherShmFewRounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, rounds int }{{2, 2}, {4, 4}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			forRanks(t, tc.n, func(c *Comm) error {
				before := c.collSeq
				if err := gatherChecked(c, 1<<20, 0); err != nil {
					return err
				}
				if got := c.collSeq - before; got > uint64(tc.rounds) {
					return fmt.Errorf("a 1 MiB gather of %d ranks took %d rounds, want at most %d", tc.n, got, tc.rounds)
				}
				return nil
			})
		})
	}
}

// Small and large gathers and barriers interleaved on one communicator: chunk rounds and
// single rounds share the sequence numbers and slot parities without mixing data.
func TestAllGatherShmInterleaved(t *testing.T) {
	slot := nodeshm.CollSlotBytesFor(4)
	sizes := []int{4, 5*slot/2 + 1, 0, 16, 2 * slot, slot + 1, 0, 1, 3*slot - 1, 8}
	t.Parallel()
	forRanks(t, 4, func(c *Comm) error {
		for rep := 0; rep < 3; rep++ {
			for i, size := range sizes {
				if err := gatherChecked(c, size, rep*len(sizes)+i); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Ranks that gather different sizes, both above a slot, fail with InvalidUsage on both sides
// (at the first chunk) rather than pairing chunks of different gathers.
func TestAllGatherShmMismatchedLargeSizes(t *testing.T) {
	slot := nodeshm.CollSlotBytesFor(2)
	for _, sizes := range [][2]int{{2 * slot, slot}, {3*slot + 1, 2*slot + 1}} {
		t.Run(fmt.Sprint(sizes[0], "vs", sizes[1]), func(t *testing.T) {
			addr := freeAddr(t)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for r := 0; r < 2; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					c, err := InitRank(2, addr, r)
					if err != nil {
						errs[r] = err
						return
					}
					defer c.Destroy()
					buf := make([]byte, 2*sizes[r])
					errs[r] = c.AllGather(unsafe.Pointer(&buf[0]), sizes[r])
				}(r)
			}
			wg.Wait()
			for r, err := range errs {
				if status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), "same size") {
					t.Errorf("rank %d: %v, want InvalidUsage naming the size mismatch", r, err)
				}
			}
		})
	}
}

// A rank whose process is gone after it published some chunks of a large gather: the others
// get RemoteError naming it, well before the bootstrap timeout, and do not hang.
func TestAllGatherShmPeerDiesMidGather(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := dead.Process.Pid
	const n, victim = 3, 2
	slot := nodeshm.CollSlotBytesFor(n)
	size := 4 * slot // four chunk rounds
	old := bootstrapTimeoutNs.Load()
	defer bootstrapTimeoutNs.Store(old)
	if err := SetBootstrapTimeout(30); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	survivors := make(chan struct{}, n-1)
	forRanks(t, n, func(c *Comm) error {
		buf := make([]byte, n*size)
		if c.Rank() == victim {
			// two chunk rounds of the gather, then "exit" (its pid names a process that is gone)
			// and publish a third chunk without waiting: a survivor that reads the pid for the
			// fourth round saw the third, so it sees the dead pid (a real pid never changes)
			for off := 0; off < 2*slot; off += slot {
				if err := c.shmRound(buf, size, off, slot); err != nil {
					return fmt.Errorf("victim's chunk at %d: %w", off, err)
				}
			}
			c.host.Node.SetPid(victim, deadPid)
			c.collSeq++
			atomic.StoreUint64(c.host.Node.CollSize(victim, int(c.collSeq&1)), uint64(size))
			engine.PublishSeq(c.host.Node.CollSeq(victim), c.collSeq, c.host.Node.CollSleepers(victim))
			// stay (sockets open, nothing said over TCP) until the survivors saw it in the segment
			return awaitSurvivors(survivors, n-1)
		}
		defer func() { survivors <- struct{}{} }()
		err := c.AllGather(unsafe.Pointer(&buf[0]), size)
		if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), fmt.Sprintf("rank %d", victim)) {
			return fmt.Errorf("gather with a dead rank: %v, want RemoteError naming rank %d", err, victim)
		}
		if err := c.AllGather(unsafe.Pointer(&buf[0]), size); err == nil {
			return fmt.Errorf("the next gather with a dead rank succeeded")
		}
		return nil
	})
	if dt := time.Since(start); dt > 15*time.Second {
		t.Errorf("noticing the dead rank took %v (timeout 30 s)", dt)
	}
}

// awaitSurvivors waits until n survivors signalled on survivors (40 s at most per survivor).
func awaitSurvivors(survivors <-chan struct{}, n int) error {
	for i := 0; i < n; i++ {
		select {
		case <-survivors:
		case <-time.After(40 * time.Second):
			return fmt.Errorf("the survivors did not return")
		}
	}
	return nil
}

// A rank that stops (alive) after some chunk rounds of a large gather: the others give up at
// the bootstrap timeout, counted per round, with RemoteError naming it, and do not hang.
func TestAllGatherShmPeerStallsMidGather(t *testing.T) {
	const n, victim = 3, 1
	slot := nodeshm.CollSlotBytesFor(n)
	size := 4 * slot // four chunk rounds
	old := bootstrapTimeoutNs.Load()
	defer bootstrapTimeoutNs.Store(old)
	if err := SetBootstrapTimeout(1); err != nil {
		t.Fatal(err)
	}
	survivors := make(chan struct{}, n-1)
	forRanks(t, n, func(c *Comm) error {
		buf := make([]byte, n*size)
		if c.Rank() == victim {
			if err := c.shmRound(buf, size, 0, slot); err != nil {
				return fmt.Errorf("victim's first chunk: %w", err)
			}
			return awaitSurvivors(survivors, n-1) // stalls, sockets open, until the others gave up
		}
		defer func() { survivors <- struct{}{} }()
		start := time.Now()
		err := c.AllGather(unsafe.Pointer(&buf[0]), size)
		dt := time.Since(start)
		if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), fmt.Sprintf("rank %d did not reach", victim)) {
			return fmt.Errorf("gather with a stalled rank: %v, want RemoteError naming rank %d", err, victim)
		}
		if dt < 500*time.Millisecond || dt > 10*time.Second {
			return fmt.Errorf("gave up after %v, timeout 1 s", dt)
		}
		return nil
	})
}
