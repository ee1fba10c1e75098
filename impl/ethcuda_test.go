//go:build mscclpp_testhooks

package impl

import (
	"bytes"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestEthernetCUDAModeFakeDriver runs two ranks whose Ethernet connections have device buffers
// against the stand-in driver (in a child process): a kernel's put+signal trigger makes the
// proxy copy the device buffer to pinned memory and send it, the peer's receive thread copies
// it into its device buffer and the count into its device epoch.
func TestEthernetCUDAModeFakeDriver(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "eth" {
		fakeEthernetChild(t)
		return
	}
	t.Parallel()
	out := runFakeCUDAChild(t, "TestEthernetCUDAModeFakeDriver", "eth")
	t.Logf("child:\n%s", out)
}

func fakeEthernetChild(t *testing.T) {
	const size = 9<<20 + 123 // more than two staging buffers, not a multiple of them
	var bufs [2]uint64
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	fakeDeviceBuffers(t, bufs[:], src)
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		if err := c.Connect(1-r, 0, engine.DevPtr(bufs[r]), size, TransportEthernet, nil, true); err != nil {
			return err
		}
		if m := c.Mode(); m != "CUDA mode" {
			t.Errorf("rank %d: %v after an Ethernet connection with a device buffer", r, m)
		}
		return nil
	})
	// rank 0's GPU pushes put+signal of the whole buffer on connection 0
	gpuPutWithSignal(comms[0], size)
	awaitDeviceEpoch(t, comms, comms[1].host.DevConns.LocalEpoch(0), "rank 1's device epoch")
	got, err := cuda.TestDriverRead(bufs[1], size)
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("rank 1's device buffer after the signal: %v, equal %v", err, bytes.Equal(got, src))
	}
	proxyStopAll(t, comms)
	for r := 0; r < 2; r++ {
		if err := comms[r].AsyncErr(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
		if err := comms[r].Destroy(); err != nil {
			t.Errorf("rank %d: Destroy: %v", r, err)
		}
	}
}

// TestEthernetCUDAModePerGPU: one rank's two Ethernet connections over buffers of two GPUs are
// served by a CUDA-mode proxy on each GPU: each connection's signal epoch, wait counter, FIFO
// head and tail lie in its own GPU's memory (the driver says which GPU an allocation belongs
// to), a kernel's put+signal on each arrives at the peer (host mode: host buffers), and the
// peer's put+signal on each lands in that GPU's buffer and epoch.
func TestEthernetCUDAModePerGPU(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "eth-per-gpu" {
		ethPerGPUChild(t)
		return
	}
	t.Parallel()
	runFakeCUDAChildPassing(t, "TestEthernetCUDAModePerGPU", "eth-per-gpu")
}

func ethPerGPUChild(t *testing.T) {
	const size = 1<<20 + 123
	pattern := func(k, phase int) []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(i*(7+2*k) + 3*phase + 1)
		}
		return b
	}
	var devBufs [2]uint64 // rank 0's: connection k's buffer on GPU k
	fakeBuffersOn(t, "0", devBufs[:1], size)
	fakeBuffersOn(t, "1", devBufs[1:], size)
	hostBufs := [2][]byte{make([]byte, size), make([]byte, size)} // rank 1's
	for k := range devBufs {
		if err := cuda.TestDriverWrite(devBufs[k], pattern(k, 0)); err != nil {
			t.Fatal(err)
		}
	}
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		for k := 0; k < 2; k++ {
			buf := engine.DevPtr(devBufs[k])
			if r == 1 {
				buf = unsafe.Pointer(&hostBufs[k][0])
			}
			if err := c.Connect(1-r, k, buf, size, TransportEthernet, nil, true); err != nil {
				return err
			}
		}
		return nil
	})
	d0 := comms[0].host.DevConns
	for k := 0; k < 2; k++ {
		conn := d0.At(k)
		for what, p := range map[string]uint64{
			"signal epoch": uint64(uintptr(d0.LocalEpoch(k))),
			"wait counter": uint64(uintptr(d0.WaitEpoch(k))),
			"FIFO tail":    *(*uint64)(unsafe.Add(conn, 8)),  // fifo.triggerFifoTail
			"FIFO head":    *(*uint64)(unsafe.Add(conn, 16)), // fifo.triggerFifoHead
		} {
			if dev, err := cuda.ProbePointer(p); err != nil || dev.Ordinal != k {
				t.Errorf("connection %d (buffer on GPU %d): its %s at %#x is on GPU %d (%v), want GPU %d", k, k, what, p, dev.Ordinal, err, k)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// rank 0's kernels: put+signal of the whole buffer on each connection, into its own FIFO
	for k := 0; k < 2; k++ {
		slot := (*[2]uint64)(*(*unsafe.Pointer)(d0.At(k))) // fifo.triggerFifo
		atomic.StoreUint64(&slot[1], 3<<42|uint64(k)<<32)
		atomic.StoreUint64(&slot[0], size)
	}
	for k := 0; k < 2; k++ {
		if rc := engine.ConnWait(comms[1].host.DevConns.At(k), 20000); rc != status.Success {
			t.Fatalf("rank 1's wait on connection %d: %v; async errors: %v / %v", k, rc, comms[0].AsyncErr(), comms[1].AsyncErr())
		}
		if !bytes.Equal(hostBufs[k], pattern(k, 0)) {
			t.Errorf("rank 1's buffer of connection %d after the signal differs from rank 0's GPU %d buffer", k, k)
		}
	}
	// rank 1's host threads: put+signal back into each GPU's buffer and epoch
	for k := 0; k < 2; k++ {
		copy(hostBufs[k], pattern(k, 1))
		if rc := engine.ConnSignalOp(comms[1].host.DevConns.At(k), 3, 0, 0, size); rc != status.Success {
			t.Fatalf("rank 1's put+signal on connection %d: %v", k, rc)
		}
	}
	for k := 0; k < 2; k++ {
		awaitDeviceEpoch(t, comms, d0.LocalEpoch(k), fmt.Sprintf("rank 0's epoch of connection %d (on GPU %d)", k, k))
		if got, err := cuda.TestDriverRead(devBufs[k], size); err != nil || !bytes.Equal(got, pattern(k, 1)) {
			t.Errorf("rank 0's GPU %d buffer after rank 1's signal: %v, equal %v", k, err, bytes.Equal(got, pattern(k, 1)))
		}
	}
	devThreadsDone(t, comms)
}

// awaitDeviceEpoch waits (at most 20 s) until the proxy's count of the device epoch at epoch
// (what) reads 1, failing t otherwise.
func awaitDeviceEpoch(t *testing.T, comms []*Comm, epoch unsafe.Pointer, what string) {
	t.Helper()
	at := uint64(uintptr(epoch)) + 8 // the proxy's count
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := cuda.TestDriverRead(at, 8)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached 1 (% x); async errors: %v / %v", what, b, comms[0].AsyncErr(), comms[1].AsyncErr())
		}
		time.Sleep(time.Millisecond)
	}
}
