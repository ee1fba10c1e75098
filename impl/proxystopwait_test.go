//go:build mscclpp_testhooks

package impl

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/cuda"
)

// TestDeviceThreadsProxyStopDuringWait: mscclppProxyStop while a kernel waits for a signal (P2P
// in CUDA mode, the device methods on CPU threads) reaches the kernel: nothing serves its FIFO
// any more, so its wait returns with failed() within 1 s of the stop. mscclppProxyLaunch again
// serves the FIFO: a kernel's flush is served, failed() false. Stopped again, a kernel's wait,
// a FIFO's worth of puts and a flush each return at once with failed().
func TestDeviceThreadsProxyStopDuringWait(t *testing.T) {
	const n = 1 << 16
	if os.Getenv(fakeChildEnv) != "stop-wait" {
		t.Logf("child:\n%s", runFakeChildWith(t, buildDevThreadsDriver(t), t.Name(), "stop-wait"))
		return
	}
	comms := devThreadsRanks(t, TransportP2P, n)
	defer destroyAll(comms)
	spec := fmt.Sprintf("conn=%#x size=%d", uintptr(comms[0].host.DevConns.At(0)), n)
	var wg sync.WaitGroup
	var rc int
	var returned time.Time
	wg.Add(1)
	go func() {
		defer wg.Done()
		rc = cuda.TestDriverCall("devWaitFails", spec)
		returned = time.Now()
	}()
	awaitDeviceWait(t, comms[0], 1)
	stop := time.Now()
	proxyStopAll(t, comms)
	wg.Wait()
	took := returned.Sub(stop)
	t.Logf("the waiting kernel returned %v after mscclppProxyStop began", took.Round(time.Millisecond))
	if rc != 0 {
		t.Errorf("the waiting kernel did not see the stop (rc %d; see the devthreads lines above)", rc)
	}
	if took > time.Second {
		t.Errorf("the waiting kernel returned %v after the stop, want <= 1 s", took)
	}
	// launched again: the stopped tail is replaced before ProxyLaunch returns
	for r := range comms {
		if err := comms[r].ProxyLaunch(); err != nil {
			t.Fatalf("rank %d: ProxyLaunch again: %v", r, err)
		}
	}
	if rc := cuda.TestDriverCall("devFlushOK", spec); rc != 0 {
		t.Errorf("a flush after the proxies were launched again: rc %d (see the devthreads lines above)", rc)
	}
	proxyStopAll(t, comms)
	start := time.Now()
	if rc := cuda.TestDriverCall("devFault", faultSpec(comms[0], n, 0)); rc != 0 {
		t.Errorf("a kernel after the stop: rc %d (see the devthreads lines above)", rc)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a kernel's wait, puts and flush after the stop took %v, want <= 1 s", took)
	}
	for r := range comms {
		if err := comms[r].AsyncErr(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// awaitDeviceWait returns once c's connection 0 has counted want waits in its wait counter
// (device memory): its kernel is in its want-th wait.
func awaitDeviceWait(t *testing.T, c *Comm, want uint64) {
	t.Helper()
	wait := uint64(uintptr(c.host.DevConns.WaitEpoch(0)))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := cuda.TestDriverRead(wait, 8)
		if err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint64(b) >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank %d's kernel never reached wait %d", c.Rank(), want)
		}
	}
}

// TestDeviceThreadsPeerDestroyedP2P: a same-node P2P peer that destroys its communicator while
// a kernel waits for its signal reaches the kernel: its wait returns with failed() within the
// timeout + 1 s, and the communicator reports mscclppRemoteError saying the peer destroyed it.
func TestDeviceThreadsPeerDestroyedP2P(t *testing.T) {
	const n = 1 << 16
	if os.Getenv(fakeChildEnv) != "peer-destroyed" {
		t.Logf("child:\n%s", runFakeChildWith(t, buildDevThreadsDriver(t), t.Name(), "peer-destroyed"))
		return
	}
	if err := SetBootstrapTimeout(faultTimeout); err != nil {
		t.Fatal(err)
	}
	comms := devThreadsRanks(t, TransportP2P, n)
	spec := fmt.Sprintf("conn=%#x size=%d", uintptr(comms[0].host.DevConns.At(0)), n)
	done := make(chan int)
	go func() { done <- cuda.TestDriverCall("devWaitFails", spec) }()
	awaitDeviceWait(t, comms[0], 1)
	start := time.Now()
	if err := comms[1].Destroy(); err != nil {
		t.Errorf("rank 1: Destroy: %v", err)
	}
	rc := <-done
	took := time.Since(start)
	t.Logf("rank 1's destroy reached rank 0's waiting kernel after %v", took.Round(time.Millisecond))
	if rc != 0 {
		t.Errorf("the waiting kernel did not see its peer's destroy (rc %d; see the devthreads lines above)", rc)
	}
	if took > faultBound {
		t.Errorf("the waiting kernel returned %v after its peer's destroy, want <= %v", took, faultBound)
	}
	checkFaultErr(t, 0, comms[0])
	comms[0].Destroy()
}
