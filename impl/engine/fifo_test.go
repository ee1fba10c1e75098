//go:build mscclpp_testhooks

package engine

import (
	"testing"
	"time"
)

// TestFifoConcurrentPushesServedOnceInClaimOrder: threads push into one FIFO faster than its
// proxy serves (so that every slot is reused many times and pushes wait for room); every
// trigger is served exactly once, as the trigger its push's sequence number names (the
// proxy's n-th trigger is the one whose push returned n-1). A push that wrote its slot before
// the claim one FIFO length earlier was served would overwrite that trigger or be served under
// another's number.
func TestFifoConcurrentPushesServedOnceInClaimOrder(t *testing.T) {
	const threads, each = 4, 4096
	f := newFifoHarness(200, 0)
	done := make(chan bool, 1)
	go func() { done <- f.run(threads, each) }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("could not start the proxy or the pushing threads")
		}
	case <-time.After(20 * time.Second):
		// the harness stays allocated: its threads may still be inside it
		t.Fatalf("%d threads x %d pushes not served within 20 s (a trigger lost: the proxy waits for it)", threads, each)
	}
	defer f.free()
	if got := f.served(); got != threads*each {
		t.Errorf("the proxy served %d triggers, want %d", got, threads*each)
	}
	if n := f.twice(); n != 0 {
		t.Errorf("%d triggers were served more than once", n)
	}
	bad := 0
	for id := 0; id < threads*each; id++ {
		seq, at := f.trigger(id)
		if at == 0 || uint64(at) != seq+1 {
			if bad < 5 {
				t.Errorf("trigger %d: its push returned %d, the proxy served it as number %d (0: never)", id, seq, int64(at)-1)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d triggers were not served as the sequence number their push returned", bad, threads*each)
	}
}

// TestSleepingProxyWakesOnPush: an idle host-mode proxy that sleeps (looking again only every
// 5 s) serves a push at once, and stops at once: the push and the stop ring its doorbell.
func TestSleepingProxyWakesOnPush(t *testing.T) {
	f := newFifoHarness(0, 5000000)
	defer f.free()
	d := f.wake()
	if d == 0 {
		t.Fatal("the proxy never went to sleep, or the push failed")
	}
	if d > time.Second {
		t.Errorf("a push to a sleeping proxy was served after %v, want well under its 5 s look-again period", d)
	}
	s := f.stopAsleep()
	if s == 0 {
		t.Fatal("the proxy did not sleep again after the trigger")
	}
	if s > time.Second {
		t.Errorf("stopping a sleeping proxy took %v, want well under its 5 s look-again period", s)
	}
}
