// Package cuda is the CUDA provider of libmscclpp: it loads the driver
// (libcuda.so.1) and NVML (libnvidia-ml.so.1) at run time through impl/dynlib
// (one dlopen each), wraps the few driver calls connection setup needs, and the driver
// side of a CUDA-mode proxy's state (proxystate.c: streams, tail words; the
// transports hold their engine ops, impl/cudaproxy the proxy). Building it needs no CUDA
// toolkit: the declarations it uses are written out in cuapi.h.
//
// Every wrapper that takes a Device makes the device's context current for
// the duration of the call and restores the calling thread's own context
// afterwards, so it may run on any goroutine, including on an application's
// thread inside an export.
package cuda

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "calls.h"

static const cuwSym* cudaSyms(void) { return cuwCudaSyms; }
static const cuwSym* nvmlSyms(void) { return cuwNvmlSyms; }
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/dynlib"
	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// DefaultLibrary is the driver library Load opens unless MSCCLPP_CUDA_LIBRARY names another.
const DefaultLibrary = "libcuda.so.1"

// loader is one vendor library (the driver or NVML) loaded through impl/dynlib.
type loader struct{ *dynlib.Lib }

func newCudaLoader(name string) *loader {
	return &loader{dynlib.New(name, unsafe.Pointer(C.cudaSyms()), C.sizeof_cuwApi, status.UnhandledCudaError)}
}

func newNvmlLoader(name string) *loader {
	return &loader{dynlib.New(name, unsafe.Pointer(C.nvmlSyms()), C.sizeof_cuwNvml, status.UnhandledCudaError)}
}

func (l *loader) load() error { return l.Load() }

func (l *loader) api() *C.cuwApi { return (*C.cuwApi)(l.Table()) }

var defaultCuda struct {
	once sync.Once
	l    *loader
}

// driver is the process's libcuda loader, named by MSCCLPP_CUDA_LIBRARY when set.
func driver() *loader {
	defaultCuda.once.Do(func() { defaultCuda.l = newCudaLoader(libraryName()) })
	return defaultCuda.l
}

// libraryName is MSCCLPP_CUDA_LIBRARY, else DefaultLibrary.
func libraryName() string {
	if name := env.CudaLibrary.Get(); name != "" {
		return name
	}
	return DefaultLibrary
}

// Load opens the driver library (MSCCLPP_CUDA_LIBRARY, else libcuda.so.1) once and resolves every entry point this package uses; later calls return the first call's result.
func Load() error { return driver().load() }

// Device is a GPU as the calling application selected it: the context current on its thread.
type Device struct {
	Ordinal int            // the CUDA device ordinal (CUdevice)
	Ctx     unsafe.Pointer // its CUcontext (the primary context after cudaSetDevice)
	BusID   string         // its PCI bus id as the driver prints it, e.g. "0000:3B:00.0"
	api     *C.cuwApi
	lib     string // the driver library it was found through (its optional entry points come from there)
}

// Init loads the driver and initialises it (cuInit): CUDA is usable in this process, whether or not a context exists yet.
func Init() error {
	l := driver()
	if err := l.load(); err != nil {
		return err
	}
	if rc := C.cuwInit(l.api()); rc != 0 {
		return newError(l.api(), "cuInit", int(rc))
	}
	return nil
}

// Probe loads the driver, initialises it and returns the device of the context current on the calling thread; the error says in one line why there is none (call it on an export's own goroutine, which runs on the application's thread).
func Probe() (Device, error) { return probe(driver()) }

func probe(l *loader) (Device, error) {
	if err := l.load(); err != nil {
		return Device{}, err
	}
	var (
		ord  C.int
		ctx  C.cuwContext
		bus  [64]C.char
		call *C.char
	)
	if rc := C.cuwProbe(l.api(), &ord, &ctx, &bus[0], C.int(len(bus)), &call); rc != 0 {
		return Device{}, newError(l.api(), C.GoString(call), int(rc))
	}
	if ctx == nil {
		return Device{}, status.Errorf(status.UnhandledCudaError,
			"no current CUDA context on the calling thread (call cudaSetDevice first)")
	}
	return Device{Ordinal: int(ord), Ctx: unsafe.Pointer(ctx), BusID: C.GoString(&bus[0]), api: l.api(), lib: l.Name()}, nil
}

// ProbePointer loads the driver, initialises it and returns the device whose context allocated the device memory at ptr (CU_POINTER_ATTRIBUTE_CONTEXT; pinned host memory, which has a context too, is refused: CU_POINTER_ATTRIBUTE_MEMORY_TYPE): how to find the GPU when the calling thread has no current context yet (CUDA 11 runtimes create it lazily).
func ProbePointer(ptr uint64) (Device, error) { return probePointer(driver(), ptr) }

