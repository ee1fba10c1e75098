//go:build mscclpp_testhooks

package impl

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
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
	epoch := uint64(uintptr(comms[1].host.DevConns.LocalEpoch(0))) + 8 // rank 1's device epoch: proxy
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := cuda.TestDriverRead(epoch, 8)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 1's device epoch never reached 1 (% x); async errors: %v / %v", b, comms[0].AsyncErr(), comms[1].AsyncErr())
		}
		time.Sleep(time.Millisecond)
	}
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
