package ib

// CUDA mode: a connection whose buffer is device memory is served by a CUDA-mode proxy
// (impl/cudaproxy: FIFO, head, tail and epochs where kernels reach them, as for P2P and
// Ethernet), and its device memory is registered for GPUDirect RDMA, so the NIC reads the
// source and writes the peer's buffer and then its device epoch (same QP, in order).

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/cuda"
	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/cudaproxy"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// Mode says whether device buffers put the transport in CUDA mode.
func (t *ibt) Mode() string { return t.cu.Mode() }

// register registers b with device x: host memory with ibv_reg_mr, device memory for GPUDirect
// RDMA; data (not a signal slot) with relaxed ordering where the library offers it.
func (t *ibt) register(x *verbs.Context, b transport.Buffer, data bool) (*verbs.MR, error) {
	if dev, ok := cudaproxy.DeviceOf(b.Ptr); ok {
		return t.registerDev(x, dev, uint64(uintptr(b.Ptr)), b.Size, data)
	}
	return x.RegisterMRAccess(uint64(uintptr(b.Ptr)), b.Size, data)
}

// registerDev is registerDevice, with an INFO line per registration saying which way worked
// (and why not a dma-buf). Data is registered with relaxed ordering only where dev's kernels
// see RDMA writes in order.
func (t *ibt) registerDev(x *verbs.Context, dev cuda.Device, ptr, size uint64, data bool) (*verbs.MR, error) {
	mr, how, why, err := registerDevice(t.lib, x, dev, ptr, size, data && t.ordered(dev))
	if err == nil {
		if why != "" {
			how += " (" + why + ")"
		}
		logx.Infof(logx.Net, "rank %d: IB: device memory %#x (%d bytes) of device %d %s for GPUDirect RDMA", t.h.Rank, ptr, size, dev.Ordinal, how)
	}
	return mr, err
}

// ordered reports whether dev's kernels see GPUDirect RDMA writes into its memory in the order
// they arrived (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, OWNER or better: sm_80 and
// later with CUDA 11.3+), said once per device at INFO. Where they may not, data is registered
// without relaxed ordering, so that a signal written after its data does not overtake it on PCIe.
func (t *ibt) ordered(dev cuda.Device) bool {
	if ok, seen := t.order[dev.Ordinal]; seen {
		return ok
	}
	ok, v, err := dev.RDMAWritesOrdered()
	if t.order == nil {
		t.order = map[int]bool{}
	}
	t.order[dev.Ordinal] = ok
	switch {
	case err != nil:
		logx.Infof(logx.Net, "rank %d: IB: device %d does not say whether its kernels see GPUDirect RDMA writes in order (%v; CUDA 11.3+ and sm_80+ do): data buffers are registered without relaxed ordering", t.h.Rank, dev.Ordinal, err)
	case !ok:
		logx.Infof(logx.Net, "rank %d: IB: device %d orders GPUDirect RDMA writes for its kernels only at level %d (below OWNER, 100: before sm_80): data buffers are registered without relaxed ordering", t.h.Rank, dev.Ordinal, v)
	default:
		logx.Infof(logx.Net, "rank %d: IB: device %d orders GPUDirect RDMA writes for its kernels (level %d): a signal is seen after its data", t.h.Rank, dev.Ordinal, v)
	}
	return ok
}

// registerDevice registers device memory [ptr, ptr+size) of dev for GPUDirect RDMA: through a
// dma-buf (cuMemGetHandleForAddressRange, ibv_reg_dmabuf_mr) where the driver and libibverbs
// offer it, else ibv_reg_mr on the device pointer (which works when nvidia-peermem is loaded).
// Where neither works the error names what is missing; nothing is staged through host memory.
// how says which way worked, why (when not through a dma-buf) why the dma-buf was not used.
// relaxed asks for relaxed ordering (data buffers; never a signal slot) where the device has it.
func registerDevice(lib *verbs.Lib, x *verbs.Context, dev cuda.Device, ptr, size uint64, relaxed bool) (mr *verbs.MR, how, why string, err error) {
	var whys []string
	if err := lib.HasDmabuf(); err != nil {
		whys = append(whys, "no dma-buf: this libibverbs lacks ibv_reg_dmabuf_mr (rdma-core 34 or later)")
	} else if fd, off, err := dev.DmabufFD(ptr, size); err != nil {
		if status.CodeOf(err) == status.InvalidUsage { // the buffer leaves its allocation
			whys = append(whys, fmt.Sprintf("no dma-buf: %v", err))
		} else {
			whys = append(whys, fmt.Sprintf("no dma-buf: the CUDA driver exports none (%v; needs CUDA 11.7+ and an open kernel module)", err))
		}
	} else {
		mr, err := x.RegisterDmabufMRAccess(fd, off, size, ptr, relaxed)
		unix.Close(fd)
		if err == nil {
			return mr, "registered through a dma-buf", "", nil
		}
		whys = append(whys, fmt.Sprintf("dma-buf registration refused (%v; needs Linux 5.12+ and a provider with dma-buf support)", err))
	}
	mr, err = x.RegisterMRAccess(ptr, size, relaxed)
	if err == nil {
		return mr, "registered with ibv_reg_mr (nvidia-peermem)", strings.Join(whys, "; "), nil
	}
	whys = append(whys, fmt.Sprintf("ibv_reg_mr on the device pointer failed (%v): is nvidia-peermem loaded?", err))
	return nil, "", "", status.Errorf(status.SystemError, "IB transport: device memory %#x (%d bytes) cannot be registered for GPUDirect RDMA: %s",
		ptr, size, strings.Join(whys, "; "))
}

// stopCUDA waits for the CUDA-mode proxies' copies (their FIFO tail publications).
func (t *ibt) stopCUDA() error { return t.cu.Sync() }
