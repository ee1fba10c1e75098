//go:build mscclpp_testhooks

package impl

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/p2p"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

const fakeChildEnv = "MSCCLPP_TEST_FAKE_CUDA_CHILD"

// TestCUDAModeFakeDriver runs two ranks in CUDA mode against the stand-in driver of
// cuda/testdata (in a child process: the driver library is chosen once per process) and checks
// from the driver's call log that teardown waits for the proxy's streams and frees them before
// closing the peers' IPC mappings. The two ranks share a process, so each describes itself as
// another process would (p2p.TestAsOtherProcess) and the driver maps such handles
// (fakeIpcForeign), as it does between processes: the IPC path.
func TestCUDAModeFakeDriver(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "1" {
		fakeCUDAChild(t)
		return
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "calls.log")
	out := runFakeCUDAChild(t, "TestCUDAModeFakeDriver", "1", "FAKECUDA_LOG="+logPath, "FAKE_CUDA_MARK="+logPath)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Split(strings.TrimSpace(string(b)), "\n")
	mark := -1
	for i, l := range all {
		if l == "MARK destroy" {
			mark = i
		}
	}
	if mark < 0 {
		t.Fatalf("no destroy mark in the call log:\n%s\nchild:\n%s", b, out)
	}
	// each communicator (destroyed one after the other): its two streams synchronized and
	// destroyed with nothing pending, and only then its IPC mappings of the peer's epochs and
	// buffer closed, with no copy pending anywhere
	destroyed, closes := 0, 0
	last := ""
	for _, l := range all[mark+1:] {
		switch {
		case strings.HasPrefix(l, "cuStreamDestroy"):
			if !strings.HasSuffix(l, " pending=0") {
				t.Errorf("a stream destroyed with work pending (not synchronized first): %s", l)
			}
			destroyed++
		case strings.HasPrefix(l, "cuIpcCloseMemHandle"):
			closes++
			if !strings.HasPrefix(last, "cuStreamDestroy") && !strings.HasPrefix(last, "cuIpcCloseMemHandle") {
				t.Errorf("an IPC mapping closed before the proxy's streams were freed (after %q)", last)
			}
			if !strings.HasSuffix(l, " pending=0") {
				t.Errorf("IPC mapping closed with copies pending: %s", l)
			}
		}
		if !strings.HasPrefix(l, "cuMemFree") {
			last = l
		}
	}
	checkFreedAfterClosed(t, all)
	for _, d := range []string{"0", "1"} {
		retains, releases := strings.Count(string(b), "cuDevicePrimaryCtxRetain dev="+d), strings.Count(string(b), "cuDevicePrimaryCtxRelease dev="+d)
		if retains == 0 || retains != releases {
			t.Errorf("device %s's primary context retained %d times and released %d times, want the same, at least once", d, retains, releases)
		}
	}
	if closes != 4 || destroyed != 4 {
		t.Errorf("teardown closed %d IPC mappings and destroyed %d streams, want 4 and 4", closes, destroyed)
	}
	if t.Failed() {
		t.Logf("calls after the destroy mark:\n%s", strings.Join(all[mark+1:], "\n"))
	}
	t.Logf("child:\n%s", out)
}

// runFakeCUDAChild builds the stand-in driver of cuda/testdata (once per test process) and runs test in a child process
// (the driver library is chosen once per process) with fakeChildEnv=mode and env; it returns
// the child's output and fails t when the child fails.
func runFakeCUDAChild(t *testing.T, test, mode string, env ...string) []byte {
	t.Helper()
	lib := sharedArtifact(t, "fakecuda", func(dir string) (string, error) {
		lib := filepath.Join(dir, "libfakecuda.so")
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		build := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", lib, filepath.Join("..", "cuda", "testdata", "fakecuda.c"), "-lpthread")
		if b, err := build.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building the fake driver: %v\n%s", err, b)
		}
		return lib, nil
	})
	return runFakeChildWith(t, lib, test, mode, env...)
}

// runFakeCUDAChildPassing is runFakeCUDAChild for a test whose child must pass: a child that
// skipped fails t.
func runFakeCUDAChildPassing(t *testing.T, test, mode string, env ...string) {
	t.Helper()
	out := runFakeCUDAChild(t, test, mode, env...)
	if !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("child did not pass:\n%s", out)
	}
}

