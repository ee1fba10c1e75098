//go:build mscclpp_testhooks

package engine

import (
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestWaitPollDelivers: a host wait on a connection whose transport delivers the signal from
// its waitPoll hook (no other thread moves the epoch) returns once the hook delivered it.
func TestWaitPollDelivers(t *testing.T) {
	p := newPollHarness(3, false)
	defer p.free()
	if rc := p.waitNext(2000); rc != int(status.Success) {
		t.Fatalf("wait: result %d, want success (the transport's waitPoll delivers the signal)", rc)
	}
	if polls, _ := p.polls(); polls != 3 {
		t.Fatalf("waitPoll called %d times before the wait returned, want 3 (it delivers on the third)", polls)
	}
}

// TestWaitEndPolls: a wait whose time is up asks the transport once more, without blocking
// (waitPoll with no wait state), for what arrived meanwhile, before it reports in progress.
func TestWaitEndPolls(t *testing.T) {
	p := newPollHarness(1<<30, true)
	defer p.free()
	if rc := p.waitNext(0); rc != int(status.Success) {
		t.Fatalf("wait with timeout 0: result %d, want success (the last, non-blocking waitPoll delivers)", rc)
	}
	if _, null := p.polls(); null != 1 {
		t.Fatalf("non-blocking waitPoll called %d times, want 1", null)
	}
	q := newPollHarness(1<<30, false)
	defer q.free()
	if rc := q.waitNext(0); rc != int(status.InProgress) {
		t.Fatalf("wait with timeout 0 and nothing delivered: result %d, want in progress", rc)
	}
}
