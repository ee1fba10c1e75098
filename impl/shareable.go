package impl

import (
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// refuseUnshareable refuses a buffer handed to call (mscclppConnect, mscclppRegisterBuffer) that
// is device memory no peer can reach (cudaMallocAsync, VMM: cuda.CheckShareable), with an INFO
// line, before anything is declared or exchanged.
func (c *Comm) refuseUnshareable(call string, buff unsafe.Pointer, size uint64) error {
	if buff == nil || !cuda.InUse() {
		return nil
	}
	err := cuda.CheckShareable(uint64(uintptr(buff)), size)
	if err != nil {
		logx.Infof(logx.Init|logx.Net, "rank %d: %s: buffer %p refused: %v", c.rank, call, buff, err)
	}
	return err
}
