package p2p

import (
	"fmt"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/shm"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// hostMode says whether P2P runs in host mode: MSCCLPP_DEVICE=host, or (auto) the application
// has not loaded the CUDA driver or the driver does not initialise. A program written for GPUs
// then runs unchanged on a machine without one, its P2P connections carried like SHM.
func (c *p2p) hostMode() bool {
	switch c.policy {
	case deviceHost:
		return true
	case deviceAuto:
		return !cuda.InUse() || cuda.Init() != nil
	}
	return false
}

// enterHost makes P2P carry host memory through an SHM transport of its own.
func (c *p2p) enterHost() error {
	tr, err := shm.Entry.New(c.h)
	if err != nil {
		return fmt.Errorf("P2P in host mode: %w", err)
	}
	c.host = tr
	logx.Infof(logx.Init|logx.P2P, "rank %d: P2P in host mode: connections carry host memory as SHM does (no CUDA driver in use, or MSCCLPP_DEVICE=host)", c.h.Rank)
	return nil
}

// deviceMemory refuses a buffer that is not device memory in CUDA mode (CUDA IPC shares device
// memory only); nil is fine (a connection without a buffer).
func (c *p2p) deviceMemory(p unsafe.Pointer) error {
	if p == nil {
		return nil
	}
	if _, err := cuda.ProbePointer(uint64(uintptr(p))); err != nil {
		return status.Errorf(status.InvalidUsage, "P2P in CUDA mode needs device memory, and %p is not (%v): host memory goes over P2P only in host mode (MSCCLPP_DEVICE=host), or over SHM", p, err)
	}
	return nil
}
