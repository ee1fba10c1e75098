//go:build mscclpp_testhooks

package impl

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mscclpp-go/mscclpp/cuda"
	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// ibRelaxedOrdering is IBV_ACCESS_RELAXED_ORDERING.
const ibRelaxedOrdering = 1 << 20

// TestIBFabricSettings: MSCCLPP_IB_SL, MSCCLPP_IB_TC, MSCCLPP_IB_GID_INDEX and MSCCLPP_IB_HCA
// (its port) reach every QP's address, MSCCLPP_IB_TIMEOUT and MSCCLPP_IB_RETRY_CNT its RTS, as
// the verbs double records them (RoCE: the GRH's traffic
// class and source GID index); data buffers are registered with relaxed ordering, signal slots
// never; an INFO line says what was applied. A device MSCCLPP_IB_HCA excludes, or a service level
// out of range, fails mscclppConnect with an error naming the variable.
func TestIBFabricSettings(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "ib-fabric" {
		ibFabricChild(t)
		return
	}
	t.Parallel()
	env := append(ibDoubleEnv(t), "MSCCLPP_IBV_DOUBLE_LINK=eth", "MSCCLPP_IBV_DOUBLE_GIDS=3",
		"MSCCLPP_IB_SL=5", "MSCCLPP_IB_TC=106", "MSCCLPP_IB_GID_INDEX=2", "MSCCLPP_IB_HCA==double_0:1",
		"MSCCLPP_IB_TIMEOUT=22", "MSCCLPP_IB_RETRY_CNT=3", "MSCCLPP_DEBUG=INFO", "MSCCLPP_DEBUG_SUBSYS=ALL")
	out := runFakeChildWith(t, buildDevThreadsDriver(t), "TestIBFabricSettings", "ib-fabric", env...)
	if !strings.Contains(string(out), "IB device double_0 port 1: GID index 2, service level 5, traffic class 106, relaxed ordering on data buffers true") {
		t.Errorf("no INFO line with the fabric settings applied")
	}
	if t.Failed() {
		t.Logf("child:\n%s", out)
	}
}

func ibFabricChild(t *testing.T) {
	var bufs [2]uint64
	fakeDeviceBuffers(t, bufs[:], make([]byte, cuda.BlockAlign))
	dev := "double_0"
	comms := twoRanksLaunched(t, func(r int, c *Comm) error {
		return c.Connect(1-r, 0, engine.DevPtr(bufs[r]), cuda.BlockAlign, transportIB, &dev, true)
	})
	for n := uint64(0); n < 2; n++ {
		a := verbs.TestDoubleQuery("ibv_double_qp_attr", n)
		sl, tc, sgid, port, timeout, retry := a&0xff, a>>8&0xff, a>>16&0xff, a>>24&0xff, a>>32&0xff, a>>40&0xff
		if a < 0 || sl != 5 || tc != 106 || sgid != 2 || port != 1 || timeout != 22 || retry != 3 {
			t.Errorf("QP %d's address: %#x (service level %d, traffic class %d, GID index %d, port %d, ACK timeout %d, retry count %d), want 5, 106, 2, 1, 22, 3", n, a, sl, tc, sgid, port, timeout, retry)
		}
	}
	for r, c := range comms {
		data := verbs.TestDoubleQuery("ibv_double_mr_access_of", bufs[r])
		sig := verbs.TestDoubleQuery("ibv_double_mr_access_of", uint64(uintptr(c.host.DevConns.LocalEpoch(0))))
		if data < 0 || data&ibRelaxedOrdering == 0 {
			t.Errorf("rank %d's data buffer registered with access %#x, want relaxed ordering", r, data)
		}
		if sig < 0 || sig&ibRelaxedOrdering != 0 {
			t.Errorf("rank %d's signal slot registered with access %#x, want it without relaxed ordering", r, sig)
		}
	}
	devThreadsDone(t, comms)
	for _, c := range []struct{ name, value, want string }{
		{"MSCCLPP_IB_HCA", "^double", `excluded by MSCCLPP_IB_HCA="^double"`},
		{"MSCCLPP_IB_SL", "16", `MSCCLPP_IB_SL="16": want an integer from 0 to 15`},
		{"MSCCLPP_IB_TIMEOUT", "32", `MSCCLPP_IB_TIMEOUT="32": want an integer from 1 to 31`},
		{"MSCCLPP_IB_TIMEOUT", "0", `MSCCLPP_IB_TIMEOUT="0": want an integer from 1 to 31`},
		{"MSCCLPP_IB_RETRY_CNT", "8", `MSCCLPP_IB_RETRY_CNT="8": want an integer from 0 to 7`},
	} {
		t.Setenv(c.name, c.value)
		errs := connectBoth(t, func(r int, cm *Comm) error {
			return cm.Connect(1-r, 0, engine.DevPtr(bufs[r]), cuda.BlockAlign, transportIB, &dev, true)
		})
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), c.want) || status.CodeOf(err) == status.Success {
				t.Errorf("%s=%s: rank %d's Connect: %v, want an error saying %q", c.name, c.value, r, err, c.want)
			}
		}
		os.Unsetenv(c.name)
	}
}

// connectBoth forms a 2-rank communicator in this process, runs connect on each rank and
// destroys both; it returns connect's errors.
func connectBoth(t *testing.T, connect func(r int, c *Comm) error) []error {
	t.Helper()
	addr := freeAddr(t)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c, err := InitRank(2, addr, r)
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
				return
			}
			errs[r] = connect(r, c)
			if err := c.Destroy(); err != nil {
				t.Errorf("rank %d: Destroy: %v", r, err)
			}
		})
	}
	wg.Wait()
	return errs
}

// TestIBUnorderedGPUNoRelaxedOrdering: on a GPU whose kernels may see GPUDirect RDMA writes out
// of order (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING below OWNER, before sm_80), device
// data buffers are registered without relaxed ordering, so a signal does not overtake its data;
// an INFO line says so.
func TestIBUnorderedGPUNoRelaxedOrdering(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "ib-unordered" {
		var bufs [2]uint64
		fakeDeviceBuffers(t, bufs[:], make([]byte, cuda.BlockAlign))
		cuda.TestDriverCall("fakeRdmaOrdering", "0")
		dev := "double_0"
		comms := twoRanksLaunched(t, func(r int, c *Comm) error {
			return c.Connect(1-r, 0, engine.DevPtr(bufs[r]), cuda.BlockAlign, transportIB, &dev, true)
		})
		for r := range comms {
			if data := verbs.TestDoubleQuery("ibv_double_mr_access_of", bufs[r]); data < 0 || data&ibRelaxedOrdering != 0 {
				t.Errorf("rank %d's data buffer registered with access %#x, want it without relaxed ordering", r, data)
			}
		}
		devThreadsDone(t, comms)
		return
	}
	t.Parallel()
	env := append(ibDoubleEnv(t), "MSCCLPP_DEBUG=INFO", "MSCCLPP_DEBUG_SUBSYS=ALL")
	out := runFakeChildWith(t, buildDevThreadsDriver(t), "TestIBUnorderedGPUNoRelaxedOrdering", "ib-unordered", env...)
	if !strings.Contains(string(out), "below OWNER, 100: before sm_80): data buffers are registered without relaxed ordering") {
		t.Errorf("no INFO line saying relaxed ordering is off for this GPU:\n%s", out)
	}
}
