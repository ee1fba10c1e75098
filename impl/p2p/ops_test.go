//go:build mscclpp_testhooks

package p2p

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

const (
	tData = 1
	tFlag = 2
	tSync = 4
)

// p2pFixture is a proxy state on fake context 1 and one connection whose handle 1 is src (mine) / dst (the peer's).
type p2pFixture struct {
	dev      cuda.Device
	state    unsafe.Pointer
	h        harnessP2P
	src, dst uint64
}

const bufSize = 1 << 16

func newFixture(t *testing.T, cpus []int) *p2pFixture {
	t.Helper()
	dev, err := fakeDev(t, "1")
	if err != nil {
		t.Fatal(err)
	}
	f := &p2pFixture{dev: dev}
	if f.state, err = cuda.NewProxyState(dev, cpus, -1); err != nil {
		t.Fatal(err)
	}
	if f.src, err = dev.MemAlloc(bufSize); err != nil {
		t.Fatal(err)
	}
	if f.dst, err = dev.MemAlloc(bufSize); err != nil {
		t.Fatal(err)
	}
	src := make([]byte, bufSize)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	poke(f.src, src)
	f.h = newHarnessP2P(f.state, f.src, bufSize, f.dst, bufSize)
	t.Cleanup(func() {
		f.h.free()
		if err := cuda.FreeProxyState(f.state); err != nil {
			t.Error(err)
		}
		dev.MemFree(f.src)
		dev.MemFree(f.dst)
	})
	return f
}

func TestP2POpsTable(t *testing.T) {
	if ops() == nil {
		t.Fatal("ops() is nil")
	}
	// engOps starts with its name, then its op
	ops := (*[2]uintptr)(ops())
	if ops[0] == 0 || ops[1] == 0 {
		t.Fatalf("engOps name %#x, op %#x", ops[0], ops[1])
	}
}

