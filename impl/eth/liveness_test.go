//go:build mscclpp_testhooks

package eth

import (
	"testing"
	"time"
)

// TestOneWayStreamKeepsSenderAlive: a rank that only receives (signals keep coming, more often
// than the tick) still tells its peer it is alive, so the sending side, which hears nothing else
// from it, does not declare it unreachable after the dead time while the stream goes on.
func TestOneWayStreamKeepsSenderAlive(t *testing.T) {
	const deadMs = 300
	p, err := newTestPair(64, deadMs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.free()
	sent := uint64(0)
	for end := time.Now().Add(5 * deadMs * time.Millisecond); time.Now().Before(end); {
		if rc := p.signal(0, 0); rc != 0 {
			t.Fatalf("signal %d after %d sent: result %d: the sender declared its receiving peer unreachable", sent+1, sent, rc)
		}
		sent++
		time.Sleep(time.Millisecond) // a stream, not a flood: the receiver reads each frame as it comes
	}
	if p.failed(0, 0) {
		t.Fatalf("after %d signals over %d ms the sending side's connection is failed: its receiving peer was declared unreachable", sent, 5*deadMs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.epoch(1, 0) < sent && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := p.epoch(1, 0); got != sent {
		t.Fatalf("the receiver's epoch is %d, want %d", got, sent)
	}
}
