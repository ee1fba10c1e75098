//go:build mscclpp_testhooks

package impl

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestPinnedHostMemoryHostMode: a buffer of pinned host memory (cudaHostAlloc), which the driver
// reports with a context as it does device memory, keeps an Ethernet or IB (verbs double)
// connection in host mode: host threads put with a signal and wait on it, and the data arrives.
func TestPinnedHostMemoryHostMode(t *testing.T) {
	if m := os.Getenv(fakeChildEnv); m == "pinned-eth" || m == "pinned-ib" {
		tr := TransportEthernet
		if m == "pinned-ib" {
			tr = transportIB
		}
		pinnedHostChild(t, tr)
		return
	}
	t.Parallel()
	t.Run("Ethernet", func(t *testing.T) {
		t.Parallel()
		t.Logf("child:\n%s", runFakeCUDAChild(t, "TestPinnedHostMemoryHostMode", "pinned-eth"))
	})
	t.Run("IB", func(t *testing.T) {
		t.Parallel()
		t.Logf("child:\n%s", runFakeCUDAChild(t, "TestPinnedHostMemoryHostMode", "pinned-ib", ibDoubleEnv(t)...))
	})
}

func pinnedHostChild(t *testing.T, tr Transport) {
	const size = 1<<20 + 123
	if err := cuda.Load(); err != nil {
		t.Fatal(err)
	}
	var bufs [2]unsafe.Pointer
	onLockedThread(func() {
		dev, err := cuda.Probe()
		if err != nil {
			t.Fatal(err)
		}
		for r := range bufs {
			if bufs[r], err = dev.HostAlloc(size); err != nil {
				t.Fatal(err)
			}
		}
	})
	src := unsafe.Slice((*byte)(bufs[0]), size)
	fill(src, 3)
	var dev *string
	if tr == transportIB {
		name := "double_0"
		dev = &name
	}
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		return c.Connect(1-r, 0, bufs[r], size, tr, dev, true)
	})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = pinnedHostRound(r, comms[r], bufs[1], src)
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	devThreadsDone(t, comms)
}

// pinnedHostRound is rank r's side of TestPinnedHostMemoryHostMode: rank 0 puts src with a
// signal and waits for rank 1's, which checks that dst holds src.
func pinnedHostRound(r int, c *Comm, dst unsafe.Pointer, src []byte) error {
	size := uint64(len(src))
	if m := c.Mode(); m != "host mode" {
		return fmt.Errorf("rank %d is in %s over a pinned host buffer, want host mode", r, m)
	}
	d := c.host.DevConns.At(0)
	if r == 0 {
		if rc := engine.ConnSignalOp(d, opData|opFlag, 0, 0, size); rc != status.Success {
			return fmt.Errorf("putWithSignal from a host thread: %v", rc)
		}
		return waitNext(d)
	}
	if err := waitNext(d); err != nil {
		return err
	}
	if !bytes.Equal(unsafe.Slice((*byte)(dst), size), src) {
		return errors.New("the put's data did not arrive in the pinned buffer")
	}
	return op(d, opFlag, 0, 0, 1)
}