func TestProxyStateLifecycle(t *testing.T) {
	dev, err := fakeDev(t, "1")
	if err != nil {
		t.Fatal(err)
	}
	streams := fakeCall("fakeStreams", "")
	allocs := fakeCall("fakeLiveAllocs", "")
	st, err := cuda.NewProxyState(dev, []int{0}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if tail := cuda.ProxyTail(st); tail == 0 || !bytes.Equal(peek(tail, 8), make([]byte, 8)) {
		t.Errorf("tail word at %#x is not zeroed device memory", tail)
	}
	if done, err := cuda.BindResult(st); done || err != nil {
		t.Errorf("BindResult before any proxy = %v, %v", done, err)
	}
	if err := cuda.FreeProxyState(st); err != nil {
		t.Fatal(err)
	}
	if cuda.FreeProxyState(nil) != nil {
		t.Error("cuda.FreeProxyState(nil) failed")
	}
	// each failing step unwinds the earlier ones
	for _, sym := range []string{"cuStreamCreate", "cuMemAlloc_v2", "cuMemsetD8_v2", "cuStreamSynchronize", "cuMemHostAlloc"} {
		arm(t, sym)
		if _, err := cuda.NewProxyState(dev, nil, -1); err == nil || status.CodeOf(err) != status.UnhandledCudaError {
			t.Errorf("NewProxyState with %s failing: %v", sym, err)
		}
	}
	arm(t, "")
	if s, a := fakeCall("fakeStreams", ""), fakeCall("fakeLiveAllocs", ""); s != streams || a != allocs {
		t.Errorf("leaked: streams %d -> %d, allocations %d -> %d", streams, s, allocs, a)
	}
	if _, err := cuda.NewProxyState(dev, []int{-1}, -1); status.CodeOf(err) != status.InvalidArgument {
		t.Errorf("negative cpu: %v", err)
	}
	if _, err := cuda.NewProxyState(cuda.Device{}, nil, -1); err == nil {
		t.Error("NewProxyState of a zero Device succeeded")
	}
}

func TestP2POpOnHostThread(t *testing.T) {
	f := newFixture(t, nil)
	// a host initiator whose thread has another context (0) current, or none
	for i, ctx := range []string{"0", "n"} {
		onThread(ctx, func() {
			want := current()
			if rc := f.h.op(tData, 1, 100, 1, 200, 1000); rc != status.Success {
				t.Fatalf("Data op = %v", rc)
			}
			if got, exp := peek(f.dst+100, 1000), peek(f.src+200, 1000); !bytes.Equal(got, exp) {
				t.Error("Data op did not copy the bytes")
			}
			// a signal sends the count of signals served on the connection, fixed when it is
			// served, not the device epoch as it is when the copy runs
			f.h.setEpoch(41)
			syncs := fakeCall("fakeSyncs", "")
			if rc := f.h.op(tFlag|tSync, 1, 0, 1, 0, 0); rc != status.Success {
				t.Fatalf("Flag|Sync op = %v", rc)
			}
			if _, remote := f.h.epochs(); remote != uint64(i+1) {
				t.Errorf("peer's proxy epoch = %d, want %d (signals served)", remote, i+1)
			}
			if n := fakeCall("fakeSyncs", ""); n != syncs+1 {
				t.Errorf("Sync ran %d stream synchronizations", n-syncs)
			}
			if got := current(); got != want {
				t.Errorf("thread's context was %d, is %d after the op", want, got)
			}
		})
	}
	if code, msg := f.h.commErr(); code != status.Success {
		t.Errorf("communicator error %v: %s", code, msg)
	}
}

func TestP2POpErrors(t *testing.T) {
	cases := []struct {
		name                string
		arm                 string
		noEpoch             bool
		typ, dh, do, sh, so uint64
		size                uint64
		code                status.Code
		msg                 string
	}{
		{name: "src handle", typ: tData, dh: 1, sh: 5, size: 1, code: status.InvalidArgument,
			msg: "connection 0 (rank 1, tag 7): put from handle 5 to handle 1: only 2 local and 2 remote handles"},
		{name: "src range", typ: tData, dh: 1, sh: 1, so: bufSize - 10, size: 11, code: status.InvalidArgument,
			msg: "connection 0 (rank 1, tag 7): put reads 11 bytes at offset 65526 of local handle 1, which has 65536 bytes"},
		{name: "dst range", typ: tData, dh: 1, do: bufSize + 1, sh: 1, size: 0, code: status.InvalidArgument,
			msg: "connection 0 (rank 1, tag 7): put writes 0 bytes at offset 65537 of remote handle 1, which has 65536 bytes"},
		{name: "no epoch", noEpoch: true, typ: tFlag, code: status.InvalidUsage,
			msg: "connection 0 (rank 1, tag 7): signal before connection setup"},
		{name: "copy fails", arm: "cuMemcpyDtoDAsync_v2", typ: tData, dh: 1, sh: 1, size: 8, code: status.UnhandledCudaError,
			msg: "connection 0 (rank 1, tag 7): cuMemcpyDtoDAsync: CUDA_ERROR_OUT_OF_MEMORY"},
		{name: "flag fails", arm: "cuMemcpyHtoDAsync_v2", typ: tFlag, code: status.UnhandledCudaError,
			msg: "connection 0 (rank 1, tag 7): cuMemcpyHtoDAsync: CUDA_ERROR_OUT_OF_MEMORY"},
		{name: "sync fails", arm: "cuStreamSynchronize", typ: tSync, code: status.UnhandledCudaError,
			msg: "connection 0 (rank 1, tag 7): cuStreamSynchronize: CUDA_ERROR_OUT_OF_MEMORY"},
		{name: "context fails", arm: "cuCtxGetCurrent", typ: tSync, code: status.UnhandledCudaError,
			msg: "connection 0 (rank 1, tag 7): cuCtxGetCurrent: CUDA_ERROR_OUT_OF_MEMORY"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			if c.noEpoch {
				f.h.dropRemoteEpoch()
			}
			arm(t, c.arm)
			var rc status.Code
			onThread("0", func() { rc = f.h.op(c.typ, c.dh, c.do, c.sh, c.so, c.size) })
			arm(t, "")
			if rc != c.code {
				t.Errorf("op = %v, want %v", rc, c.code)
			}
			if code, msg := f.h.commErr(); code != c.code || msg != c.msg {
				t.Errorf("recorded %v %q, want %v %q", code, msg, c.code, c.msg)
			}
		})
	}
}