func probePointer(l *loader, ptr uint64) (Device, error) {
	if err := l.load(); err != nil {
		return Device{}, err
	}
	var (
		ord  C.int
		ctx  C.cuwContext
		bus  [64]C.char
		typ  C.int
		call *C.char
	)
	if rc := C.cuwProbePointer(l.api(), C.cuwDevicePtr(ptr), &ord, &ctx, &bus[0], C.int(len(bus)), &typ, &call); rc != 0 {
		return Device{}, newError(l.api(), C.GoString(call), int(rc))
	}
	if typ != 0 && typ != C.CUW_MEMORYTYPE_DEVICE {
		return Device{}, status.Errorf(status.InvalidUsage, "the buffer at %#x is pinned host memory (CUDA memory type %d), not device memory", ptr, int(typ))
	}
	if ctx == nil {
		return Device{}, status.Errorf(status.UnhandledCudaError, "the buffer at %#x belongs to no CUDA context", ptr)
	}
	return Device{Ordinal: int(ord), Ctx: unsafe.Pointer(ctx), BusID: C.GoString(&bus[0]), api: l.api(), lib: l.Name()}, nil
}

// PageNode returns the NUMA node of the memory page at p, or -1 where the kernel does not say.
func PageNode(p unsafe.Pointer) int { return int(C.cuwPageNode(p)) }

func (d Device) check() error {
	if d.api == nil || d.Ctx == nil {
		return status.Errorf(status.InternalError, "cuda: Device not obtained from Probe")
	}
	return nil
}

func (d Device) ctx() C.cuwContext { return C.cuwContext(d.Ctx) }

// fail turns a failed call's result into an error (nil for success).
func (d Device) fail(rc C.int, call *C.char) error {
	if rc == 0 {
		return nil
	}
	return newError(d.api, C.GoString(call), int(rc))
}

// SetCurrent makes ctx the current context of the calling OS thread (lock the goroutine to it first).
func SetCurrent(ctx unsafe.Pointer) error {
	l := driver()
	if err := l.load(); err != nil {
		return err
	}
	if rc := C.cuwSetCurrent(l.api(), C.cuwContext(ctx)); rc != 0 {
		return newError(l.api(), "cuCtxSetCurrent", int(rc))
	}
	return nil
}

// MemAlloc allocates size bytes of device memory and returns its device address.
func (d Device) MemAlloc(size uint64) (uint64, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	var p C.cuwDevicePtr
	var call *C.char
	if err := d.fail(C.cuwMemAlloc(d.api, d.ctx(), C.size_t(size), &p, &call), call); err != nil {
		return 0, err
	}
	logx.Infof(logx.Alloc, "cuMemAlloc: %d bytes of device memory at %#x on device %d", size, uint64(p), d.Ordinal)
	return uint64(p), nil
}

// MemFree frees device memory from MemAlloc.
func (d Device) MemFree(ptr uint64) error {
	if err := d.check(); err != nil {
		return err
	}
	var call *C.char
	logx.Infof(logx.Alloc, "cuMemFree: device memory at %#x on device %d", ptr, d.Ordinal)
	return d.fail(C.cuwMemFree(d.api, d.ctx(), C.cuwDevicePtr(ptr), &call), call)
}

// Memset sets size bytes of device memory at ptr to value and waits until it is done.
func (d Device) Memset(ptr uint64, value byte, size uint64) error {
	if err := d.check(); err != nil {
		return err
	}
	var call *C.char
	return d.fail(C.cuwMemset(d.api, d.ctx(), C.cuwDevicePtr(ptr), C.uchar(value), C.size_t(size), &call), call)
}

// HostAlloc allocates size bytes of pinned host memory, portable and mapped, whose host address is also its device address (unified addressing; an error otherwise).
func (d Device) HostAlloc(size uint64) (unsafe.Pointer, error) {
	p, _, err := d.HostAllocOnNode(size, -1)
	return p, err
}

// HostAllocOnNode is HostAlloc with the pages preferably on NUMA node numaNode (none when negative); placed reports whether the kernel accepted the preference (it falls back silently where NUMA policy is unsupported).
func (d Device) HostAllocOnNode(size uint64, numaNode int) (p unsafe.Pointer, placed bool, err error) {
	if err := d.check(); err != nil {
		return nil, false, err
	}
	var dev C.cuwDevicePtr
	var call *C.char
	var cplaced C.int
	if err := d.fail(C.cuwHostAlloc(d.api, d.ctx(), C.size_t(size), C.int(numaNode), &p, &dev, &cplaced, &call), call); err != nil {
		return nil, false, err
	}
	if uint64(dev) != uint64(uintptr(p)) {
		_ = d.HostFree(p)
		return nil, false, status.Errorf(status.UnhandledCudaError,
			"pinned host memory at %p maps to device address %#x: unified addressing is required", p, uint64(dev))
	}
	logx.Infof(logx.Alloc, "cuMemHostAlloc: %d bytes of pinned host memory at %p for device %d (NUMA node %d requested, placed %v)",
		size, p, d.Ordinal, numaNode, cplaced != 0)
	return p, cplaced != 0, nil
}

