//go:build mscclpp_testhooks

package impl

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// faultTimeout is the bootstrap timeout of the fault tests (seconds): how long a silent peer
// may stay silent before it counts as lost.
const faultTimeout = 2

// faultBound is how long an error may take to reach a waiting kernel: the timeout + 1 s.
const faultBound = faultTimeout*time.Second + time.Second

// faultSpec is devFault's argument for connection 0 of c (a buffer of n bytes), with a first
// putWithSignalAndFlush of put bytes (0: none).
func faultSpec(c *Comm, n, put int) string {
	return fmt.Sprintf("conn=%#x size=%d put=%d", uintptr(c.host.DevConns.At(0)), n, put)
}

// TestDeviceThreadsFaultIB: an IB error completion reaches the kernels of both ranks (device
// methods on CPU threads against the real CUDA-mode proxies, the verbs double). Rank 0's kernel
// puts a size the double fails as a lost link does (RETRY_EXC_ERR, the QP to ERR): its flush
// must return within 1 s with failed(), and so must its wait() and a FIFO's worth of puts
// after it; rank 1's kernel waits for a signal that will never come: it must return with
// failed() within the timeout + 1 s (its peer's heartbeats stop). Both communicators then
// report mscclppRemoteError with the reason.
func TestDeviceThreadsFaultIB(t *testing.T) {
	const n, failBytes = 1 << 16, 4321
	if os.Getenv(fakeChildEnv) == "fault-ib" {
		if err := SetBootstrapTimeout(faultTimeout); err != nil {
			t.Fatal(err)
		}
		comms := devThreadsRanks(t, transportIB, n)
		stallCopies(t)
		var wg sync.WaitGroup
		rcs, took := make([]int, 2), make([]time.Duration, 2)
		for r := range comms {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				start := time.Now()
				rcs[r] = cuda.TestDriverCall("devFault", faultSpec(comms[r], n, []int{failBytes, 0}[r]))
				took[r] = time.Since(start)
			}(r)
		}
		wg.Wait()
		bounds := []time.Duration{time.Second, faultBound}
		for r := range comms {
			t.Logf("rank %d: the kernel returned after %v (rc %d)", r, took[r].Round(time.Millisecond), rcs[r])
			if rcs[r] != 0 {
				t.Errorf("rank %d: the kernel did not see the failure (see the devthreads lines above)", r)
			}
			if took[r] > bounds[r] {
				t.Errorf("rank %d: the error reached the kernel after %v, want <= %v", r, took[r], bounds[r])
			}
			checkFaultErr(t, r, comms[r])
		}
		destroyAll(comms)
		return
	}
	env := append(ibDoubleEnv(t), fmt.Sprintf("MSCCLPP_IBV_DOUBLE_FAIL_BYTES=%d", failBytes))
	out := runFakeChildWith(t, buildDevThreadsDriver(t), t.Name(), "fault-ib", env...)
	t.Logf("child:\n%s", out)
}

// stallCopies makes the stand-in driver's asynchronous copies wait until their stream is
// synchronized, as a GPU's may: a failed tail that the proxy only enqueued would not reach the
// kernels, so this checks that the proxy makes it visible itself.
func stallCopies(t *testing.T) {
	cuda.TestDriverCall("fakeStall", "all")
	t.Cleanup(func() { cuda.TestDriverCall("fakeStall", "") })
}

// checkFaultErr fails t unless c recorded mscclppRemoteError naming its peer (unreachable, or
// an RDMA to it that failed) as its asynchronous error.
func checkFaultErr(t *testing.T, r int, c *Comm) {
	t.Helper()
	err := c.AsyncErr()
	if err == nil {
		t.Errorf("rank %d: no asynchronous error recorded", r)
		return
	}
	t.Logf("rank %d: %v", r, err)
	if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), fmt.Sprintf("rank %d", 1-r)) {
		t.Errorf("rank %d: error %q is not mscclppRemoteError naming rank %d", r, err, 1-r)
	}
}

// destroyAll destroys every communicator at once (errors are expected after a fault).
func destroyAll(comms []*Comm) {
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func(c *Comm) {
			defer wg.Done()
			c.Destroy()
		}(c)
	}
	wg.Wait()
}

// TestDeviceThreadsFaultEthernet: a lost Ethernet link reaches a waiting kernel. The two ranks
// are two processes (CUDA mode, the stand-in driver); once rank 0's kernel waits for a signal
// of rank 1's, rank 1 is SIGSTOPped: from rank 0 nothing more arrives, as when the link goes
// down. Rank 0's kernel must return with failed() within the timeout + 1 s of the fault, and
// then a FIFO's worth of puts and a flush at once; rank 0 reports mscclppRemoteError naming
// the peer unreachable.
func TestDeviceThreadsFaultEthernet(t *testing.T) {
	faultPeerProcess(t, "fault-eth", TransportEthernet, syscall.SIGSTOP, "unreachable")
}

// TestDeviceThreadsPeerKilledP2P: a same-node P2P peer killed (SIGKILL) while a kernel waits
// for its signal reaches the kernel: the copies into a dead peer's memory would still succeed,
// so only the proxy's watcher sees it. As TestDeviceThreadsFaultEthernet, with rank 1 killed:
// rank 0's kernel returns with failed() within the timeout + 1 s, then a FIFO's worth of puts
// and a flush at once; rank 0 reports mscclppRemoteError saying rank 1 exited.
func TestDeviceThreadsPeerKilledP2P(t *testing.T) {
	faultPeerProcess(t, "fault-p2p", TransportP2P, syscall.SIGKILL, "exited")
}

