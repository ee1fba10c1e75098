package engine

import (
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// A WaitSeq past its spin and yield phases sleeps counted in the publisher's sleeper word, and
// PublishSeq ends it: the wait reports SeqReached and leaves the count at zero.
func TestWaitSeqSleepsUntilPublished(t *testing.T) {
	comm := NewComm(0, Backoff{1, 1, 1000}, Backoff{1, 1, 1})
	defer comm.Free()
	var seq uint64
	var sleepers uint32
	done := make(chan int, 1)
	go func() { done <- comm.WaitSeq(&seq, 1, os.Getpid(), 20*time.Second, &sleepers, false) }()
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadUint32(&sleepers) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never counted itself asleep in the sleeper word")
		}
		time.Sleep(50 * time.Microsecond)
	}
	PublishSeq(&seq, 1, &sleepers)
	select {
	case st := <-done:
		if st != SeqReached {
			t.Errorf("WaitSeq = %d, want SeqReached (%d)", st, SeqReached)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitSeq did not return after PublishSeq")
	}
	if n := atomic.LoadUint32(&sleepers); n != 0 {
		t.Errorf("%d sleepers left counted after the wait", n)
	}
}

// A WaitSeq for a counter nobody publishes ends at its timeout with SeqTimeout, also while
// asleep on the futex.
func TestWaitSeqTimesOutAsleep(t *testing.T) {
	comm := NewComm(0, Backoff{1, 1, 1000}, Backoff{1, 1, 1})
	defer comm.Free()
	var seq uint64
	var sleepers uint32
	start := time.Now()
	if st := comm.WaitSeq(&seq, 1, os.Getpid(), 50*time.Millisecond, &sleepers, true); st != SeqTimeout {
		t.Errorf("WaitSeq = %d, want SeqTimeout (%d)", st, SeqTimeout)
	}
	if dt := time.Since(start); dt < 50*time.Millisecond || dt > 5*time.Second {
		t.Errorf("a 50 ms wait took %v", dt)
	}
}
