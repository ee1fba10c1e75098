//go:build mscclpp_testhooks

package impl

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestCUDAModeSameProcess: two P2P ranks of one process (two communicators, one process, as a
// single-process multi-GPU program runs them). The driver refuses to IPC-import a handle the
// process exported, so each uses the other's buffer at its own address: the data of a put
// arrives, no cuIpcOpenMemHandle is ever called, and where the ranks' GPUs differ each enables
// peer access to the other's; teardown closes no IPC mapping. (Two ranks of one process on one
// GPU are refused: TestSameGPUTwoRanksRefused.)
func TestCUDAModeSameProcess(t *testing.T) {
	if mode := os.Getenv(fakeChildEnv); strings.HasPrefix(mode, "sameproc-") {
		sameProcessChild(t, strings.TrimPrefix(mode, "sameproc-"))
		return
	}
	t.Parallel()
	for _, c := range []struct{ name, dev1 string }{{"two-gpus", "1"}} {
		t.Run(c.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "calls.log")
			out := runFakeCUDAChild(t, "TestCUDAModeSameProcess", "sameproc-"+c.dev1, "FAKECUDA_LOG="+logPath,
				"MSCCLPP_DEBUG=INFO", "MSCCLPP_DEBUG_SUBSYS=ALL")
			b, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			log := string(b)
			if strings.Contains(log, "cuIpcOpenMemHandle") || strings.Contains(log, "cuIpcCloseMemHandle") {
				t.Errorf("CUDA IPC used between ranks of one process:\n%s", log)
			}
			if !strings.Contains(string(out), "at its own address (same process)") {
				t.Errorf("no INFO line saying the peer's buffer is used at its own address")
			}
			for _, want := range []string{"cuCtxEnablePeerAccess from=0 to=1", "cuCtxEnablePeerAccess from=1 to=0"} {
				if got := strings.Contains(log, want); got != (c.dev1 == "1") {
					t.Errorf("%q in the call log: %v, want %v", want, got, c.dev1 == "1")
				}
			}
			if t.Failed() {
				t.Logf("child:\n%s", out)
			}
		})
	}
}

// sameProcessChild puts rank 0's buffer on device 0 and rank 1's on device dev1, sets up P2P,
// has rank 0's GPU put the whole buffer with a signal, and checks it arrived.
func sameProcessChild(t *testing.T, dev1 string) {
	const size = 1 << 16
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	var bufs [2]uint64
	fakeDeviceBuffers(t, bufs[:1], src)
	onLockedThread(func() {
		cuda.TestDriverCall("fakeSetCurrent", dev1)
		defer cuda.TestDriverCall("fakeSetCurrent", "n")
		dev, err := cuda.Probe()
		if err == nil {
			bufs[1], err = dev.MemAlloc(size)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		return c.Connect(1-r, 0, engine.DevPtr(bufs[r]), size, TransportP2P, nil, true)
	})
	gpuPutWithSignal(comms[0], size)
	deadline := time.Now().Add(10 * time.Second)
	for comms[0].ProxyServed() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the P2P proxy never served the trigger")
		}
		time.Sleep(time.Millisecond)
	}
	proxyStopAll(t, comms)
	if got, err := cuda.TestDriverRead(bufs[1], size); err != nil || !bytes.Equal(got, src) {
		t.Errorf("rank 1's buffer after the put: %v, equal %v", err, bytes.Equal(got, src))
	}
	if err := comms[0].AsyncErr(); err != nil {
		t.Errorf("rank 0: %v", err)
	}
	var wg sync.WaitGroup
	for r := range comms {
		wg.Go(func() {
			if err := comms[r].Destroy(); err != nil {
				t.Errorf("rank %d: Destroy: %v", r, err)
			}
		})
	}
	wg.Wait()
}

// TestSameGPUTwoRanksRefused: two ranks of one communicator in one process on one GPU can
// deadlock (they share its primary context), so the second to connect over a buffer of that GPU
// gets mscclppInvalidUsage naming both ranks and the GPU, as NCCL refuses a duplicate GPU; it
// connects over a buffer of its own GPU afterwards, and the two set up and tear down.
func TestSameGPUTwoRanksRefused(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "samegpu" {
		sameGPUChild(t)
		return
	}
	t.Parallel()
	runFakeCUDAChildPassing(t, "TestSameGPUTwoRanksRefused", "samegpu")
}

func sameGPUChild(t *testing.T) {
	const size = 1 << 16
	var bufs [3]uint64 // rank 0's and rank 1's on GPU 0, rank 1's own on GPU 1
	fakeBuffersOn(t, "0", bufs[:2], size)
	fakeBuffersOn(t, "1", bufs[2:], size)
	first := make(chan struct{})
	var refused error
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		if r == 0 {
			defer close(first)
			return c.Connect(1, 0, engine.DevPtr(bufs[0]), size, TransportP2P, nil, true)
		}
		<-first
		refused = c.Connect(0, 0, engine.DevPtr(bufs[1]), size, TransportP2P, nil, true)
		return c.Connect(0, 0, engine.DevPtr(bufs[2]), size, TransportP2P, nil, true)
	})
	want := "connect to rank 0 tag 0: " + fmt.Sprintf(SharedGPUMsg, 0, 1, 0, "0000:3B:00.0")
	if status.CodeOf(refused) != status.InvalidUsage || refused.Error() != want {
		t.Errorf("rank 1 connecting over GPU 0, which rank 0 of this process uses: %v (code %v); want InvalidUsage %q", refused, status.CodeOf(refused), want)
	}
	if refused != nil && !strings.Contains(refused.Error(), "ranks 0 and 1 of this process both use GPU 0 (0000:3B:00.0): two ranks of one process on one GPU can deadlock") {
		t.Errorf("the refusal does not name the ranks and the GPU: %v", refused)
	}
	devThreadsDone(t, comms)
}
