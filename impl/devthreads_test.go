//go:build mscclpp_testhooks

package impl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
)

// buildDevThreadsDriver links the stand-in driver with the kernels of tests/devthreads (the
// header's device methods compiled for CPU threads by g++) into one library, built once per
// test process.
func buildDevThreadsDriver(t *testing.T) string {
	t.Helper()
	return sharedArtifact(t, "devthreads", func(dir string) (string, error) {
		cc, cxx := os.Getenv("CC"), os.Getenv("CXX")
		if cc == "" {
			cc = "cc"
		}
		if cxx == "" {
			cxx = "g++"
		}
		lib := filepath.Join(dir, "libfakecuda.so")
		steps := [][]string{
			{cc, "-c", "-fPIC", "-O1", "-o", filepath.Join(dir, "fake.o"), filepath.Join("..", "cuda", "testdata", "fakecuda.c")},
			{cxx, "-c", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fPIC", "-O1", "-I../include", "-I../tests/devthreads",
				"-o", filepath.Join(dir, "kernels.o"), filepath.Join("..", "tests", "devthreads", "kernels.cc")},
			{cxx, "-shared", "-o", lib, filepath.Join(dir, "fake.o"), filepath.Join(dir, "kernels.o"), "-lpthread"},
		}
		for _, s := range steps {
			if b, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
				return "", fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, b)
			}
		}
		return lib, nil
	})
}

// TestDeviceThreadsP2P and TestDeviceThreadsEthernet run the header's device methods on CPU
// threads (tests/devthreads) against two ranks' real CUDA-mode proxies: on each rank a kernel
// of 150 threads writes its buffer and pushes it to the peer (more pushers than FIFO slots,
// every trigger type, zero-size puts) while a one-thread kernel waits for every signal of the
// peer's and checks each byte. The shim also fails a trigger stored without a release fence,
// a read after wait() without an acquire, and a trigger whose word 0 is 0.
func TestDeviceThreadsP2P(t *testing.T) { devThreadsTest(t, "devthreads-p2p") }

func TestDeviceThreadsEthernet(t *testing.T) { devThreadsTest(t, "devthreads-eth") }

func devThreadsTest(t *testing.T, mode string) {
	if os.Getenv(fakeChildEnv) == mode {
		tr := TransportP2P
		if mode == "devthreads-eth" {
			tr = TransportEthernet
		}
		devThreadsChild(t, tr)
		return
	}
	t.Parallel()
	out := runFakeChildWith(t, buildDevThreadsDriver(t), t.Name(), mode)
	t.Logf("child:\n%s", out)
}

func devThreadsChild(t *testing.T, tr Transport) {
	const threads, chunk = 150, 2048
	const size = threads * chunk
	comms := devThreadsRanks(t, tr, 2*size)
	spec := func(r int) string {
		return fmt.Sprintf("conn=%#x size=%d threads=%d", uintptr(comms[r].host.DevConns.At(0)), size, threads)
	}
	kernels := []struct {
		rank int
		fn   string
	}{{0, "devSend"}, {1, "devSend"}, {0, "devRecv"}, {1, "devRecv"}}
	rcs := make([]int, len(kernels))
	var wg sync.WaitGroup
	for i, k := range kernels {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rcs[i] = cuda.TestDriverCall(k.fn, spec(k.rank))
		}(i)
	}
	wg.Wait()
	for i, k := range kernels {
		if rcs[i] != 0 {
			t.Errorf("rank %d's %s kernel: %d failures (see the devthreads lines above)", k.rank, k.fn, -rcs[i])
		}
	}
	// triggers per thread of devSend, by thread id % 6 (see sendOne): each one served
	perKind := [6]uint64{1, 2, 1, 3, 2, 3}
	want := uint64(0)
	for i := 0; i < threads; i++ {
		want += perKind[i%6]
	}
	for r := range comms {
		if got := comms[r].ProxyServed(); got != want {
			t.Errorf("rank %d's proxy served %d triggers, want the %d its kernel pushed", r, got, want)
		}
	}
	if !t.Failed() {
		t.Logf("each proxy served %d triggers through its 128-slot FIFO", want)
	}
	devThreadsDone(t, comms)
}

// devThreadsRanks forms two ranks in CUDA mode, each with one connection over tr to the other
// and a device buffer of n bytes, proxies launched. The buffers are allocated in whole 2 MiB
// pages, as cudaMalloc places a large buffer, unless MSCCLPP_TEST_SUBALLOCATED=1 asks for
// buffers of n bytes, which the driver carves out of a shared 2 MiB chunk.
func devThreadsRanks(t *testing.T, tr Transport, n int) []*Comm {
	t.Helper()
	return devThreadsRanksSetUp(t, tr, n, true)
}

