//go:build mscclpp_testhooks

package impl

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
)

// TestEthernetCUDAStaging: two ranks with two Ethernet connections each in CUDA mode (device
// buffers), every connection carrying puts of 5 MiB + 123 bytes (three chunks of the 2 MiB
// staging halves) in both directions at once, written and pushed by kernels on CPU threads and
// checked byte for byte by the receiving kernels. The driver's log shows that each of the four
// connection ends copies device memory to its staging buffer on a stream of its own, and that
// the receive sides copy on their own streams, not on the proxies' tail streams.
func TestEthernetCUDAStaging(t *testing.T) {
	const threads, chunk = 3, 5<<20 + 123
	const size = threads * chunk
	if os.Getenv(fakeChildEnv) == "eth-stage" {
		bufs := make([]uint64, 4) // rank r, connection k: bufs[2*r+k]
		fakeDeviceBuffers(t, bufs, make([]byte, 2*size))
		comms := twoRanksLaunched(t, func(r int, c *Comm) error {
			for k := 0; k < 2; k++ {
				if err := c.Connect(1-r, k, engine.DevPtr(bufs[2*r+k]), 2*size, TransportEthernet, nil, true); err != nil {
					return err
				}
			}
			return nil
		})
		var wg sync.WaitGroup
		rcs := make([]int, 8)
		for r := 0; r < 2; r++ {
			for k := 0; k < 2; k++ {
				spec := fmt.Sprintf("conn=%#x size=%d threads=%d", uintptr(comms[r].host.DevConns.At(k)), size, threads)
				for j, fn := range []string{"devSend", "devRecv"} {
					wg.Add(1)
					go func(i int, fn string) {
						defer wg.Done()
						rcs[i] = cuda.TestDriverCall(fn, spec)
					}(4*r+2*k+j, fn)
				}
			}
		}
		wg.Wait()
		for i, rc := range rcs {
			if rc != 0 {
				t.Errorf("rank %d connection %d %s: %d failures", i/4, i/2%2, []string{"devSend", "devRecv"}[i%2], -rc)
			}
		}
		devThreadsDone(t, comms)
		return
	}
	t.Parallel()
	log := filepath.Join(t.TempDir(), "fakecuda.log")
	out := runFakeChildWith(t, buildDevThreadsDriver(t), t.Name(), "eth-stage", "FAKECUDA_LOG="+log)
	t.Logf("child:\n%s", out)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	toHost, toDevice := map[string]int{}, map[string]int{}
	for _, m := range regexp.MustCompile(`cuMemcpyAsync stream=(\d+) bytes=(\d+)`).FindAllStringSubmatch(string(b), -1) {
		if m[2] != "8" {
			toHost[m[1]]++
		}
	}
	for _, m := range regexp.MustCompile(`cuMemcpyHtoDAsync stream=(\d+)`).FindAllStringSubmatch(string(b), -1) {
		toDevice[m[1]]++
	}
	if len(toHost) != 4 {
		t.Errorf("device-to-staging copies on %d streams (%v), want 4: one per connection end", len(toHost), toHost)
	}
	// two tail streams (one per rank's proxy) and one receive stream per connection end
	if len(toDevice) < 6 {
		t.Errorf("staging-to-device copies and tail publications on %d streams (%v), want 6: receive sides share streams", len(toDevice), toDevice)
	}
}
