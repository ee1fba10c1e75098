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

// TestWaitServedSeesTailPastRefilledSlot: mscclppFifoWaitServed of a trigger that was served
// returns success while a later push has already refilled its slot and the proxy is busy
// elsewhere: the tail past the trigger says it was served, though the slot is not empty.
func TestWaitServedSeesTailPastRefilledSlot(t *testing.T) {
	f := newFifoHarness(0, 0)
	defer f.free()
	d, ok, rc := f.waitRefilled()
	if !ok {
		t.Fatal("setup failed: a push or the first wait failed, or the held trigger never reached the op")
	}
	if d == 0 {
		t.Fatal("mscclppFifoWaitServed of a served trigger whose slot was refilled did not return within 2 s")
	}
	if rc != 0 {
		t.Errorf("mscclppFifoWaitServed returned %d, want 0 (success)", rc)
	}
	if d > time.Second {
		t.Errorf("mscclppFifoWaitServed took %v, want well under a second", d)
	}
}

// TestSyncAloneSkipsCompleteTransport: on a transport whose operations complete before they
// return, a Sync trigger alone is served without calling its op (nothing is left to finish);
// every trigger with Data or Flag, a Sync among them, still calls it, and on any other transport
// a Sync does too, as it does in a context whose own table completes its operations once one of
// its connections was given a table that does not.
func TestSyncAloneSkipsCompleteTransport(t *testing.T) {
	const data, flag, sync = 1, 2, 4
	types := []uint64{sync, flag, sync | flag, data | sync, sync, data}
	for _, tc := range []struct {
		name string
		f    fifoHarness
		want []bool // per trigger id: whether the op saw it
	}{
		{"opsComplete", newCompleteFifoHarness(), []bool{false, true, true, true, false, true}},
		{"default", newFifoHarness(0, 0), []bool{true, true, true, true, true, true}},
		{"connection's own table", newMixedFifoHarness(), []bool{true, true, true, true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.f.free()
			if !tc.f.serveTypes(types...) {
				t.Fatal("a push or its wait failed")
			}
			for id, want := range tc.want {
				if _, at := tc.f.trigger(id); (at != 0) != want {
					t.Errorf("trigger %d (type %d): op called = %v, want %v", id, types[id], at != 0, want)
				}
			}
		})
	}
}

// pushFailed is MSCCLPP_FIFO_PUSH_FAILED.
const pushFailed = ^uint64(0)

// TestFullPushGivesUpAtClose: a push waiting for room in a FIFO whose proxy serves nothing gives
// up (MSCCLPP_FIFO_PUSH_FAILED) once the context closes, and the close, which waits for every
// call inside, returns (it once waited for that push for ever).
func TestFullPushGivesUpAtClose(t *testing.T) {
	f := newFifoHarness(0, 0)
	defer f.free()
	d, ok, seq, closed := f.fullPush(true, 0)
	if !ok {
		t.Fatal("the setup failed")
	}
	if d == 0 || closed == 0 {
		t.Fatalf("the waiting push returned after %v and the close after %v (0: not within 5 s)", d, closed)
	}
	if seq != pushFailed {
		t.Errorf("the waiting push returned %d, want MSCCLPP_FIFO_PUSH_FAILED", seq)
	}
}

// TestFullPushGivesUpAtTimeout: a push waiting for room in a FIFO whose proxy serves nothing gives
// up at the communicator's timeout (it once waited for ever).
func TestFullPushGivesUpAtTimeout(t *testing.T) {
	f := newFifoHarness(0, 0)
	defer f.free()
	const timeout = 300 * time.Millisecond
	d, ok, seq, _ := f.fullPush(false, timeout)
	if !ok {
		t.Fatal("the setup failed")
	}
	if d == 0 {
		t.Fatal("the waiting push did not return within 5 s")
	}
	if d < timeout {
		t.Errorf("the waiting push gave up after %v, before the %v timeout", d, timeout)
	}
	if seq != pushFailed {
		t.Errorf("the waiting push returned %d, want MSCCLPP_FIFO_PUSH_FAILED", seq)
	}
}
