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
	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/engine"
)

// TestIBCudaRegisteredWrite: mscclppRegisteredBufferWrite over IB from device memory, against the
// stand-in driver and the verbs double. The source is still being written by a copy on the
// application's stream (held back: the copy engine is busy) when the write is called: the bytes
// that arrive are the copy's, so the stream was synchronized before the NIC read the source.
// Three writes from one device buffer register it once (through a dma-buf), not once per call.
func TestIBCudaRegisteredWrite(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "ib-write" {
		ibWriteChild(t)
		return
	}
	t.Parallel()
	env := append(ibDoubleEnv(t), "MSCCLPP_DEBUG=INFO", "MSCCLPP_DEBUG_SUBSYS=ALL")
	out := runFakeChildWith(t, buildDevThreadsDriver(t), "TestIBCudaRegisteredWrite", "ib-write", env...)
	if !strings.Contains(string(out), "registered through a dma-buf") {
		t.Errorf("no INFO line saying device memory was registered through a dma-buf")
	}
	if t.Failed() {
		t.Logf("child:\n%s", out)
	}
}

func ibWriteChild(t *testing.T) {
	const n = 1 << 20
	pattern := make([]byte, n)
	for i := range pattern {
		pattern[i] = byte(i*31 + 7)
	}
	comms := devThreadsRanks(t, transportIB, 4096)
	// device buffers in whole large pages (as cudaMalloc places them): rank 0's source and
	// the pattern the stream copies into it, each rank's registered destination
	var bufs [4]uint64
	fakeBuffersOn(t, "0", bufs[:3], cuda.BlockAlign) // rank 0's, on its GPU
	fakeBuffersOn(t, "1", bufs[3:], cuda.BlockAlign) // rank 1's
	src, staging, dst := bufs[0], bufs[1], bufs[2:]
	if err := cuda.TestDriverWrite(staging, pattern); err != nil {
		t.Fatal(err)
	}
	peers := make([][]RegisteredPeer, 2)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Go(func() {
			var err error
			if peers[r], err = comms[r].RegisterBuffer(engine.DevPtr(dst[r]), n); err != nil {
				t.Errorf("rank %d: RegisterBuffer: %v", r, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	dev, err := cuda.ProbePointer(src)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := cuda.TestNewStream(dev)
	if err != nil {
		t.Fatal(err)
	}
	// the copy engine is busy: the copy into the source waits on the application's stream
	cuda.TestDriverCall("fakeStall", fmt.Sprint(stream))
	defer cuda.TestDriverCall("fakeStall", "")
	if err := dev.CopyAsync(src, staging, n, stream); err != nil {
		t.Fatal(err)
	}
	if q := cuda.TestDriverCall("fakeQueued", ""); q != 1 {
		t.Fatalf("%d copies queued on the stalled stream, want 1", q)
	}
	regs := verbs.TestDoubleCounter("ibv_double_mr_regs")
	for i, off := range []uint32{0, 0, 4096} {
		if err := comms[0].RegisteredBufferWrite(peers[0], engine.DevPtr(src), n-4096, off, off, stream); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if got := verbs.TestDoubleCounter("ibv_double_mr_regs") - regs; got != 1 {
		t.Errorf("three writes from one device buffer registered %d MRs, want 1 (a cached one)", got)
	}
	got, err := cuda.TestDriverRead(dst[1], n)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pattern) {
		i := 0
		for i < n && got[i] == pattern[i] {
			i++
		}
		t.Errorf("rank 1's registered buffer differs from what the stream copied into the source at byte %d (the write read the source before the stream finished)", i)
	}
	cuda.TestDriverCall("fakeStall", "")
	devThreadsDone(t, comms)
}