func TestP2PProxy(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil || len(allowed) == 0 {
		t.Skipf("no CPU affinity here: %v", err)
	}
	f := newFixture(t, allowed[:1])
	if err := f.h.start(); err != nil {
		t.Fatal(err)
	}
	// 300 put+signal triggers (more than the FIFO holds), then a flush
	const n = 300
	for i := 0; i < n; i++ {
		off := uint64(i * 200)
		f.h.push(tData|tFlag, off, off, 200)
	}
	f.h.push(tSync, 0, 0, 1)
	dev, remote := f.h.epochs()
	if dev != n || remote != n {
		t.Errorf("epochs: mine %d, the peer's copy %d; want %d", dev, remote, n)
	}
	if !bytes.Equal(peek(f.dst, n*200), peek(f.src, n*200)) {
		t.Error("the proxy's puts did not copy the bytes")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		done, err := cuda.BindResult(f.state)
		if done {
			if err != nil {
				t.Errorf("binding to cpu %d: %v", allowed[0], err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy never ran threadInit")
		}
		time.Sleep(time.Millisecond)
	}
	f.h.stop()
	if tail := f.h.tail(); tail != n+1 {
		t.Errorf("tail %d, want %d", tail, n+1)
	}
	if got := peek(cuda.ProxyTail(f.state), 8); !bytes.Equal(got, le64(n+1)) {
		t.Errorf("published device tail % x, want %d", got, n+1)
	}
	if code, msg := f.h.commErr(); code != status.Success {
		t.Errorf("communicator error %v: %s", code, msg)
	}
}

func le64(v uint64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

func TestP2PProxyBindRefused(t *testing.T) {
	f := newFixture(t, []int{4000})
	if err := f.h.start(); err != nil {
		t.Fatal(err)
	}
	f.h.push(tSync, 0, 0, 1)
	f.h.stop()
	done, err := cuda.BindResult(f.state)
	if !done || err == nil || !strings.HasPrefix(err.Error(), "pthread_setaffinity_np: ") {
		t.Errorf("BindResult = %v, %v; want done and a refusal", done, err)
	}
	if code, msg := f.h.commErr(); code != status.Success {
		t.Errorf("a refused binding recorded %v: %s", code, msg)
	}
}

func TestP2PProxyFailures(t *testing.T) {
	f := newFixture(t, nil)
	arm(t, "cuMemcpyHtoDAsync_v2")
	if err := f.h.start(); err != nil {
		t.Fatal(err)
	}
	f.h.push(tSync, 0, 0, 1)
	f.h.stop()
	arm(t, "")
	want := "P2P proxy: cuMemcpyHtoDAsync of the FIFO tail: CUDA_ERROR_OUT_OF_MEMORY"
	if code, msg := f.h.commErr(); code != status.UnhandledCudaError || msg != want {
		t.Errorf("recorded %v %q, want %q", code, msg, want)
	}

	g := newFixture(t, nil)
	arm(t, "cuCtxSetCurrent")
	if err := g.h.start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for done, _ := cuda.BindResult(g.state); !done; done, _ = cuda.BindResult(g.state) {
		if time.Now().After(deadline) {
			t.Fatal("the proxy never ran threadInit")
		}
		time.Sleep(time.Millisecond)
	}
	arm(t, "")
	g.h.stop()
	want = "P2P proxy: cuCtxSetCurrent: CUDA_ERROR_OUT_OF_MEMORY"
	if code, msg := g.h.commErr(); code != status.UnhandledCudaError || msg != want {
		t.Errorf("recorded %v %q, want %q", code, msg, want)
	}
}

// TestP2PFlagRing sends more signals than the pinned value ring holds: the slots are reused
// only after one stream synchronize, and every value sent is the running count.
func TestP2PFlagRing(t *testing.T) {
	f := newFixture(t, nil)
	onThread("0", func() {
		syncs := fakeCall("fakeSyncs", "")
		const n = 4096 + 5
		for i := 1; i <= n; i++ {
			if rc := f.h.op(tFlag, 1, 0, 1, 0, 0); rc != status.Success {
				t.Fatalf("signal %d = %v", i, rc)
			}
		}
		if got := fakeCall("fakeSyncs", "") - syncs; got != 1 {
			t.Errorf("%d signals ran %d stream synchronizations, want 1 (the ring wrapped once)", n, got)
		}
		if _, remote := f.h.epochs(); remote != n {
			t.Errorf("peer's proxy epoch = %d, want %d", remote, n)
		}
	})
}