// devThreadsRanksSetUp is devThreadsRanks, with the proxies launched only if launch.
func devThreadsRanksSetUp(t *testing.T, tr Transport, n int, launch bool) []*Comm {
	t.Helper()
	var bufs [2]uint64
	alloc := (n + cuda.BlockAlign - 1) &^ (cuda.BlockAlign - 1)
	if os.Getenv("MSCCLPP_TEST_SUBALLOCATED") == "1" {
		alloc = n
	}
	fakeDeviceBuffers(t, bufs[:], make([]byte, alloc))
	var dev *string
	if tr == transportIB {
		name := "double_0" // the verbs test double's device
		dev = &name
	}
	return twoRanksSetUp(t, func(r int, c *Comm) error {
		return c.Connect(1-r, 0, engine.DevPtr(bufs[r]), uint64(n), tr, dev, true)
	}, launch)
}

// devThreadsDone stops both ranks' proxies, checks neither recorded an error, destroys both at
// once (a P2P destroy waits for its peer's).
func devThreadsDone(t *testing.T, comms []*Comm) {
	t.Helper()
	proxyStopAll(t, comms)
	var wg sync.WaitGroup
	for r := range comms {
		if err := comms[r].AsyncErr(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			if err := comms[r].Destroy(); err != nil {
				t.Errorf("rank %d: Destroy: %v", r, err)
			}
		}(r)
	}
	wg.Wait()
}

// TestDevConnPlacement checks, for every transport in CUDA mode, that each pointer of every
// mscclppDevConn handed out (FIFO slots, head, tail, both epochs, wait counter, both buffers)
// is one a kernel can reach: device memory, or pinned host memory mapped for the device. The
// proxy's own accesses are checked by the driver: its device memory faults on a host access.
func TestDevConnPlacement(t *testing.T) {
	if m := os.Getenv(fakeChildEnv); strings.HasPrefix(m, "placement-") {
		tr := map[string]Transport{"placement-p2p": TransportP2P, "placement-eth": TransportEthernet, "placement-ib": transportIB}[m]
		const n = 1 << 16
		comms := devThreadsRanks(t, tr, n)
		for r := range comms {
			spec := fmt.Sprintf("conn=%#x size=%d threads=1", uintptr(comms[r].host.DevConns.At(0)), n)
			if bad := cuda.TestDriverCall("devCheckConn", spec); bad != 0 {
				t.Errorf("rank %d: connection 0 hands kernels pointers they cannot reach (field mask %#x; names above)", r, bad)
			}
		}
		devThreadsDone(t, comms)
		return
	}
	t.Parallel()
	lib := buildDevThreadsDriver(t)
	for _, c := range []struct{ name, mode string }{{"P2P", "placement-p2p"}, {"Ethernet", "placement-eth"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := runFakeChildWith(t, lib, "TestDevConnPlacement", c.mode)
			t.Logf("child:\n%s", out)
		})
	}
	t.Run("IB", func(t *testing.T) {
		t.Parallel()
		out, err := fakeChild(lib, "TestDevConnPlacement", "placement-ib", ibDoubleEnv(t)...)
		if err != nil {
			t.Fatalf("IB in CUDA mode: %s\n%s", firstFailure(out), out)
		}
		t.Logf("child:\n%s", out)
	})
}

// transportIB is mscclppTransportIB (named here, not through its package, which moves).
const transportIB Transport = 2

// firstFailure is the first line of a child's output that says what failed.
func firstFailure(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "devthreads:") || strings.HasPrefix(l, "devthreads_test.go:") {
			return l
		}
	}
	return "the child failed"
}

// TestHostPushZeroSize pushes, from a host thread, a Data trigger of size 0 at source offset 0
// (word 0 would be 0, the empty-slot marker): it is served at once as a marker that moves
// nothing, with no error on the communicator (the same rule as the device push).
func TestHostPushZeroSize(t *testing.T) {
	bufs := [2][]byte{make([]byte, 64), make([]byte, 64)}
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		return c.Connect(1-r, 0, unsafe.Pointer(&bufs[r][0]), 64, TransportSHM, nil, true)
	})
	for _, typ := range []uint64{1, 1 | 4} { // Data, Data|Sync
		seq := engine.FifoPush(comms[0].host.DevConns.At(0), typ, 0, 0, 0)
		if seq == engine.PushFailed {
			t.Fatalf("type %d: the zero-size push failed", typ)
		}
		if rc := engine.FifoWaitServed(comms[0].host.DevConns.At(0), seq); rc != 0 {
			t.Fatalf("type %d: waiting for the zero-size push: %v", typ, rc)
		}
	}
	proxyStopAll(t, comms)
	for r := range comms {
		if err := comms[r].AsyncErr(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
		if err := comms[r].Destroy(); err != nil {
			t.Errorf("rank %d: Destroy: %v", r, err)
		}
	}
}
