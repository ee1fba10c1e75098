//go:build mscclpp_testhooks

package p2p

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/cuda"
)

// fakeCuda is the stand-in driver built from cuda/testdata/fakecuda.c by TestMain. The ops tests
// load it apart from the process's driver (MSCCLPP_CUDA_LIBRARY stays as it is).
var fakeCuda string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "p2p-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
		if _, err := exec.LookPath(cc); err != nil {
			cc = "gcc"
		}
	}
	fakeCuda = filepath.Join(dir, "libfakecuda.so")
	src := filepath.Join("..", "..", "cuda", "testdata", "fakecuda.c")
	if b, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", fakeCuda, src, "-lpthread").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the stand-in driver: %v\n%s", err, b)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fakeDev returns the stand-in driver's device with fake context ctx ("0", "1") current, no failure armed.
func fakeDev(t *testing.T, ctx string) (cuda.Device, error) {
	t.Helper()
	dev, err := cuda.TestLoadDevice(fakeCuda, ctx)
	if err != nil {
		t.Fatal(err)
	}
	arm(t, "")
	return dev, nil
}

// fakeCall calls int sym(const char* arg) in the stand-in driver on the calling thread.
func fakeCall(sym, arg string) int { return cuda.TestLibCall(fakeCuda, sym, arg) }

// arm makes the fake's entry point sym fail with CUDA_ERROR_OUT_OF_MEMORY until the test ends ("" disarms).
func arm(t *testing.T, sym string) {
	t.Helper()
	fakeCall("fakeFail", sym)
	t.Cleanup(func() { fakeCall("fakeFail", "") })
}

// onThread runs f locked to one OS thread whose current fake context is ctx ("0", "1", or "n" for none).
func onThread(ctx string, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		fakeCall("fakeSetCurrent", ctx)
		f()
		fakeCall("fakeSetCurrent", "0")
	}()
	<-done
}

// peek returns n bytes at device (or host) address p through the fake driver; it panics when
// p..p+n is not inside one allocation.
func peek(p uint64, n int) []byte {
	b, err := cuda.TestLibRead(fakeCuda, p, n)
	if err != nil {
		panic(err)
	}
	return b
}

// poke writes b at device (or host) address p through the fake driver.
func poke(p uint64, b []byte) {
	if err := cuda.TestLibWrite(fakeCuda, p, b); err != nil {
		panic(err)
	}
}

// current is the fake context current on the calling thread (-1: none).
func current() int { return fakeCall("fakeCurrent", "") }

func policyMode() int { return cuda.TestPolicyMode() }

// allowedCPUs returns the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}
