package bootstrap

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Options.Joined runs once on every rank, with the root's table known, and every rank's
// Joined has finished by the time any rank's Init returns.
func TestJoinedDoneEverywhereWhenInitReturns(t *testing.T) {
	const n = 4
	var calls atomic.Int32
	seen := make([]int32, n)
	opts := Options{Joined: func(b *Bootstrap) error {
		if len(b.Pids()) != n || b.Nonce() == 0 || len(b.HostIDs()) != n {
			return errors.New("joined before the table was known")
		}
		calls.Add(1)
		return nil
	}}
	addr := loopbackAddr(t)
	form(t, n, func(r int) (*Bootstrap, error) {
		b, err := InitAddr(addr, r, n, opts)
		seen[r] = calls.Load()
		return b, err
	})
	if got := calls.Load(); got != n {
		t.Fatalf("Joined ran %d times for %d ranks", got, n)
	}
	for r, s := range seen {
		if s != n {
			t.Fatalf("rank %d's Init returned when %d of %d ranks had joined", r, s, n)
		}
	}
}

// Joined runs while the rank's ring forms, not before it: a Joined that waits for this
// rank's ring connections (to its successor and from its predecessor) sees them come.
// (With RingOnlyOnOneHost on one host the ring forms later, at the first collective: see
// TestRingOnlyOnOneHost.)
func TestJoinedOverlapsTheRing(t *testing.T) {
	const n = 3
	opts := Options{Joined: func(b *Bootstrap) error {
		deadline := time.Now().Add(20 * time.Second)
		for {
			b.mu.Lock()
			open := len(b.conns) // the root's, and the ring's two once they formed
			b.mu.Unlock()
			if open >= 3 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("rank %d: the ring did not form while Joined ran (%d connections)", b.Rank(), open)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}}
	addr := loopbackAddr(t)
	form(t, n, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, n, opts) })
}

// An error of one rank's Joined fails Init on every rank, and says why.
func TestJoinedErrorFailsEveryRank(t *testing.T) {
	const n = 3
	opts := Options{Joined: func(b *Bootstrap) error {
		if b.Rank() == 1 {
			return status.Errorf(status.SystemError, "rank 1 cannot map its node segment")
		}
		return nil
	}}
	addr := loopbackAddr(t)
	errs, _ := initSome([]int{0, 1, 2}, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, n, opts) })
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d formed a communicator whose rank 1 failed", r)
		}
		if !strings.Contains(err.Error(), "rank 1 cannot map its node segment") {
			t.Fatalf("rank %d: %v (does not say why)", r, err)
		}
	}
	wantCode(t, errs[1], status.SystemError)
}

// With RingOnlyOnOneHost, a communicator whose ranks share one host id makes no star
// connections and gathers small slots over the ring, which it connects at the first
// collective rather than in Init; one spanning hosts keeps its star and forms its ring
// in Init.
func TestRingOnlyOnOneHost(t *testing.T) {
	const n = 4
	for _, tc := range []struct {
		what     string
		hosts    func(r int) string
		wantStar bool
	}{
		{"one host", func(int) string { return "h" }, false},
		{"two hosts", func(r int) string { return "h" + strconv.Itoa(r%2) }, true},
	} {
		t.Run(tc.what, func(t *testing.T) {
			addr := loopbackAddr(t)
			bs := form(t, n, func(r int) (*Bootstrap, error) {
				return InitAddr(addr, r, n, Options{HostID: tc.hosts(r), RingOnlyOnOneHost: true})
			})
			for _, b := range bs {
				if got := b.star != nil; got != tc.wantStar {
					t.Fatalf("rank %d: star connections %v, want %v", b.Rank(), got, tc.wantStar)
				}
				if got := b.next != nil; got != tc.wantStar {
					t.Fatalf("rank %d: ring connected in Init %v, want %v", b.Rank(), got, tc.wantStar)
				}
			}
			checkAllGather(t, bs, 4, 3)
			checkAllGather(t, bs, 1000, 2)
			noErrs(t, "barrier", each(bs, func(b *Bootstrap) error { return b.Barrier() }))
		})
	}
}

// A rank retries a root that refuses it at growing intervals: at most every millisecond
// while the root may be starting with its ranks, then at most every 4 ms.
func TestNextRootRetry(t *testing.T) {
	b, waited := 50*time.Microsecond, time.Duration(0)
	for waited+b <= rootStartWindow {
		waited += b
		next := nextRootRetry(b, waited)
		if next < b || next > time.Millisecond {
			t.Fatalf("after %v of refusals, a pause of %v follows one of %v (want it growing to 1 ms)", waited, next, b)
		}
		b = next
	}
	if b != time.Millisecond {
		t.Fatalf("the pause grew to %v within %v, want 1 ms", b, rootStartWindow)
	}
	for range 10 {
		waited += b
		b = nextRootRetry(b, waited)
	}
	if b != 4*time.Millisecond {
		t.Fatalf("after %v of refusals the pause is %v, want 4 ms", waited, b)
	}
}

// With no ring formed at init, a rank whose Joined waits, asking Failed,
// still learns at once that another rank failed (through the root), and its
// Init says why.
func TestJoinedWaiterSeesOtherRankFail(t *testing.T) {
	const n = 3
	opts := Options{HostID: "h", RingOnlyOnOneHost: true, Timeout: 60 * time.Second,
		Joined: func(b *Bootstrap) error {
			switch b.Rank() {
			case 1:
				return status.Errorf(status.SystemError, "rank 1 cannot map its node segment")
			case 2:
				for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
					if err := b.Failed(); err != nil {
						return err
					}
				}
				return errors.New("rank 2 waited 30 s: the failure of rank 1 did not reach it")
			}
			return nil
		}}
	addr := loopbackAddr(t)
	start := time.Now()
	errs, _ := initSome([]int{0, 1, 2}, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, n, opts) })
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("init took %v", d)
	}
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 1 cannot map its node segment") {
			t.Fatalf("rank %d: %v (does not say why)", r, err)
		}
	}
}
