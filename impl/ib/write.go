package ib

// mscclppRegisteredBufferWrite over IB: the source registered for the NIC (device memory through
// a dma-buf where the driver offers one, as connection buffers are, and kept in a cache keyed by
// the allocation), after the application's stream has finished writing it.

import (
	"fmt"
	"unsafe"

	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/cudaproxy"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// maxCachedSources bounds the source MRs kept: beyond it the oldest is deregistered.
const maxCachedSources = 64

// srcKey names a cached source MR: the device it is registered with and the driver's id of the
// allocation (never reused in a process: a buffer freed and allocated again at the same address
// is another allocation, and misses).
type srcKey struct {
	dev *verbs.Context
	id  uint64
}

// srcMR is a whole device allocation registered as a write source.
type srcMR struct {
	mr   *verbs.MR
	base uint64
}

// srcCache holds the source MRs of device memory until the communicator is destroyed.
type srcCache struct {
	m     map[srcKey]srcMR
	order []srcKey // oldest first
}

func (s *srcCache) get(k srcKey) (srcMR, bool) {
	e, ok := s.m[k]
	return e, ok
}

func (s *srcCache) put(k srcKey, e srcMR) {
	if s.m == nil {
		s.m = map[srcKey]srcMR{}
	}
	if len(s.order) >= maxCachedSources {
		old := s.order[0]
		s.order = s.order[1:]
		s.m[old].mr.Close()
		delete(s.m, old)
	}
	s.m[k] = e
	s.order = append(s.order, k)
}

// close deregisters every cached MR (before the devices close).
func (s *srcCache) close() {
	for _, e := range s.m {
		e.mr.Close()
	}
	s.m, s.order = nil, nil
}

// Write RDMA-writes src to offset off of the peer's registration on connection idx's QP and waits
// until the write completed (mscclppRegisteredBufferWrite). What stream still has to write into
// the source is finished first: the NIC reads it as the write is posted.
func (t *ibt) Write(idx int, rec engine.RegRecord, off uint64, src unsafe.Pointer, size uint64, stream uintptr) error {
	c := t.conns[idx]
	if c == nil || c.state == nil {
		return status.Errorf(status.InvalidUsage, "IB connection %d is not set up", idx)
	}
	if off > rec.Size() || size > rec.Size()-off {
		return status.Errorf(status.InvalidArgument, "write of %d bytes at offset %d exceeds the peer's registered %d bytes", size, off, rec.Size())
	}
	mr, loff, release, err := t.sourceMR(c.dev, src, size, stream)
	if err != nil {
		return fmt.Errorf("IB registration of the source (%d bytes): %w", size, err)
	}
	defer release()
	if err := c.qp.Write(mr, loff, verbs.MRInfo{Addr: rec.Addr(), Size: rec.Size(), Rkey: rec.Key()}, off, size, true); err != nil {
		return err
	}
	return c.qp.Flush(t.h.Timeout)
}

// sourceMR returns an MR holding [src, src+size) on device x, src's offset in it, and what to do
// once the write completed. Device memory: stream synchronized, its whole allocation registered
// once (cached). Host memory: registered for the call only (pages freed and mapped again at the
// same address would leave a cached MR on the old ones); stream synchronized in CUDA mode.
func (t *ibt) sourceMR(x *verbs.Context, src unsafe.Pointer, size uint64, stream uintptr) (*verbs.MR, uint64, func(), error) {
	ptr := uint64(uintptr(src))
	if dev, ok := cudaproxy.DeviceOf(src); ok {
		if err := dev.StreamSync(stream); err != nil {
			return nil, 0, nil, fmt.Errorf("waiting for stream %#x before the NIC reads the source: %w", stream, err)
		}
		id, base, n, err := dev.BufferID(ptr)
		if err != nil {
			return nil, 0, nil, err
		}
		if n < size || ptr-base > n-size {
			return nil, 0, nil, status.Errorf(status.InvalidArgument, "source %#x of %d bytes leaves its %d-byte device allocation", ptr, size, n)
		}
		k := srcKey{x, id}
		e, ok := t.srcs.get(k)
		if !ok {
			mr, err := t.registerDev(x, dev, base, n, true)
			if err != nil {
				return nil, 0, nil, err
			}
			e = srcMR{mr: mr, base: base}
			t.srcs.put(k, e)
		}
		return e.mr, ptr - e.base, func() {}, nil
	}
	if pxs := t.cu.Proxies(); stream != 0 && len(pxs) > 0 {
		if err := pxs[0].Dev.StreamSync(stream); err != nil {
			return nil, 0, nil, fmt.Errorf("waiting for stream %#x before the NIC reads the source: %w", stream, err)
		}
	}
	mr, err := x.RegisterMRAccess(ptr, size, true)
	if err != nil {
		return nil, 0, nil, err
	}
	return mr, 0, func() { mr.Close() }, nil
}
