//go:build mscclpp_testhooks

package conform

/*
#include "conform.h"
*/
import "C"

import (
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// wait is mscclppConnWaitNext on c with timeoutMs, on a thread of its own.
func (c *Conn) wait(timeoutMs int64) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return int(C.cfWaitNext(c.C, C.int64_t(timeoutMs)))
}

// failedOpFailsOnlyItsConnection: an operation of c fails with mscclppRemoteError (the transport
// broke the connection, or its table says so); c is marked failed and a wait on it ends with
// mscclppRemoteError, while c.Other, on the same context, is not failed: its put with a signal
// lands, and a wait on it goes on until its own deadline.
func failedOpFailsOnlyItsConnection(t *testing.T, c *Conn) {
	o := c.Other
	if o == nil {
		t.Skipf("no second connection on the context: %s", c.Fails)
	}
	if c.Break != nil {
		c.Break()
	} else {
		C.cfInjectFailure(c.C)
	}
	if rc := c.do(data|flag, 0, 0, 8); rc != remoteError {
		t.Errorf("a put with a signal on the failed connection returned %d, want %d (mscclppRemoteError)", rc, remoteError)
	}
	if C.cfFailed(c.C) == 0 {
		t.Errorf("the failed operation did not mark its connection failed")
	}
	if C.cfFailed(o.C) != 0 {
		t.Errorf("the failed operation of one connection marked the other connection of its context failed")
	}
	if c.Waits {
		if rc := c.wait(10000); rc != remoteError {
			t.Errorf("a wait on the failed connection returned %d, want %d (mscclppRemoteError)", rc, remoteError)
		}
	}
	base := o.Epoch()
	var b [8]byte
	b[0] = 0x5a
	o.SetSrc(8, b[:])
	if rc := o.do(data|flag|syncOp, 0, 8, 8); rc != 0 {
		t.Fatalf("a put with a signal on the other connection returned %d, want 0", rc)
	}
	if got := o.awaitEpoch(base + 1); got != base+1 {
		t.Errorf("the other connection's peer epoch is %d, want %d", got, base+1)
	}
	if w := o.DstWord(0); w != 0x5a {
		t.Errorf("the other connection's put landed %#x, want 0x5a", w)
	}
	if o.Waits {
		if rc := o.wait(20); rc != inProgress {
			t.Errorf("a wait on the other connection, which nothing signals, returned %d, want %d (mscclppInProgress at its deadline): the failure ended it",
				rc, inProgress)
		}
	}
}

// peerCloseWakesSleepers: a wait on c is in its loop (spinning, polling or asleep) when the peer
// closes its side; the wait ends with mscclppRemoteError soon after, not at its deadline.
func peerCloseWakesSleepers(t *testing.T, c *Conn) {
	closePeer := c.ClosePeer
	if closePeer == nil && c.PeerExits && c.Waits {
		closePeer = peerProcess(t, c)
	}
	if closePeer == nil || !c.Waits {
		t.Skipf("the peer's side cannot be closed here: %s", c.NoPeerClose)
	}
	const deadlineMs, soon = 30000, 5 * time.Second
	before := uint64(C.cfWaitRounds(c.C))
	type result struct {
		rc  int
		end time.Time
	}
	done := make(chan result, 1)
	go func() {
		rc := c.wait(deadlineMs)
		done <- result{rc, time.Now()}
	}()
	for end := time.Now().Add(10 * time.Second); uint64(C.cfWaitRounds(c.C)) < before+3; runtime.Gosched() {
		if time.Now().After(end) {
			t.Fatal("the wait did not go round its loop within 10 s")
		}
	}
	closed := time.Now()
	closePeer()
	select {
	case r := <-done:
		if r.rc != remoteError {
			t.Errorf("the wait returned %d after the peer closed, want %d (mscclppRemoteError)", r.rc, remoteError)
		}
		if took := r.end.Sub(closed); took > soon {
			t.Errorf("the wait ended %v after the peer closed, want within %v", took, soon)
		}
	case <-time.After(soon):
		t.Errorf("the wait had not ended %v after the peer closed (its deadline: %d ms): nothing woke it", soon, deadlineMs)
		<-done
	}
}

// peerProcess makes a child process the peer of c (its pid) and returns what kills it; the child
// is reaped, and c's peer is none again, at the test's end.
func peerProcess(t *testing.T, c *Conn) func() {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatalf("a peer process: %v", err)
	}
	C.cfSetPeerPid(c.C, C.int(cmd.Process.Pid))
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		C.cfSetPeerPid(c.C, 0)
	})
	return func() { cmd.Process.Kill() }
}
