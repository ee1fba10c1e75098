package cuda

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

func TestLibraryName(t *testing.T) {
	t.Setenv("MSCCLPP_CUDA_LIBRARY", "")
	if got := libraryName(); got != "libcuda.so.1" {
		t.Errorf("libraryName() = %q, want libcuda.so.1", got)
	}
	t.Setenv("MSCCLPP_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")
	if got := libraryName(); got != "/nonexistent/libcuda.so.1" {
		t.Errorf("libraryName() = %q with MSCCLPP_CUDA_LIBRARY set", got)
	}
}

func TestLoadMissingLibrary(t *testing.T) {
	l := newCudaLoader("/nonexistent/libcuda.so.1")
	err := l.load()
	if err == nil {
		t.Fatal("load of a missing library succeeded")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "no /nonexistent/libcuda.so.1: ") || strings.Contains(msg, "\n") {
		t.Errorf("error %q does not name the library in one line", msg)
	}
	if c := status.CodeOf(err); c != status.UnhandledCudaError {
		t.Errorf("CodeOf = %v, want UnhandledCudaError", c)
	}
	if _, perr := probe(l); perr == nil || perr.Error() != msg {
		t.Errorf("probe after a failed load = %v, want the load error", perr)
	}
	t.Log(msg)
}

func TestLoadMissingSymbol(t *testing.T) {
	err := newCudaLoader("libc.so.6").load()
	if err == nil || err.Error() != `libc.so.6: symbol "cuInit" not found` {
		t.Fatalf("load(libc.so.6) = %v, want the missing cuInit named", err)
	}
	err = newCudaLoader(fakeCudaNoHtoD).load()
	want := fmt.Sprintf("%s: symbol %q not found", fakeCudaNoHtoD, "cuMemcpyHtoDAsync_v2")
	if err == nil || err.Error() != want {
		t.Fatalf("load = %v, want %q", err, want)
	}
}

func TestLoadFallbackSymbol(t *testing.T) {
	l := newCudaLoader(fakeCudaOldIpc)
	if err := l.load(); err != nil {
		t.Fatalf("a driver with only cuIpcOpenMemHandle: %v", err)
	}
	dev, err := probe(l)
	if err != nil {
		t.Fatal(err)
	}
	p, err := dev.MemAlloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.MemFree(p)
	h, _, err := dev.IpcHandleOf(p)
	if err != nil {
		t.Fatal(err)
	}
	// the old entry point answers (here: the driver's refusal of this process's own handle)
	var ce *Error
	if _, err := dev.IpcOpen(h); !errors.As(err, &ce) || ce.Code != 201 || ce.Call != "cuIpcOpenMemHandle" {
		t.Fatalf("IpcOpen through the old entry point: %v, want the driver's answer (201)", err)
	}
}

func TestLoadOnce(t *testing.T) {
	l := newCudaLoader("/nonexistent/libcuda.so.1")
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = l.load() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil || err != errs[0] {
			t.Fatalf("concurrent loads returned %v and %v, want one shared error", err, errs[0])
		}
	}
	ok := newCudaLoader(fakeCuda)
	for range 3 {
		if err := ok.load(); err != nil || ok.Table() == nil {
			t.Fatalf("load = %v", err)
		}
	}
}

// TestRealDriver loads the system's libcuda.so.1: without a GPU (the stub of
// a CPU machine) Probe names CUDA_ERROR_NO_DEVICE; with one, a test thread
// has no current context.
func TestRealDriver(t *testing.T) {
	l := newCudaLoader(DefaultLibrary)
	if err := l.load(); err != nil {
		if strings.HasPrefix(err.Error(), "no "+DefaultLibrary) {
			t.Skipf("no %s here: %v", DefaultLibrary, err)
		}
		t.Fatal(err)
	}
	_, err := probe(l)
	if err == nil {
		t.Fatal("Probe found a current context on a test thread")
	}
	t.Log(err)
	if c := status.CodeOf(err); c != status.UnhandledCudaError {
		t.Errorf("CodeOf = %v", c)
	}
	var ce *Error
	switch {
	case errors.As(err, &ce):
		if ce.Call != "cuInit" || ce.Code != 100 || ce.Name != "CUDA_ERROR_NO_DEVICE" ||
			err.Error() != "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected" {
			t.Errorf("Probe: %#v (%q), want cuInit's CUDA_ERROR_NO_DEVICE", ce, err)
		}
	case strings.Contains(err.Error(), "no current CUDA context"):
	default:
		t.Errorf("Probe: unexpected %v", err)
	}
}

func TestErrorText(t *testing.T) {
	e := NewError("cuMemAlloc", 2)
	if got := e.Error(); got != "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory" {
		t.Errorf("Error() = %q", got)
	}
	if got := NewError("cuInit", 100).Error(); got != "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected" {
		t.Errorf("Error() = %q", got)
	}
	if got := NewError("cuFoo", 12345).Error(); got != "cuFoo: CUresult 12345" {
		t.Errorf("unknown code: %q", got)
	}
	wrapped := fmt.Errorf("connecting rank 3: %w", e)
	if c := status.CodeOf(e); c != status.UnhandledCudaError {
		t.Errorf("CodeOf(*Error) = %v", c)
	}
	if c := status.CodeOf(wrapped); c != status.UnhandledCudaError {
		t.Errorf("CodeOf(wrapped) = %v", c)
	}
	var ce *Error
	if !errors.As(wrapped, &ce) || ce.Code != 2 || ce.Call != "cuMemAlloc" {
		t.Errorf("errors.As(*Error) = %#v", ce)
	}
	var se *status.Error
	if !errors.As(wrapped, &se) || se.Code != status.UnhandledCudaError || se.Msg != e.Error() {
		t.Errorf("errors.As(*status.Error) = %#v", se)
	}
	// an outer code chosen by the caller wins
	outer := status.Errorf(status.InvalidUsage, "MSCCLPP_DEVICE=cuda: %w", e)
	if c := status.CodeOf(outer); c != status.InvalidUsage {
		t.Errorf("CodeOf(outer) = %v", c)
	}
	if got := wrapped.Error(); got != "connecting rank 3: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory" {
		t.Errorf("Error() = %q", got)
	}
}

func TestErrorNamesFromDriver(t *testing.T) {
	l := newCudaLoader(fakeCuda)
	if err := l.load(); err != nil {
		t.Fatal(err)
	}
	// the fake names 201 itself; 100 it does not know, so the built-in table does
	if got := newError(l.api(), "cuX", 201).Error(); got != "cuX: FAKE_INVALID_CONTEXT: fake: wrong context" {
		t.Errorf("driver's name: %q", got)
	}
	if got := newError(l.api(), "cuX", 100).Error(); got != "cuX: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected" {
		t.Errorf("built-in fallback: %q", got)
	}
}
