//go:build mscclpp_testhooks

package cuda

// A harness for the tests of this package and of those that run against the stand-in
// driver of cuda/testdata (cgo cannot be used in _test.go files): calls into a loaded
// test library and its memory. No engine types: impl/p2p's harness wraps its ops.

/*
#include <dlfcn.h>
#include <stdlib.h>
#include "calls.h"

static int harnessCall(const char* lib, const char* sym, const char* arg)
{
  void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) return -1000;
  int (*f)(const char*) = (int (*)(const char*))dlsym(h, sym);
  if (f == NULL) return -1001;
  return f(arg);
}

// Device memory through the test driver's fakeRead / fakeWrite (it is not host-addressable).
static int harnessMem(const char* lib, const char* sym, uint64_t p, void* buf, size_t n)
{
  void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) return -1000;
  int (*f)(uint64_t, void*, size_t) = (int (*)(uint64_t, void*, size_t))dlsym(h, sym);
  if (f == NULL) return -1001;
  return f(p, buf, n);
}

// cudaMallocAsync as an application's runtime calls it: cuMemAllocAsync of the loaded driver.
static int harnessMallocAsync(const char* lib, size_t n, uint64_t* p)
{
  void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) return -1000;
  int (*f)(uint64_t*, size_t, void*) = (int (*)(uint64_t*, size_t, void*))dlsym(h, "cuMemAllocAsync");
  if (f == NULL) return -1001;
  return f(p, n, NULL);
}

// Memory mapped with the VMM API as an application maps it: cuMemAddressReserve, cuMemCreate
// and cuMemMap of the loaded driver (n a multiple of 2 MiB; the properties are not looked at).
static int harnessVMM(const char* lib, size_t n, uint64_t* p)
{
  void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) return -1000;
  int (*reserve)(uint64_t*, size_t, size_t, uint64_t, unsigned long long) =
      (int (*)(uint64_t*, size_t, size_t, uint64_t, unsigned long long))dlsym(h, "cuMemAddressReserve");
  int (*create)(unsigned long long*, size_t, const void*, unsigned long long) =
      (int (*)(unsigned long long*, size_t, const void*, unsigned long long))dlsym(h, "cuMemCreate");
  int (*map)(uint64_t, size_t, size_t, unsigned long long, unsigned long long) =
      (int (*)(uint64_t, size_t, size_t, unsigned long long, unsigned long long))dlsym(h, "cuMemMap");
  if (reserve == NULL || create == NULL || map == NULL) return -1001;
  char prop[64] = {0};
  unsigned long long mem = 0;
  int rc = reserve(p, n, 0, 0, 0);
  if (rc == 0) rc = create(&mem, n, prop, 0);
  if (rc == 0) rc = map(*p, n, 0, mem, 0);
  return rc;
}

static int harnessStream(const cuwApi* a, cuwContext ctx, uintptr_t* out)
{
  cuwContext prev = NULL;
  a->ctxGetCurrent(&prev);
  a->ctxSetCurrent(ctx);
  cuwStream s = NULL;
  int rc = a->streamCreate(&s, CUW_STREAM_NON_BLOCKING);
  a->ctxSetCurrent(prev);
  *out = (uintptr_t)s;
  return rc;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"
)

// harnessCall calls int sym(const char* arg) in the already loaded library lib, on the calling thread.
func harnessCall(lib, sym, arg string) int {
	cl, cs, ca := C.CString(lib), C.CString(sym), C.CString(arg)
	defer C.free(unsafe.Pointer(cl))
	defer C.free(unsafe.Pointer(cs))
	defer C.free(unsafe.Pointer(ca))
	return int(C.harnessCall(cl, cs, ca))
}

// harnessRead returns n bytes at device (or host) address p through lib's fakeRead.
func harnessRead(lib string, p uint64, n int) ([]byte, error) {
	b := make([]byte, n)
	if n == 0 {
		return b, nil
	}
	cl, cs := C.CString(lib), C.CString("fakeRead")
	defer C.free(unsafe.Pointer(cl))
	defer C.free(unsafe.Pointer(cs))
	if rc := C.harnessMem(cl, cs, C.uint64_t(p), unsafe.Pointer(&b[0]), C.size_t(n)); rc != 0 {
		return nil, fmt.Errorf("fakeRead(%#x, %d) = %d", p, n, int(rc))
	}
	return b, nil
}

// harnessWrite writes b at device (or host) address p through lib's fakeWrite.
func harnessWrite(lib string, p uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	cl, cs := C.CString(lib), C.CString("fakeWrite")
	defer C.free(unsafe.Pointer(cl))
	defer C.free(unsafe.Pointer(cs))
	if rc := C.harnessMem(cl, cs, C.uint64_t(p), unsafe.Pointer(&b[0]), C.size_t(len(b))); rc != 0 {
		return fmt.Errorf("fakeWrite(%#x, %d) = %d", p, len(b), int(rc))
	}
	return nil
}

// TestDriverCall calls int sym(const char* arg) in the loaded driver library (MSCCLPP_CUDA_LIBRARY):
// for tests of other packages that run against the stand-in driver of cuda/testdata.
func TestDriverCall(sym, arg string) int { return harnessCall(libraryName(), sym, arg) }

// TestDriverRead reads n bytes of (device) memory through the stand-in driver's fakeRead.
func TestDriverRead(p uint64, n int) ([]byte, error) { return harnessRead(libraryName(), p, n) }

// policyMode is the calling thread's memory policy mode (get_mempolicy), or -1.
func policyMode() int { return int(C.cuwPolicyMode()) }

// TestDriverWrite writes b to (device) memory through the stand-in driver's fakeWrite.
func TestDriverWrite(p uint64, b []byte) error { return harnessWrite(libraryName(), p, b) }

// TestLoadDevice loads the stand-in driver at lib (apart from the process's driver, which
// MSCCLPP_CUDA_LIBRARY names) and returns the device current on a thread whose fake context
// is ctx ("0", "1").
func TestLoadDevice(lib, ctx string) (dev Device, err error) {
	l := newCudaLoader(lib)
	if err := l.load(); err != nil {
		return Device{}, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		harnessCall(lib, "fakeSetCurrent", ctx)
		dev, err = probe(l)
		harnessCall(lib, "fakeSetCurrent", "0")
	}()
	<-done
	return dev, err
}

// TestLibCall calls int sym(const char* arg) in the loaded library lib, on the calling thread.
func TestLibCall(lib, sym, arg string) int { return harnessCall(lib, sym, arg) }

// TestLibRead reads n bytes of (device) memory through lib's fakeRead.
func TestLibRead(lib string, p uint64, n int) ([]byte, error) { return harnessRead(lib, p, n) }

// TestLibWrite writes b to (device) memory through lib's fakeWrite.
func TestLibWrite(lib string, p uint64, b []byte) error { return harnessWrite(lib, p, b) }

// TestPolicyMode is the calling thread's memory policy mode (get_mempolicy), or -1.
func TestPolicyMode() int { return policyMode() }

// TestNewStream creates a non-blocking stream in dev's context (never freed: for tests), as an
// application's cudaStreamCreate would.
func TestNewStream(dev Device) (uintptr, error) {
	var s C.uintptr_t
	if rc := C.harnessStream(dev.api, dev.ctx(), &s); rc != 0 {
		return 0, newError(dev.api, "cuStreamCreate", int(rc))
	}
	return uintptr(s), nil
}

// TestMallocAsync allocates n bytes of dev's memory pool as cudaMallocAsync does (cuMemAllocAsync
// of the loaded driver, in dev's context).
func TestMallocAsync(dev Device, n uint64) (uint64, error) {
	return harnessAlloc(dev, n, false)
}

// TestVMMAlloc maps n bytes (a multiple of 2 MiB) of dev's memory with the VMM API
// (cuMemAddressReserve, cuMemCreate, cuMemMap), in dev's context.
func TestVMMAlloc(dev Device, n uint64) (uint64, error) { return harnessAlloc(dev, n, true) }

// harnessAlloc allocates n bytes in dev's context through cuMemAllocAsync, or the VMM API (vmm).
func harnessAlloc(dev Device, n uint64, vmm bool) (uint64, error) {
	cl := C.CString(dev.lib)
	defer C.free(unsafe.Pointer(cl))
	var (
		p    C.uint64_t
		rc   C.int
		prev C.cuwContext
		call *C.char
	)
	if rc = C.cuwPush(dev.api, dev.ctx(), &prev, &call); rc != 0 {
		return 0, newError(dev.api, C.GoString(call), int(rc))
	}
	name := "cuMemAllocAsync"
	if vmm {
		rc, name = C.harnessVMM(cl, C.size_t(n), &p), "cuMemAddressReserve/cuMemCreate/cuMemMap"
	} else {
		rc = C.harnessMallocAsync(cl, C.size_t(n), &p)
	}
	C.cuwPop(dev.api, dev.ctx(), prev)
	if rc != 0 {
		return 0, newError(dev.api, name, int(rc))
	}
	return uint64(p), nil
}

// testExport asks the driver for a dma-buf of exactly [start, start+n) (no rounding), closing it.
func (d Device) testExport(start, n uint64) error {
	b, err := dmabufAPI(d.lib)
	if err != nil {
		return err
	}
	var (
		fd   C.int
		call *C.char
	)
	if err := d.fail(C.cuwDmabufFd(b, d.api, d.ctx(), C.cuwDevicePtr(start), C.size_t(n), &fd, &call), call); err != nil {
		return err
	}
	return syscall.Close(int(fd))
}
