package cuda

import (
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/dynlib"
)

// TestOneDlopenForEveryTable: the driver and dma-buf tables of one libcuda are filled from one
// dlopen of it, however many times each is asked for.
func TestOneDlopenForEveryTable(t *testing.T) {
	for range 2 {
		if err := newCudaLoader(fakeCuda).load(); err != nil {
			t.Fatal(err)
		}
		if _, err := dmabufAPI(fakeCuda); err != nil {
			t.Fatal(err)
		}
	}
	if n := dynlib.Opens(fakeCuda); n != 1 {
		t.Errorf("libcuda's two tables took %d dlopen calls, want 1", n)
	}
}