// runFakeChildWith runs test in a child process with lib as the driver library (see runFakeCUDAChild).
func runFakeChildWith(t *testing.T, lib, test, mode string, env ...string) []byte {
	t.Helper()
	out, err := fakeChild(lib, test, mode, env...)
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return out
}

// fakeChild runs test in a child process with lib as the driver library and returns its output
// and how it ended.
func fakeChild(lib, test, mode string, env ...string) ([]byte, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), fakeChildEnv+"="+mode, "MSCCLPP_CUDA_LIBRARY="+lib, "MSCCLPP_DEVICE="), env...)
	return cmd.CombinedOutput()
}

// fakeDeviceBuffers allocates len(bufs) device buffers of len(src) bytes, the first half on
// the fake driver's device 0 and the second half on its device 1 (rank r's buffers are the r-th
// half of bufs: two ranks of one process never share a GPU), no thread keeping a current
// context, and writes src into the first.
func fakeDeviceBuffers(t *testing.T, bufs []uint64, src []byte) {
	t.Helper()
	half := (len(bufs) + 1) / 2
	fakeBuffersOn(t, "0", bufs[:half], len(src))
	fakeBuffersOn(t, "1", bufs[half:], len(src))
	if err := cuda.TestDriverWrite(bufs[0], src); err != nil {
		t.Fatal(err)
	}
}

