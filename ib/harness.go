//go:build mscclpp_testhooks

package ib

// A harness for this package's tests (cgo cannot be used in _test.go files): counters the
// libibverbs test double exports.

/*
#include <dlfcn.h>
#include <stdlib.h>

static long long harnessCounter(const char* lib, const char* sym)
{
  void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) return -1;
  unsigned long long (*f)(void) = (unsigned long long (*)(void))dlsym(h, sym);
  return f == NULL ? -2 : (long long)f();
}

static long long harnessQuery(const char* lib, const char* sym, unsigned long long arg)
{
  void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) return -1;
  unsigned long long (*f)(unsigned long long) = (unsigned long long (*)(unsigned long long))dlsym(h, sym);
  return f == NULL ? -2 : (long long)f(arg);
}
*/
import "C"

import (
	"os"
	"unsafe"
)

// doubleCounter calls the loaded library lib's counter sym (a uint64_t (*)(void) of the test
// double); -1: lib is not loaded, -2: it has no such counter.
func doubleCounter(lib, sym string) int64 {
	cl, cs := C.CString(lib), C.CString(sym)
	defer C.free(unsafe.Pointer(cl))
	defer C.free(unsafe.Pointer(cs))
	return int64(C.harnessCounter(cl, cs))
}

// TestDoubleCounter calls the counter sym of the libibverbs test double loaded as
// $MSCCLPP_IBV_SO: for tests of other packages; -1: not loaded, -2: no such counter.
func TestDoubleCounter(sym string) int64 { return doubleCounter(os.Getenv(EnvLibrary), sym) }

// TestDoubleQuery calls the query sym(arg) of the libibverbs test double loaded as $MSCCLPP_IBV_SO
// (a uint64_t (*)(uint64_t)); -1: not loaded (or the double's "none"), -2: no such query.
func TestDoubleQuery(sym string, arg uint64) int64 {
	cl, cs := C.CString(os.Getenv(EnvLibrary)), C.CString(sym)
	defer C.free(unsafe.Pointer(cl))
	defer C.free(unsafe.Pointer(cs))
	return int64(C.harnessQuery(cl, cs, C.ulonglong(arg)))
}
