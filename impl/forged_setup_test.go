package impl

import (
	"encoding/binary"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// forgedSetup runs a 2-rank SHM setup over 4 KiB mscclppHostAlloc buffers in which rank 0
// sends, instead of its real setup message, that message changed by forge (nil: a genuine
// setup on both ranks); it returns what rank 1's mscclppConnectionSetup returned.
func forgedSetup(t *testing.T, forge func(m *setupMsg)) error {
	t.Helper()
	err := forgedSetupOver(t, func(c *Comm) (func(), error) {
		buf, err := hostmem.Alloc(4096)
		if err != nil {
			return nil, err
		}
		return func() { hostmem.Free(buf) }, c.Connect(1-c.Rank(), 3, buf, 4096, TransportSHM, nil, true)
	}, forge)
	if n := hostmem.Mapped(); n != 0 {
		t.Errorf("%d peer regions still mapped after destroy", n)
	}
	return err
}

// forgedSetupOver is forgedSetup for the connection (tag 3) that connect declares; the
// function it returns runs after destroy. Each rank runs on a locked OS thread.
func forgedSetupOver(t *testing.T, connect func(c *Comm) (func(), error), forge func(m *setupMsg)) error {
	t.Helper()
	t.Setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", "10") // where the forgery is accepted, rank 1 fails in its barrier
	setupPointToPoint.Store(true)               // rank 0 sends its forged message by hand
	defer setupPointToPoint.Store(false)
	addr := freeAddr(t)
	var got error
	done := make(chan struct{})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c, err := InitRank(2, addr, r)
			if err != nil {
				errs[r] = err
				if r == 1 {
					close(done)
				}
				return
			}
			errs[r] = forgedRank(c, connect, forge, &got, done)
			if derr := c.Destroy(); derr != nil && errs[r] == nil {
				errs[r] = derr
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	return got
}

// forgedRank is one rank of forgedSetupOver: rank 1 sets up and stores what it got in *got,
// rank 0 sends its forged message and waits for rank 1 (done).
func forgedRank(c *Comm, connect func(c *Comm) (func(), error), forge func(m *setupMsg), got *error, done chan struct{}) error {
	release, err := connect(c)
	if release != nil {
		defer release()
	}
	if c.Rank() == 1 {
		defer close(done)
	}
	if err != nil {
		return err
	}
	if c.Rank() == 1 || forge == nil {
		err := c.ConnectionSetup()
		if c.Rank() == 0 {
			return err
		}
		*got = err
		return nil
	}
	cn := c.conns[0]
	m, err := c.describe(cn, []int{0, 1})
	if err != nil {
		return err
	}
	forge(&m)
	if err := c.boot.Send(1, 3, m.encode()); err != nil {
		return err
	}
	_ = c.closeSetup(&setupFailures{}) // the forger reaches setup's closing barrier, as every rank does
	<-done
	return nil
}

// setWord sets word i of the SHM registration blob of handle h (see shm's desc).
func setWord(m *setupMsg, h, i int, v uint64) {
	b := append([]byte(nil), m.blobs[h]...)
	binary.LittleEndian.PutUint64(b[8*i:], v)
	m.blobs[h] = b
}

// TestForgedSHMSetup: what a peer claims about its memory is checked against the memory:
// a region or buffer larger than the memfd behind it (1 GiB or 1 TiB over 4 KiB: SIGSEGV or
// SIGBUS on the first put) fails setup with RemoteError naming the rank, and so does a peer
// that claims a pid which is not its own (a process that exited: it holds no proof of the rank).
func TestForgedSHMSetup(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	const (
		wSize    = 2 // the buffer's size
		wRegSize = 5 // the region's size
		wOffset  = 6 // the buffer's offset in the region
	)
	cases := []struct {
		name, want string
		forge      func(m *setupMsg)
	}{
		{"region-1GiB", "claims a region of 1073741824 bytes", func(m *setupMsg) { setWord(m, 1, wRegSize, 1<<30) }},
		{"region-1TiB", "claims a region of 1099511627776 bytes", func(m *setupMsg) { setWord(m, 1, wRegSize, 1<<40) }},
		{"buffer-1GiB", "outside its 4096-byte region", func(m *setupMsg) { setWord(m, 1, wSize, 1<<30) }},
		{"buffer-wraps", "outside its 4096-byte region", func(m *setupMsg) {
			setWord(m, 1, wOffset, 8)
			setWord(m, 1, wSize, ^uint64(0)-4)
		}},
		{"pid-not-its-own", fmt.Sprintf("the peer claims pid %d, which holds no proof of rank 0", dead.Process.Pid), func(m *setupMsg) { m.pid = dead.Process.Pid }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := forgedSetup(t, tc.forge)
			if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "rank 0") ||
				!strings.Contains(err.Error(), tc.want) {
				t.Fatalf("setup with a forged peer: %v; want RemoteError naming rank 0 and saying %q", err, tc.want)
			}
		})
	}
	// the same setup unforged works
	if err := forgedSetup(t, nil); err != nil {
		t.Fatalf("genuine setup: %v", err)
	}
}
