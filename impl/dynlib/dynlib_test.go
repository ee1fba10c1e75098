//go:build mscclpp_testhooks

package dynlib

import "testing"

// TestOneHandlePerLibrary: two tables of one library (as libibverbs has three: the verbs, the
// dma-buf and the relaxed-ordering entry points) are filled from one dlopen of it.
func TestOneHandlePerLibrary(t *testing.T) {
	a := New("libm.so.6", testSyms("cos"), testTableSize, 0)
	b := New("libm.so.6", testSyms("sin"), testTableSize, 0)
	for _, l := range []*Lib{a, b} {
		if err := l.Load(); err != nil {
			t.Fatalf("%s: %v", l.Name(), err)
		}
		if testEntry(l.Table()) == nil {
			t.Fatalf("%s: the table's entry is NULL", l.Name())
		}
	}
	if n := Opens("libm.so.6"); n != 1 {
		t.Errorf("two tables of libm.so.6 took %d dlopen calls, want 1", n)
	}
	if c := New("libnosuch.so.7", testSyms("x"), testTableSize, 0); c.Load() == nil {
		t.Error("a library that does not exist loaded")
	}
}
