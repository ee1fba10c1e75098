//go:build mscclpp_testhooks

package ib

import (
	"strings"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestEngOps drives ibEngOps as the engine's proxy does: Data at offsets,
// Flag (the signal count into the peer's proxy epoch word), Sync, and a
// put past the end of the peer's buffer.
func TestEngOps(t *testing.T) {
	lib := withDouble(t)
	l := newLoopback(t, lib, 8)
	l.connect(t)
	sigA, sigB := newBuffer(t, 4096), newBuffer(t, 4096)
	defer sigA.free()
	defer sigB.free()
	mrSigA, err := l.ctx.RegisterMR(sigA.addr(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer mrSigA.Close()
	mrSigB, err := l.ctx.RegisterMR(sigB.addr(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer mrSigB.Close()
	local := []MRInfo{mrSigA.Info(), l.mrA.Info()}
	remote := []MRInfo{mrSigB.Info(), l.mrB.Info()}
	st, err := NewConnState(l.a, []*MR{mrSigA, l.mrA}, remote)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Free()
	c := newTestConn(st, local, remote)
	defer c.free()
	for i := range l.bufA.b {
		l.bufA.b[i] = byte(i ^ 0x5a)
	}
	const data, flag, sync = 1, 2, 4
	if rc, msg := c.op(data, 1, 300, 1, 100, 1000); rc != 0 {
		t.Fatalf("Data: %d %s", rc, msg)
	}
	if rc, msg := c.op(data|flag|sync, 1, 5000, 1, 2000, 10); rc != 0 {
		t.Fatalf("Data|Flag|Sync: %d %s", rc, msg)
	}
	if l.a.Completed() != l.a.Posted() {
		t.Fatalf("after Sync: %d of %d", l.a.Completed(), l.a.Posted())
	}
	if sigB.load64(8) != 1 || sigB.load64(0) != 0 {
		t.Fatalf("peer's epoch: device %d proxy %d", sigB.load64(0), sigB.load64(8))
	}
	for i := 0; i < 1000; i++ {
		if l.bufB.b[300+i] != l.bufA.b[100+i] {
			t.Fatalf("byte %d", i)
		}
	}
	if rc, _ := c.op(flag, 0, 0, 0, 0, 0); rc != 0 || sigB.load64(8) != 2 {
		t.Fatalf("second Flag: rc %d, proxy %d", rc, sigB.load64(8))
	}
	// checked by the engine before posting: InvalidArgument
	if rc, msg := c.op(data, 1, 1<<16-4, 1, 0, 8); rc != int(status.InvalidArgument) || !strings.Contains(msg, "remote handle 1") {
		t.Fatalf("put past the end: %d %s", rc, msg)
	}
}
