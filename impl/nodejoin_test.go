package impl

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/nodeshm"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// localRanks: the ranks sharing rank's host id, numbered in rank order, and the lowest of them.
func TestLocalRanks(t *testing.T) {
	local, leader := localRanks([]string{"a", "b", "a", "b", "b"}, 3)
	if leader != 1 || len(local) != 3 || local[1] != 0 || local[3] != 1 || local[4] != 2 {
		t.Fatalf("local %v leader %d", local, leader)
	}
}

// A rank waiting inside the bootstrap for its node's leader to create the segment stops
// waiting, with the communicator's failure, once the bootstrap failed (the leader, which
// fails too, will never create it), not at the bootstrap timeout.
func TestNodeJoinEndsWithTheBootstrap(t *testing.T) {
	opts := bootstrap.Options{Timeout: time.Minute, HostID: "one-host"}
	id, err := bootstrap.NewID(opts)
	if err != nil {
		t.Fatal(err)
	}
	bs := make([]*bootstrap.Bootstrap, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range bs {
		wg.Go(func() { bs[r], errs[r] = bootstrap.Init(id, r, 2, opts) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer bs[r].Close()
	}
	local, leader := localRanks(bs[1].HostIDs(), 1)
	bs[1].Abort(status.Errorf(status.RemoteError, "rank 0 failed elsewhere"))
	done := make(chan error, 1)
	start := time.Now()
	go func() { // rank 1 joins; rank 0, the leader, never creates the segment
		seg, err := openNode(bs[1], local, leader, start, nodeshm.Join, true)
		if seg != nil {
			seg.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "rank 0 failed elsewhere") {
			t.Fatalf("joined with %v, want the bootstrap's failure", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still waiting for the segment 20 s after the bootstrap failed (its timeout is a minute)")
	}
}

// An abort of the bootstrap (from another goroutine, as a peer's failure or a user's
// abort would come) racing with a rank mapping its node segment inside the bootstrap:
// whatever wins, Init fails or succeeds cleanly, a failed rank's segment is dropped and a
// formed one is usable; -race finds unsynchronized accesses of the join and the abort.
func TestNodeJoinAbortRace(t *testing.T) {
	const n, iters = 3, 20
	for it := range iters {
		opts := bootstrap.Options{Timeout: 20 * time.Second, HostID: "one-host"}
		id, err := bootstrap.NewID(opts)
		if err != nil {
			t.Fatal(err)
		}
		abortErr := status.Errorf(status.RemoteError, "test abort %d", it)
		var aborts sync.WaitGroup
		bs := make([]*bootstrap.Bootstrap, n)
		errs := make([]error, n)
		nodes := make([]*nodeJoin, n)
		var wg sync.WaitGroup
		for r := range n {
			nodes[r] = &nodeJoin{start: time.Now()}
			o := opts
			o.Joined = func(b *bootstrap.Bootstrap) error {
				if b.Rank() == it%n { // this rank aborts while it (and the others) join
					aborts.Go(func() {
						time.Sleep(time.Duration(it%4) * 100 * time.Microsecond)
						b.Abort(abortErr)
					})
				}
				return nodes[r].joined(b)
			}
			wg.Go(func() { bs[r], errs[r] = bootstrap.Init(id, r, n, o) })
		}
		wg.Wait()
		aborts.Wait()
		for r := range n {
			if errs[r] != nil {
				nodes[r].drop()
				if nodes[r].seg != nil {
					t.Fatalf("iteration %d rank %d: the segment of a failed init is still held", it, r)
				}
				continue
			}
			if nodes[r].seg == nil {
				t.Fatalf("iteration %d rank %d: formed without its node segment", it, r)
			}
			nodes[r].seg.Close()
			bs[r].Close()
		}
		if errs[it%n] == nil && bs[it%n].Failed() == nil {
			t.Fatalf("iteration %d: the aborting rank formed and is not failed", it)
		}
	}
}
