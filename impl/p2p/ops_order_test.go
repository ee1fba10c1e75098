//go:build mscclpp_testhooks

package p2p

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Trigger words as a GPU thread writes them (mscclppfifo.h).
func word0(srcOff, size uint64) uint64 { return srcOff<<32 | size&0xffffffff }
func word1(typ, connID, dstOff uint64) uint64 {
	return typ<<42 | (connID&0x3ff)<<32 | dstOff&0xffffffff
}

// devPush writes trigger seq into the FIFO as a GPU thread does (word 1, then word 0).
func (f *p2pFixture) devPush(t *testing.T, seq, typ, dstOff, srcOff, size uint64) {
	t.Helper()
	waitFor(t, "a free FIFO slot", func() bool { return !f.h.slotBusy(seq) })
	f.h.slotWord(seq, 1, word1(typ, 0, dstOff))
	f.h.slotWord(seq, 0, word0(srcOff, size))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func (f *p2pFixture) devTail() uint64 {
	b := peek(cuda.ProxyTail(f.state), 8)
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// cudaMode gives the fixture's context a FIFO head in (fake) device memory, as CUDA mode does.
func (f *p2pFixture) cudaMode(t *testing.T) {
	t.Helper()
	head, err := f.dev.MemAlloc(8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.dev.MemFree(head) })
	f.h.setDevHead(head)
}

// logTo starts the fake driver's call log in a fresh file and returns a function reading it.
func logTo(t *testing.T) func() []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "calls.log")
	if fakeCall("fakeLogTo", path) != 0 {
		t.Fatal("fakeLogTo failed")
	}
	t.Cleanup(func() { fakeCall("fakeLogTo", "") })
	return func() []string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
}

func streamID(t *testing.T, state unsafe.Pointer, tail bool) int {
	t.Helper()
	id := fakeCall("fakeStreamId", strconv.FormatUint(uint64(p2pStream(state, tail)), 10))
	if id <= 0 {
		t.Fatalf("the fake does not know the state's stream (tail %v)", tail)
	}
	return id
}

func stall(t *testing.T, state unsafe.Pointer, tail bool) {
	t.Helper()
	fakeCall("fakeStall", strconv.FormatUint(uint64(p2pStream(state, tail)), 10))
	t.Cleanup(func() { fakeCall("fakeStall", "") })
}

// TestFakeDeviceMemoryIsNotHostMemory: the fake's device allocations fault on a host access, as
// on a GPU, so a host dereference anywhere in the library fails the tests.
func TestFakeDeviceMemoryIsNotHostMemory(t *testing.T) {
	dev, err := fakeDev(t, "0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := dev.MemAlloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.MemFree(p)
	buf := make([]byte, 8)
	_, err = unix.ProcessVMReadv(os.Getpid(), []unix.Iovec{{Base: &buf[0], Len: 8}},
		[]unix.RemoteIovec{{Base: uintptr(p), Len: 8}}, 0)
	if !errors.Is(err, unix.EFAULT) {
		t.Errorf("reading fake device memory from the host: %v, want EFAULT", err)
	}
	poke(p+8, []byte{1, 2, 3})
	if got := peek(p+8, 3); !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Errorf("through the driver: % x", got)
	}
}