// HostFree frees memory from HostAlloc.
func (d Device) HostFree(p unsafe.Pointer) error {
	if err := d.check(); err != nil {
		return err
	}
	var call *C.char
	logx.Infof(logx.Alloc, "cuMemFreeHost: pinned host memory at %p", p)
	return d.fail(C.cuwHostFree(d.api, d.ctx(), p, &call), call)
}

// CopyAsync enqueues a copy of size bytes from src to dst (unified addresses: device or pinned host memory) on stream, a CUstream or cudaStream_t (0: the default stream).
func (d Device) CopyAsync(dst, src, size uint64, stream uintptr) error {
	if err := d.check(); err != nil {
		return err
	}
	var call *C.char
	return d.fail(C.cuwCopyAsync(d.api, d.ctx(), C.cuwDevicePtr(dst), C.cuwDevicePtr(src), C.size_t(size), C.uintptr_t(stream), &call), call)
}

// IpcHandle names a device allocation for other processes (CUipcMemHandle).
type IpcHandle [64]byte

// IpcHandleOf returns the IPC handle of the allocation holding ptr and ptr's offset in it.
func (d Device) IpcHandleOf(ptr uint64) (h IpcHandle, offset uint64, err error) {
	if err := d.check(); err != nil {
		return h, 0, err
	}
	var (
		ch   C.cuwIpcMemHandle
		base C.cuwDevicePtr
		size C.size_t
		call *C.char
	)
	if err := d.fail(C.cuwIpcHandleOf(d.api, d.ctx(), C.cuwDevicePtr(ptr), &ch, &base, &size, &call), call); err != nil {
		return h, 0, err
	}
	copy(h[:], unsafe.Slice((*byte)(unsafe.Pointer(&ch.reserved[0])), len(h)))
	return h, ptr - uint64(base), nil
}

// IpcOpen maps another process's allocation into this context (peer access enabled lazily) and returns its base address here.
func (d Device) IpcOpen(h IpcHandle) (uint64, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	var (
		ch   C.cuwIpcMemHandle
		base C.cuwDevicePtr
		call *C.char
	)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&ch.reserved[0])), len(h)), h[:])
	if err := d.fail(C.cuwIpcOpen(d.api, d.ctx(), &ch, &base, &call), call); err != nil {
		return 0, err
	}
	return uint64(base), nil
}

// AllocSize returns the size of the allocation that starts at base (e.g. one IpcOpen mapped).
func (d Device) AllocSize(base uint64) (uint64, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	var (
		b    C.cuwDevicePtr
		size C.size_t
		call *C.char
	)
	if err := d.fail(C.cuwAddressRange(d.api, d.ctx(), C.cuwDevicePtr(base), &b, &size, &call), call); err != nil {
		return 0, err
	}
	return uint64(size) - (base - uint64(b)), nil
}

// RetainPrimary takes a reference on the device's primary context (cuDevicePrimaryCtxRetain) when
// that is the context the library allocates in (the CUDA runtime's), so that it stays alive while
// the library uses it, whatever the application does with its own references; it reports whether
// it did (a context the application created itself is the application's to keep). ReleasePrimary
// gives the reference back.
func (d Device) RetainPrimary() (bool, error) {
	if err := d.check(); err != nil {
		return false, err
	}
	var (
		retained C.int
		call     *C.char
	)
	err := d.fail(C.cuwPrimaryRetain(d.api, C.cuwDevice(d.Ordinal), d.ctx(), &retained, &call), call)
	return retained != 0, err
}

// ReleasePrimary releases a reference RetainPrimary took (cuDevicePrimaryCtxRelease).
func (d Device) ReleasePrimary() error {
	if err := d.check(); err != nil {
		return err
	}
	var call *C.char
	return d.fail(C.cuwPrimaryRelease(d.api, C.cuwDevice(d.Ordinal), &call), call)
}

// IpcClose unmaps an allocation from IpcOpen.
func (d Device) IpcClose(base uint64) error {
	if err := d.check(); err != nil {
		return err
	}
	var call *C.char
	return d.fail(C.cuwIpcClose(d.api, d.ctx(), C.cuwDevicePtr(base), &call), call)
}