// fakeBuffersOn allocates len(bufs) device buffers of n bytes on the fake driver's device dev
// ("0", "1"), no thread keeping a current context (a CUDA 11 runtime before its first call on
// the thread).
func fakeBuffersOn(t *testing.T, dev string, bufs []uint64, n int) {
	t.Helper()
	if len(bufs) == 0 {
		return
	}
	if err := cuda.Load(); err != nil {
		t.Fatal(err)
	}
	cuda.TestDriverCall("fakeNoCtx", "1")
	onLockedThread(func() {
		cuda.TestDriverCall("fakeSetCurrent", dev)
		defer cuda.TestDriverCall("fakeSetCurrent", "n")
		d, err := cuda.Probe()
		if err != nil {
			t.Fatal(err)
		}
		for i := range bufs {
			if bufs[i], err = d.MemAlloc(uint64(n)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// twoRanksLaunched forms a 2-rank communicator in this process, one locked thread per rank,
// runs connect on each (its connections), then ConnectionSetup and ProxyLaunch; it fails t
// on any error.
func twoRanksLaunched(t *testing.T, connect func(r int, c *Comm) error) []*Comm {
	t.Helper()
	return twoRanksSetUp(t, connect, true)
}

// twoRanksSetUp is twoRanksLaunched, with ProxyLaunch only if launch.
func twoRanksSetUp(t *testing.T, connect func(r int, c *Comm) error, launch bool) []*Comm {
	t.Helper()
	addr := freeAddr(t)
	comms := make([]*Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c, err := InitRank(2, addr, r)
			if err != nil {
				errs[r] = err
				return
			}
			comms[r] = c
			if errs[r] = connect(r, c); errs[r] != nil {
				return
			}
			if errs[r] = c.ConnectionSetup(); errs[r] != nil || !launch {
				return
			}
			errs[r] = c.ProxyLaunch()
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms
}

// gpuPutWithSignal writes, as a GPU would, a put+signal trigger of size bytes from offset 0 to
// offset 0 into the first slot of c's connection 0 FIFO (pinned host memory).
func gpuPutWithSignal(c *Comm, size uint64) {
	fifo := *(*unsafe.Pointer)(c.host.DevConns.At(0)) // fifo.triggerFifo
	slot := (*[2]uint64)(fifo)
	atomic.StoreUint64(&slot[1], 3<<42)
	atomic.StoreUint64(&slot[0], size)
}

// proxyStopAll runs ProxyStop on every rank at once and fails t on an error.
func proxyStopAll(t *testing.T, comms []*Comm) {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = comms[r].ProxyStop()
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: ProxyStop: %v", r, err)
		}
	}
}

// onLockedThread runs f on one OS thread.
func onLockedThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		f()
	}()
	<-done
}

func fakeCUDAChild(t *testing.T) {
	const size = 1 << 16
	var bufs [2]uint64
	p2p.TestAsOtherProcess(true)
	defer p2p.TestAsOtherProcess(false)
	if err := cuda.Load(); err != nil {
		t.Fatal(err)
	}
	cuda.TestDriverCall("fakeIpcForeign", "1")
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*13 + 1)
	}
	fakeDeviceBuffers(t, bufs[:], src)

	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		if m := c.Mode(); m != "host mode" {
			t.Errorf("rank %d: %v right after init, want the mode decided at the first P2P connection", r, m)
		}
		// no buffer and no current context: no GPU to be found
		err := c.Connect(1-r, 1, nil, 0, TransportP2P, nil, false)
		if status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), "P2P needs CUDA mode") {
			t.Errorf("rank %d: P2P without a buffer or a context: %v", r, err)
		}
		if err := c.Connect(1-r, 0, engine.DevPtr(bufs[r]), size, TransportP2P, nil, true); err != nil {
			return err
		}
		if m := c.Mode(); m != "CUDA mode" {
			t.Errorf("rank %d: %v after a P2P connection", r, m)
		}
		// CUDA mode keeps refusing host memory for P2P (host mode carries it, not CUDA IPC)
		host := make([]byte, 64)
		err = c.Connect(1-r, 2, unsafe.Pointer(&host[0]), 64, TransportP2P, nil, true)
		if status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), "needs device memory") {
			t.Errorf("rank %d: P2P over host memory in CUDA mode: %v", r, err)
		}
		return nil
	})
	// host threads must not touch a CUDA-mode connection's FIFO or counters (device memory)
	if seq := engine.FifoPush(comms[0].host.DevConns.At(0), 1, 0, 0, 8); seq != engine.PushFailed {
		t.Errorf("a host push on a CUDA-mode connection returned %d", seq)
	}
	if rc := engine.FifoWaitServed(comms[0].host.DevConns.At(0), 0); rc != status.InvalidUsage {
		t.Errorf("a host fifo sync on a CUDA-mode connection: %v", rc)
	}
	if rc := engine.ConnWait(comms[0].host.DevConns.At(0), 0); rc != status.InvalidUsage {
		t.Errorf("a host wait on a CUDA-mode connection: %v", rc)
	}
	// the copy engine is busy: every copy waits on its stream
	cuda.TestDriverCall("fakeStall", "all")
	defer cuda.TestDriverCall("fakeStall", "")
	// rank 0's GPU pushes put+signal of the whole buffer on connection 0
	gpuPutWithSignal(comms[0], size)
	deadline := time.Now().Add(10 * time.Second)
	for comms[0].ProxyServed() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the P2P proxy never served the trigger")
		}
		time.Sleep(time.Millisecond)
	}
	if q := cuda.TestDriverCall("fakeQueued", ""); q == 0 {
		t.Fatal("nothing queued on the stalled streams")
	}
	// ProxyStop returns only with every copy done
	proxyStopAll(t, comms)
	if q := cuda.TestDriverCall("fakeQueued", ""); q != 0 {
		t.Errorf("ProxyStop returned with %d copies still queued", q)
	}
	got, err := cuda.TestDriverRead(bufs[1], size)
	if err != nil || !bytes.Equal(got, src) {
		t.Errorf("rank 1's buffer after ProxyStop: %v, equal %v", err, bytes.Equal(got, src))
	}
	epoch, err := cuda.TestDriverRead(uint64(uintptr(comms[1].host.DevConns.LocalEpoch(0)))+8, 8)
	if err != nil || epoch[0] != 1 {
		t.Errorf("rank 1's proxy epoch after the signal: % x, %v", epoch, err)
	}
	if err := comms[0].AsyncErr(); err != nil {
		t.Errorf("rank 0: %v", err)
	}
	f, err := os.OpenFile(os.Getenv("FAKE_CUDA_MARK"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("MARK destroy\n")
	f.Close()
	for _, d := range []string{"0", "1"} {
		if n := cuda.TestDriverCall("fakePrimaryRefs", d); n != 1 {
			t.Errorf("device %s's primary context has %d references while one communicator uses it, want 1", d, n)
		}
	}
	// rank 1 starts its destroy once rank 0's has returned or closed both its IPC mappings
	// (then waits for rank 1, if it waits at all): the two never interleave in the log
	mark := os.Getenv("FAKE_CUDA_MARK")
	destroyStaggered(t, comms, func() bool {
		b, err := os.ReadFile(mark)
		if err != nil {
			return false
		}
		_, after, _ := strings.Cut(string(b), "MARK destroy\n")
		return strings.Count(after, "cuIpcCloseMemHandle") >= 2
	})
	// rank 0's destroy did not wait for rank 1: it freed its epochs (and released the context)
	// once rank 1 said it closed its mappings, after both destroys returned
	for _, d := range []string{"0", "1"} {
		if n := awaitDriverCount("fakePrimaryRefs", d, 0); n != 0 {
			t.Errorf("device %s's primary context keeps %d references after both destroys, want 0", d, n)
		}
	}
}

// awaitDriverCount polls the fake driver's counter name until it reads want (for at most 10 s,
// the bound of a destroy's deferred free here) and returns what it read last.
func awaitDriverCount(name, arg string, want int) int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := cuda.TestDriverCall(name, arg)
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// destroyStaggered destroys rank 0, and rank 1 only once rank 0's destroy returned or reached()
// says it got far enough (polled, for at most 20 s); both must succeed.
func destroyStaggered(t *testing.T, comms []*Comm, reached func() bool) {
	t.Helper()
	errs := make(chan error, 1)
	go func() { errs <- comms[0].Destroy() }()
	var err0 error
	returned := false
	deadline := time.Now().Add(20 * time.Second)
	for !returned && !reached() && time.Now().Before(deadline) {
		select {
		case err0 = <-errs:
			returned = true
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := comms[1].Destroy(); err != nil {
		t.Errorf("rank 1: Destroy: %v", err)
	}
	if !returned {
		err0 = <-errs
	}
	if err0 != nil {
		t.Errorf("rank 0: Destroy: %v", err0)
	}
}

// checkFreedAfterClosed fails t when the call log frees device memory (cuMemFree ptr=X) that an
// importer mapped (cuIpcOpenMemHandle ptr=X) before the importer closed it (cuIpcCloseMemHandle).
func checkFreedAfterClosed(t *testing.T, lines []string) {
	t.Helper()
	open := map[string]int{}
	checked := 0
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasPrefix(f[1], "ptr=") {
			continue
		}
		switch f[0] {
		case "cuIpcOpenMemHandle":
			open[f[1]]++
		case "cuIpcCloseMemHandle":
			open[f[1]]--
			checked++
		case "cuMemFree":
			if open[f[1]] > 0 {
				t.Errorf("device memory at %s freed while a peer still maps it through CUDA IPC", f[1][4:])
			}
		}
	}
	if checked == 0 {
		t.Error("no IPC mapping closed in the call log")
	}
}

// TestCUDATeardownPeerAbsent: a P2P rank in CUDA mode whose peer has not destroyed yet does not
// wait for it: its destroy returns at once and keeps the memory the peer maps until the peer
// says it closed its mappings; the peer's later destroy finds the first rank's word, frees at
// once, and then the first rank's memory is freed too.
func TestCUDATeardownPeerAbsent(t *testing.T) {
	if os.Getenv(fakeChildEnv) != "teardown-absent" {
		out := runFakeCUDAChild(t, "TestCUDATeardownPeerAbsent", "teardown-absent")
		t.Logf("child:\n%s", out)
		return
	}
	const timeout = 2 * time.Second
	if err := SetBootstrapTimeout(int(timeout / time.Second)); err != nil {
		t.Fatal(err)
	}
	var bufs [2]uint64
	fakeDeviceBuffers(t, bufs[:], make([]byte, 4096))
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		return c.Connect(1-r, 0, engine.DevPtr(bufs[r]), 4096, TransportP2P, nil, true)
	})
	proxyStopAll(t, comms)
	for r := range comms {
		start := time.Now()
		if err := comms[r].Destroy(); err != nil {
			t.Errorf("rank %d: Destroy: %v", r, err)
		}
		// generous against load: a destroy that waited for the peer took the timeout
		if took := time.Since(start); took > timeout/2 {
			t.Errorf("rank %d's Destroy took %v, want well under the %v timeout (it waits for no peer)", r, took, timeout)
		}
		if r == 0 {
			// rank 1 still maps rank 0's epochs: rank 0 keeps them, and its hold on the context
			if n := cuda.TestDriverCall("fakePrimaryRefs", "0"); n != 1 {
				t.Errorf("device 0's primary context has %d references after rank 0's destroy, want 1 (rank 0 keeps the epochs rank 1 maps)", n)
			}
		}
	}
	if n := awaitDriverCount("fakeLiveAllocs", "", 2); n != 2 {
		t.Errorf("%d device allocations left after both destroys, want the 2 test buffers", n)
	}
}
