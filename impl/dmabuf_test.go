//go:build mscclpp_testhooks

package impl

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestIBDmabufWholePages: cudaMalloc buffers of 4 KiB and 1 MiB (which the driver carves out of
// a 2 MiB chunk at offsets that are not page boundaries) and of 2 MiB + 256 bytes (whole chunks
// of their own, ending inside a page) are registered over IB through a dma-buf of the whole
// host pages around them, with no nvidia-peermem (the verbs double refuses device pointers):
// as connection buffers, as mscclppRegisterBuffer destinations and as the source of
// mscclppRegisteredBufferWrite, whose bytes arrive in the peer's buffer.
func TestIBDmabufWholePages(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "ib-dmabuf" {
		ibDmabufChild(t)
		return
	}
	t.Parallel()
	out := ibInfoChild(t, "TestIBDmabufWholePages", "ib-dmabuf")
	if !strings.Contains(string(out), "registered through a dma-buf") || strings.Contains(string(out), "nvidia-peermem) (") {
		t.Errorf("device memory not registered through a dma-buf")
	}
	if t.Failed() {
		t.Logf("child:\n%s", out)
	}
}

// ibInfoChild runs test in a child process (mode) against the stand-in driver and the verbs
// double, with INFO logging, and returns its output.
func ibInfoChild(t *testing.T, test, mode string) []byte {
	t.Helper()
	env := append(ibDoubleEnv(t), "MSCCLPP_DEBUG=INFO", "MSCCLPP_DEBUG_SUBSYS=ALL")
	return runFakeCUDAChild(t, test, mode, env...)
}

func ibDmabufChild(t *testing.T) {
	page := uint64(os.Getpagesize())
	for _, n := range []int{4 << 10, 1 << 20, 2<<20 + 256} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pattern := make([]byte, n)
			for i := range pattern {
				pattern[i] = byte(i*13 + n)
			}
			// rank 0's source and connection buffer (its registered destination too) on device 0,
			// rank 1's on device 1
			var bufs [3]uint64
			fakeBuffersOn(t, "0", bufs[:2], n)
			fakeBuffersOn(t, "1", bufs[2:], n)
			if err := cuda.TestDriverWrite(bufs[0], pattern); err != nil {
				t.Fatal(err)
			}
			for _, b := range bufs {
				if n < 2<<20 && b%page == 0 {
					t.Fatalf("the driver placed %d bytes at %#x, a page boundary: the case is not tested", n, b)
				}
			}
			dev := "double_0"
			comms := twoRanksLaunched(t, func(r int, c *Comm) error {
				return c.Connect(1-r, 0, engine.DevPtr(bufs[1+r]), uint64(n), transportIB, &dev, true)
			})
			peers := make([][]RegisteredPeer, 2)
			var wg sync.WaitGroup
			for r := range comms {
				wg.Go(func() {
					var err error
					if peers[r], err = comms[r].RegisterBuffer(engine.DevPtr(bufs[1+r]), uint64(n)); err != nil {
						t.Errorf("rank %d: RegisterBuffer: %v", r, err)
					}
				})
			}
			wg.Wait()
			if !t.Failed() {
				if err := comms[0].RegisteredBufferWrite(peers[0], engine.DevPtr(bufs[0]), uint64(n), 0, 0, 0); err != nil {
					t.Errorf("RegisteredBufferWrite: %v", err)
				} else if got, err := cuda.TestDriverRead(bufs[2], n); err != nil || !bytes.Equal(got, pattern) {
					t.Errorf("rank 1's buffer does not hold the %d bytes rank 0 wrote (%v)", n, err)
				}
			}
			devThreadsDone(t, comms)
		})
	}
}

// TestPoolBufferRefused: a cudaMallocAsync buffer (no CUDA IPC handle, no nvidia-peermem), or
// one mapped with the VMM API, is refused where it is handed over, mscclppConnect (IB and P2P) and mscclppRegisterBuffer, with
// InvalidUsage naming cuda.UnshareableMemory and an INFO line; the communicator goes on.
func TestPoolBufferRefused(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "pool-refused" {
		poolRefusedChild(t)
		return
	}
	t.Parallel()
	out := ibInfoChild(t, "TestPoolBufferRefused", "pool-refused")
	for _, call := range []string{"mscclppConnect", "mscclppRegisterBuffer"} {
		if !strings.Contains(string(out), call+": buffer ") || !strings.Contains(string(out), "refused: buffer") {
			t.Errorf("no INFO line saying %s refused the buffer", call)
		}
	}
	if t.Failed() {
		t.Logf("child:\n%s", out)
	}
}

func poolRefusedChild(t *testing.T) {
	const n = 1 << 20
	// rank r's buffers on device r: a cudaMalloc one, a cudaMallocAsync one, a VMM one
	var good, pool, vmm [2]uint64
	fakeDeviceBuffers(t, good[:], make([]byte, n))
	for r := range pool {
		dev, err := cuda.ProbePointer(good[r])
		if err != nil {
			t.Fatal(err)
		}
		if pool[r], err = cuda.TestMallocAsync(dev, n); err != nil {
			t.Fatal(err)
		}
		if vmm[r], err = cuda.TestVMMAlloc(dev, 2<<20); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), cuda.UnshareableMemory) {
			t.Errorf("%s: %v, want InvalidUsage naming %q", what, err, cuda.UnshareableMemory)
		}
	}
	dev := "double_0"
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		refused("mscclppConnect over IB (cudaMallocAsync)", c.Connect(1-r, 0, engine.DevPtr(pool[r]), n, transportIB, &dev, true))
		refused("mscclppConnect over P2P (cudaMallocAsync)", c.Connect(1-r, 1, engine.DevPtr(pool[r]), n, TransportP2P, nil, true))
		refused("mscclppConnect over P2P (VMM)", c.Connect(1-r, 1, engine.DevPtr(vmm[r]), n, TransportP2P, nil, true))
		return c.Connect(1-r, 2, engine.DevPtr(good[r]), n, transportIB, &dev, true)
	})
	for r := range comms {
		_, err := comms[r].RegisterBuffer(engine.DevPtr(pool[r]), n)
		refused(fmt.Sprintf("rank %d: mscclppRegisterBuffer (cudaMallocAsync)", r), err)
	}
	devThreadsDone(t, comms)
}