// TestP2PTailNotBehindCopies: the FIFO tail is published on its own stream, so it advances while
// the data copies are still queued; a Sync waits for them before the tail covering it appears.
func TestP2PTailNotBehindCopies(t *testing.T) {
	f := newFixture(t, nil)
	f.cudaMode(t)
	calls := logTo(t)
	stall(t, f.state, false) // the copy engine is busy: data copies wait
	if err := f.h.start(); err != nil {
		t.Fatal(err)
	}
	defer f.h.stop()
	const n = 8
	for i := uint64(0); i < n; i++ {
		f.devPush(t, i, tData, i*100, i*100, 100)
	}
	waitFor(t, "the proxy to serve 8 puts", func() bool { return f.h.served() == n })
	waitFor(t, "the tail of 8 in device memory", func() bool { return f.devTail() == n })
	if q := fakeCall("fakeQueued", ""); q != n {
		t.Errorf("%d operations queued, want the %d copies", q, n)
	}
	if !bytes.Equal(peek(f.dst, n*100), make([]byte, n*100)) {
		t.Fatal("copies ran on a stalled stream")
	}
	// a flush: its tail appears only once every earlier copy is done
	f.devPush(t, n, tSync, 0, 0, 1)
	waitFor(t, "the tail covering the Sync", func() bool { return f.devTail() == n+1 })
	if !bytes.Equal(peek(f.dst, n*100), peek(f.src, n*100)) {
		t.Error("the tail covering a Sync was published before the copies before it were done")
	}
	data, tail := streamID(t, f.state, false), streamID(t, f.state, true)
	synced, tailAfter := -1, -1
	for i, l := range calls() {
		switch l {
		case "cuStreamSynchronize stream=" + strconv.Itoa(data):
			if synced < 0 {
				synced = i
			}
		case "cuMemcpyHtoDAsync stream=" + strconv.Itoa(tail):
			if synced >= 0 && tailAfter < 0 {
				tailAfter = i
			}
		case "cuMemcpyHtoDAsync stream=" + strconv.Itoa(data):
			t.Errorf("line %d: the tail (or a signal) went on the data stream: %s", i, l)
		}
	}
	if synced < 0 || tailAfter < 0 {
		t.Errorf("want the data stream synchronized (line %d), then a tail publication (line %d)", synced, tailAfter)
	}
	if code, msg := f.h.commErr(); code != status.Success {
		t.Errorf("communicator error %v: %s", code, msg)
	}
}

// TestP2PSyncAndFreeWaitForStreams: SyncProxyState (what ProxyStop calls) returns with every queued
// copy done; FreeProxyState synchronizes both streams before destroying them.
func TestP2PSyncAndFreeWaitForStreams(t *testing.T) {
	dev, err := fakeDev(t, "1")
	if err != nil {
		t.Fatal(err)
	}
	st, err := cuda.NewProxyState(dev, nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := dev.MemAlloc(64)
	dst, _ := dev.MemAlloc(64)
	defer dev.MemFree(src)
	defer dev.MemFree(dst)
	poke(src, bytes.Repeat([]byte{0x5a}, 64))
	h := newHarnessP2P(st, src, 64, dst, 64)
	defer h.free()
	stall(t, st, false)
	stall(t, st, true)
	onThread("0", func() {
		if rc := h.op(tData, 1, 0, 1, 0, 64); rc != status.Success {
			t.Fatalf("put = %v", rc)
		}
	})
	if fakeCall("fakeQueued", "") != 1 {
		t.Fatal("the put did not wait on the stalled stream")
	}
	if err := cuda.SyncProxyState(st); err != nil {
		t.Fatal(err)
	}
	if q := fakeCall("fakeQueued", ""); q != 0 {
		t.Errorf("%d operations still queued after SyncProxyState", q)
	}
	if !bytes.Equal(peek(dst, 64), peek(src, 64)) {
		t.Error("the put has not landed after SyncProxyState")
	}
	calls := logTo(t)
	data, tail := streamID(t, st, false), streamID(t, st, true)
	onThread("0", func() { h.op(tData, 1, 0, 1, 0, 64) })
	if err := cuda.FreeProxyState(st); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cuStreamSynchronize stream=" + strconv.Itoa(tail),
		"cuStreamSynchronize stream=" + strconv.Itoa(data),
		"cuStreamDestroy stream=" + strconv.Itoa(tail) + " pending=0",
		"cuStreamDestroy stream=" + strconv.Itoa(data) + " pending=0",
	}
	got := calls()
	if len(got) < len(want) || strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Errorf("FreeProxyState calls:\n%s\nwant first:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := cuda.SyncProxyState(nil); err != nil {
		t.Error(err)
	}
}

// proxyLatency idles the proxy for idle, then pushes one trigger as a GPU would and returns how
// long the proxy took to serve it.
func proxyLatency(t *testing.T, f *p2pFixture, seq uint64, idle time.Duration) time.Duration {
	t.Helper()
	before := f.h.served()
	time.Sleep(idle)
	start := time.Now()
	f.devPush(t, seq, tData, 0, 0, 8)
	waitFor(t, "the trigger to be served", func() bool { return f.h.served() > before })
	return time.Since(start)
}

