package impl

import (
	"sync"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/cudaproxy"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// SharedGPUMsg is the message (a format: the two ranks, the GPU's ordinal and PCI bus id) of
// the mscclppInvalidUsage error mscclppConnect returns when a rank of this process connects over
// a buffer of a GPU another rank of the same communicator in this process uses already.
const SharedGPUMsg = "ranks %d and %d of this process both use GPU %d (%s): two ranks of one process on one GPU " +
	"can deadlock (they share its primary context: a device-wide or legacy-stream synchronisation of one waits " +
	"behind the other's kernel, which waits for a signal the first never sends); give each rank its own GPU, as NCCL requires"

// gpuUsers records, per communicator instance and GPU, which rank of this process uses the GPU
// (the device of a buffer it connected over): the ranks of one process are all known here.
var gpuUsers = struct {
	sync.Mutex
	m map[gpuUse]int
}{m: map[gpuUse]int{}}

type gpuUse struct {
	instance string
	ordinal  int
}

// claimGPU records that this rank uses the GPU of buffer buff (nothing for host memory or no
// buffer), refusing it when another rank of this communicator in this process uses it already.
func (c *Comm) claimGPU(buff unsafe.Pointer) error {
	dev, ok := cudaproxy.DeviceOf(buff)
	if !ok {
		return nil
	}
	k := gpuUse{c.host.Instance, dev.Ordinal}
	gpuUsers.Lock()
	defer gpuUsers.Unlock()
	if r, used := gpuUsers.m[k]; used && r != c.rank {
		lo, hi := min(r, c.rank), max(r, c.rank)
		return status.Errorf(status.InvalidUsage, SharedGPUMsg, lo, hi, dev.Ordinal, dev.BusID)
	}
	gpuUsers.m[k] = c.rank
	return nil
}

// releaseGPUs forgets the GPUs this rank used (its communicator is destroyed).
func (c *Comm) releaseGPUs() {
	gpuUsers.Lock()
	defer gpuUsers.Unlock()
	for k, r := range gpuUsers.m {
		if k.instance == c.host.Instance && r == c.rank {
			delete(gpuUsers.m, k)
		}
	}
}