// faultPeerProcess runs the two ranks of a fault test as two processes (mode, over tr, in CUDA
// mode against the stand-in driver); once rank 0's kernel waits for a signal of rank 1's, it
// sends rank 1 sig, and checks that the kernel returned within faultBound and that rank 0's
// error says why (want).
func faultPeerProcess(t *testing.T, mode string, tr Transport, sig syscall.Signal, want string) {
	const n = 1 << 16
	if os.Getenv(fakeChildEnv) == mode {
		faultRank(t, n, tr, want)
		return
	}
	lib := buildDevThreadsDriver(t)
	addr := freeAddr(t)
	var logMu sync.Mutex
	var log strings.Builder
	lines := make([]chan string, 2)
	cmds := make([]*exec.Cmd, 2)
	for r := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), fakeChildEnv+"="+mode, "MSCCLPP_CUDA_LIBRARY="+lib, "MSCCLPP_DEVICE=",
			"MSCCLPP_TEST_FAULT_RANK="+fmt.Sprint(r), "MSCCLPP_TEST_FAULT_ADDR="+addr)
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
		lines[r] = make(chan string, 64)
		go func(r int) {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				logMu.Lock()
				fmt.Fprintf(&log, "rank %d: %s\n", r, sc.Text())
				logMu.Unlock()
				select {
				case lines[r] <- sc.Text():
				default:
				}
			}
			close(lines[r])
		}(r)
		go func() { cmd.Wait(); pw.Close() }()
	}
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
		logMu.Lock()
		t.Logf("children:\n%s", log.String())
		logMu.Unlock()
	}()
	await := func(r int, what string, d time.Duration) bool {
		deadline := time.After(d)
		for {
			select {
			case l, ok := <-lines[r]:
				if !ok {
					t.Errorf("rank %d ended before %q", r, what)
					return false
				}
				if strings.Contains(l, what) {
					return true
				}
			case <-deadline:
				t.Errorf("rank %d: no %q within %v", r, what, d)
				return false
			}
		}
	}
	if !await(1, "fault: ready", 60*time.Second) || !await(0, "fault: waiting", 60*time.Second) {
		return
	}
	if err := cmds[1].Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	fault := time.Now()
	if !await(0, "fault: released", faultBound+30*time.Second) {
		return
	}
	took := time.Since(fault)
	t.Logf("the fault (%v to rank 1) reached rank 0's kernel %v after it", sig, took.Round(time.Millisecond))
	if took > faultBound {
		t.Errorf("the error reached the waiting kernel %v after the fault, want <= %v", took, faultBound)
	}
	cmds[1].Process.Kill()
	if !await(0, "fault: done", 30*time.Second) {
		return
	}
	logMu.Lock()
	failed := strings.Contains(log.String(), "--- FAIL")
	logMu.Unlock()
	if failed {
		t.Errorf("rank 0's checks failed (see its output)")
	}
}

// faultRank is one rank of faultPeerProcess: rank 1 sets up and then only waits for its fault;
// rank 0's kernel waits for a signal that never comes, and its error must contain want.
func faultRank(t *testing.T, n int, tr Transport, want string) {
	var r int
	fmt.Sscan(os.Getenv("MSCCLPP_TEST_FAULT_RANK"), &r)
	if err := SetBootstrapTimeout(faultTimeout); err != nil {
		t.Fatal(err)
	}
	var bufs [1]uint64
	fakeDeviceBuffers(t, bufs[:], make([]byte, n))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := InitRank(2, os.Getenv("MSCCLPP_TEST_FAULT_ADDR"), r)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(1-r, 0, engine.DevPtr(bufs[0]), uint64(n), tr, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := c.ConnectionSetup(); err != nil {
		t.Fatal(err)
	}
	if err := c.ProxyLaunch(); err != nil {
		t.Fatal(err)
	}
	if r == 1 {
		fmt.Println("fault: ready")
		time.Sleep(time.Hour) // stopped or killed by the parent
		return
	}
	stallCopies(t)
	fmt.Println("fault: waiting")
	rc := cuda.TestDriverCall("devFault", faultSpec(c, n, 0))
	fmt.Println("fault: released")
	if rc != 0 {
		t.Errorf("the kernel did not see the failure (rc %d; see the devthreads lines above)", rc)
	}
	checkFaultErr(t, 0, c)
	if err := c.AsyncErr(); err != nil && !strings.Contains(err.Error(), want) {
		t.Errorf("rank 0's error %q does not say %q", err, want)
	}
	c.Destroy()
	fmt.Println("fault: done")
}

// TestHostWaitServedFailed: a trigger the proxy could not do (a put past the end of the peer's
// buffer) is served, but mscclppFifoWaitServed must not read as success: it returns the
// communicator's asynchronous error.
func TestHostWaitServedFailed(t *testing.T) {
	bufs := [2][]byte{make([]byte, 64), make([]byte, 64)}
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		return c.Connect(1-r, 0, unsafe.Pointer(&bufs[r][0]), 64, TransportSHM, nil, true)
	})
	dev := comms[0].host.DevConns.At(0)
	seq := engine.FifoPush(dev, 1, 1<<20, 0, 8) // Data, 8 bytes at 1 MiB of a 64-byte buffer
	if seq == engine.PushFailed {
		t.Fatal("the push failed")
	}
	rc := engine.FifoWaitServed(dev, seq)
	if rc == status.Success {
		t.Errorf("mscclppFifoWaitServed returned success for a trigger that failed (async error: %v)", comms[0].AsyncErr())
	} else if err := comms[0].AsyncErr(); err == nil || status.CodeOf(err) != rc {
		t.Errorf("mscclppFifoWaitServed returned %v, the communicator's error is %v", rc, err)
	} else {
		t.Logf("mscclppFifoWaitServed: %v (%v)", rc, err)
	}
	proxyStopAll(t, comms)
	destroyAll(comms)
}
