//go:build mscclpp_testhooks

package impl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/engine"
)

// ibDoubleEnv returns the environment that selects the libibverbs test double (built once per
// test process) with a fabric of t's own.
func ibDoubleEnv(t *testing.T) []string {
	t.Helper()
	lib := sharedArtifact(t, "ibverbs-double", func(dir string) (string, error) {
		if b, err := exec.Command("bash", filepath.Join("..", "tests", "ib", "double", "build.sh"), dir).CombinedOutput(); err != nil {
			return "", fmt.Errorf("building the verbs double: %v\n%s", err, b)
		}
		return filepath.Join(dir, "libibverbs.so.1"), nil
	})
	return []string{"MSCCLPP_IBV_SO=" + lib, "MSCCLPP_IBV_DOUBLE_DIR=" + t.TempDir()}
}

// TestDeviceThreadsIB runs the device-threads kernels (see TestDeviceThreadsP2P) over IB in
// CUDA mode against the verbs double: kernels push into the CUDA-mode proxy's FIFO, the proxy
// RDMA-writes device memory into the peer's device memory and the signal into its device epoch.
// Device memory is registered through a dma-buf of the whole host pages around it where the
// driver and verbs offer one (buffers the driver carved out of a shared chunk too), else with
// ibv_reg_mr on the device pointer (nvidia-peermem, after the double refused the dma-buf); the
// INFO line says which was used, and why not a dma-buf.
func TestDeviceThreadsIB(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "devthreads-ib" {
		devThreadsChild(t, transportIB)
		return
	}
	t.Parallel()
	lib := buildDevThreadsDriver(t)
	for _, c := range []struct {
		name string
		env  []string
		info string
	}{
		{"dmabuf", nil, "registered through a dma-buf"},
		{"peermem", []string{"MSCCLPP_IBV_DOUBLE_DMABUF=0", "MSCCLPP_IBV_DOUBLE_PEERMEM=1"}, "registered with ibv_reg_mr (nvidia-peermem) (dma-buf registration refused"},
		{"suballocated", []string{"MSCCLPP_TEST_SUBALLOCATED=1"}, "registered through a dma-buf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := append(append(ibDoubleEnv(t), c.env...), "MSCCLPP_DEBUG=INFO", "MSCCLPP_DEBUG_SUBSYS=ALL")
			out := runFakeChildWith(t, lib, "TestDeviceThreadsIB", "devthreads-ib", env...)
			t.Logf("child:\n%s", out)
			if !strings.Contains(string(out), c.info) {
				t.Errorf("no INFO line saying device memory was %s", c.info)
			}
		})
	}
}

// TestIBCudaNoGPUDirect: where neither a dma-buf nor nvidia-peermem registers device memory,
// mscclppConnectionSetup fails on both ranks with an error naming both (no hang, no staging).
func TestIBCudaNoGPUDirect(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "ib-nogdr" {
		const n = 1 << 12
		var bufs [2]uint64
		fakeDeviceBuffers(t, bufs[:], make([]byte, n))
		dev := "double_0"
		addr := freeAddr(t)
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
				defer c.Destroy()
				if errs[r] = c.Connect(1-r, 0, engine.DevPtr(bufs[r]), n, transportIB, &dev, true); errs[r] == nil {
					errs[r] = c.ConnectionSetup()
				}
			}(r)
		}
		wg.Wait()
		for r, err := range errs {
			if err == nil {
				t.Errorf("rank %d: setup succeeded without a way to register device memory", r)
				continue
			}
			t.Logf("rank %d: %v", r, err)
			for _, want := range []string{"dma-buf", "nvidia-peermem", "GPUDirect RDMA"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("rank %d: error %q does not name %q", r, err, want)
				}
			}
		}
		return
	}
	t.Parallel()
	env := append(ibDoubleEnv(t), "MSCCLPP_IBV_DOUBLE_DMABUF=0")
	out := runFakeChildWith(t, buildDevThreadsDriver(t), "TestIBCudaNoGPUDirect", "ib-nogdr", env...)
	t.Logf("child:\n%s", out)
}
