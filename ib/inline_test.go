//go:build mscclpp_testhooks

package ib

import (
	"testing"
	"time"
)

// TestDoubleInlineSignal: the 8-byte signal goes out inline (IBV_SEND_INLINE, copied at post
// time, no lkey needed) when the QP grants max_inline_data >= 8, which the double counts;
// data writes are never inline, and the signal still lands after them.
func TestDoubleInlineSignal(t *testing.T) {
	lib := withDouble(t)
	l := newLoopback(t, lib, 8)
	l.connect(t)
	if !l.a.InlineSignals() {
		t.Fatal("the QP asked for no inline data: signals are not inline")
	}
	before := doubleCounter(doubleLib, "ibv_double_inline_writes")
	if before < 0 {
		t.Fatalf("the double has no inline counter (%d)", before)
	}
	l.bufA.b[0] = 9
	if err := l.a.Write(l.mrA, 0, l.mrB.Info(), 64, 1, false); err != nil {
		t.Fatal(err)
	}
	if err := l.a.WriteSignal(7, l.mrB.Info(), 8, false); err != nil {
		t.Fatal(err)
	}
	if err := l.a.Flush(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := doubleCounter(doubleLib, "ibv_double_inline_writes") - before; got != 1 {
		t.Errorf("inline WRs executed: %d, want 1 (the signal only)", got)
	}
	if v := l.bufB.load64(8); v != 7 || l.bufB.b[64] != 9 {
		t.Errorf("signal %d, data %d: want 7 and 9", v, l.bufB.b[64])
	}
}
