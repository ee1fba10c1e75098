package ib

import (
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/dynlib"
)

// TestOneDlopenForEveryTable: the verbs, dma-buf and relaxed-ordering tables of one libibverbs
// are filled from one dlopen of it, however many times each is asked for.
func TestOneDlopenForEveryTable(t *testing.T) {
	lib := withDouble(t)
	for range 2 {
		if _, err := LoadPath(doubleLib); err != nil {
			t.Fatal(err)
		}
		_ = lib.HasDmabuf()
		_ = lib.RelaxedOrdering()
	}
	if n := dynlib.Opens(doubleLib); n != 1 {
		t.Errorf("libibverbs' three tables took %d dlopen calls, want 1", n)
	}
}
