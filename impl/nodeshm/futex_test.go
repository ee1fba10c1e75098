package nodeshm

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A rank asleep in waitChange wakes when another changes the word and calls wakeAll, not
// when its (here long) timeout ends.
func TestWakeAllWakesWaiters(t *testing.T) {
	var w uint64
	const waiters = 3
	var started, done sync.WaitGroup
	started.Add(waiters)
	done.Add(waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			defer done.Done()
			started.Done()
			for atomic.LoadUint64(&w) == 0 {
				waitChange(&w, 0, time.Minute)
			}
		}()
	}
	started.Wait()
	begin := time.Now()
	atomic.StoreUint64(&w, 1)
	wakeAll(&w)
	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("waiters still asleep 20 s after wakeAll (they would sleep a minute)")
	}
	t.Logf("woken after %v", time.Since(begin))
}

// waitChange returns at once when the word no longer holds the value the caller saw.
func TestWaitChangeSeesChangedWord(t *testing.T) {
	w := uint64(5)
	returned := make(chan struct{})
	go func() { waitChange(&w, 4, time.Minute); close(returned) }()
	select {
	case <-returned:
	case <-time.After(20 * time.Second):
		t.Fatal("waitChange slept although the word had changed")
	}
}

// The node's ranks map the segment whichever comes first (the others before the leader
// too), every one returns once all have mapped it, they share its memory, and the last one
// removes its name.
func TestEveryLocalRankMaps(t *testing.T) {
	const nLocal, maxConns = 4, 4
	name := Name(0x6d61707300000000|uint64(os.Getpid()), uint64(time.Now().UnixNano()), 0)
	if _, err := os.Stat(shmDir); err != nil {
		t.Skipf("no %s: %v", shmDir, err)
	}
	defer os.Remove(shmDir + name)
	segs := make([]*Segment, nLocal)
	errs := make([]error, nLocal)
	var wg sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second)
	for i := nLocal - 1; i >= 0; i-- { // the leader (0) last
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			segs[i], errs[i] = Open(name, i == 0, nLocal, maxConns, deadline, func() error { return nil })
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("local rank %d: %v", i, err)
		}
		defer segs[i].Close()
	}
	for i := range segs {
		segs[i].SetPid(i, 1000+i)
	}
	for i := range segs {
		if got := segs[(i+1)%nLocal].Pid(i); got != 1000+i {
			t.Fatalf("local rank %d's pid through another mapping: %d", i, got)
		}
	}
	if _, err := os.Stat(shmDir + name); !os.IsNotExist(err) {
		t.Fatalf("%s left behind (%v)", shmDir+name, err)
	}
}