// TestProxyBusyPollsInCUDAMode: with its FIFO head in device memory the proxy never sleeps, so a
// trigger after a long idle is served at once; a host-mode proxy backs off (here: sleeps of up to
// one second) and serves it late.
func TestProxyBusyPollsInCUDAMode(t *testing.T) {
	f := newFixture(t, nil)
	f.cudaMode(t)
	f.h.proxyBackoff(0, 0, 1000000)
	if err := f.h.start(); err != nil {
		t.Fatal(err)
	}
	lat := proxyLatency(t, f, 0, 400*time.Millisecond)
	f.h.stop()
	if lat > 100*time.Millisecond {
		t.Errorf("CUDA-mode proxy served a trigger %v after an idle period: it slept", lat)
	}
	t.Logf("CUDA mode: served %v after 400 ms idle", lat)

	g := newFixture(t, nil)
	g.h.proxyBackoff(0, 0, 1000000)
	if err := g.h.start(); err != nil {
		t.Fatal(err)
	}
	lat = proxyLatency(t, g, 0, 400*time.Millisecond)
	g.h.stop()
	if lat < 20*time.Millisecond {
		t.Errorf("host-mode proxy served a trigger %v after an idle period: it did not back off", lat)
	}
	t.Logf("host mode: served %v after 400 ms idle", lat)
}

// TestProxyWaitsForTriggerType: word 0 visible without word 1 (a GPU's 16-byte store seen as two
// writes) is not a trigger yet; a trigger that never gets a type is reported and dropped.
func TestProxyWaitsForTriggerType(t *testing.T) {
	f := newFixture(t, nil)
	f.cudaMode(t)
	if err := f.h.start(); err != nil {
		t.Fatal(err)
	}
	defer f.h.stop()
	f.h.slotWord(0, 0, word0(300, 16))
	// the proxy has looked at the half-written slot several times, and left it alone
	waitFor(t, "the proxy to look at the half-written slot", func() bool { return f.h.typelessSeen() >= 3 })
	if n := f.h.served(); n != 0 || !f.h.slotBusy(0) {
		t.Fatalf("served %d triggers from a slot whose word 1 has not arrived", n)
	}
	f.h.slotWord(0, 1, word1(tData, 0, 500))
	waitFor(t, "the completed trigger", func() bool { return f.h.served() == 1 })
	if !bytes.Equal(peek(f.dst+500, 16), peek(f.src+300, 16)) {
		t.Error("the trigger completed late did not copy its bytes")
	}
	if code, msg := f.h.commErr(); code != status.Success {
		t.Fatalf("communicator error %v: %s", code, msg)
	}
	// pushed with type 0: dropped after a second, with an error
	start := time.Now()
	f.devPush(t, 1, 0, 0, 0, 8)
	waitFor(t, "the typeless trigger to be dropped", func() bool { return f.h.served() == 2 })
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Errorf("a typeless trigger was dropped after %v, before its word 1 could arrive", el)
	}
	code, msg := f.h.commErr()
	if code != status.InvalidUsage || !strings.Contains(msg, "trigger 1 has no type") {
		t.Errorf("recorded %v %q", code, msg)
	}
	f.devPush(t, 2, tSync, 0, 0, 1)
	waitFor(t, "the proxy to go on", func() bool { return f.h.served() == 3 })
}

// TestHostAllocOnNode: pinned memory comes from the requested NUMA node, the thread's own memory
// policy is restored, and an impossible node falls back silently.
func TestHostAllocOnNode(t *testing.T) {
	dev, err := fakeDev(t, "0")
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mode := policyMode()
	p, placed, err := dev.HostAllocOnNode(1<<16, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.HostFree(p)
	if after := policyMode(); after != mode {
		t.Errorf("the thread's memory policy was %d, is %d after the allocation", mode, after)
	}
	if !placed {
		t.Logf("no memory policy here (mode %d): the allocation fell back", mode)
	} else if node := cuda.PageNode(unsafe.Add(p, 1<<15)); node != 0 {
		t.Errorf("pinned page on node %d, want 0", node)
	}
	q, placed, err := dev.HostAllocOnNode(4096, 1000)
	if err != nil || placed {
		t.Errorf("node 1000: placed %v, %v; want a silent fallback", placed, err)
	}
	if q != nil {
		dev.HostFree(q)
	}
	if after := policyMode(); after != mode {
		t.Errorf("the thread's memory policy was %d, is %d after the fallback", mode, after)
	}
}
