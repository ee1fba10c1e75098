package bootstrap

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Tests of timeouts rest on a premise: the ranks a test starts together run
// together, and a timer fires about on time. On a loaded machine the process
// can be stalled for longer than a short timeout, and then a rank arrives
// after the root gave up or a formation meant to succeed times out. Such a
// run says nothing about the library: underStalls measures the stalls
// (stallWatch) and runs the scenario again when one broke the premise, while
// a failure without a stall, or in every try, still fails the test.

// stallTries is how often underStalls runs a scenario that keeps failing under stalls.
const stallTries = 3

// stallWatch adds up how late a goroutine of this process that asks to wake
// every millisecond runs: beyond a millisecond of grace per wake-up, the time
// the machine's load kept the process from running (many short delays add up
// as much as one long one).
type stallWatch struct {
	stop  chan struct{}
	total chan time.Duration
}

func watchStalls() *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), total: make(chan time.Duration, 1)}
	go func() {
		const period, grace = time.Millisecond, time.Millisecond
		var total time.Duration
		tick := time.NewTicker(period)
		defer tick.Stop()
		late := func(last, now time.Time) time.Duration { return max(0, now.Sub(last)-period-grace) }
		last := time.Now()
		for {
			select {
			case <-w.stop:
				w.total <- total + late(last, time.Now())
				return
			case <-tick.C:
				now := time.Now() // not the tick's time: a tick may wait in the channel
				total += late(last, now)
				last = now
			}
		}
	}()
	return w
}

// end stops the watch and returns the stalls' total.
func (w *stallWatch) end() time.Duration {
	close(w.stop)
	return <-w.total
}

// underStalls runs scenario, which returns nil when the library kept its
// promise, up to stallTries times. A failure during which the process was
// stalled for allowed or longer in total is logged and the scenario runs again; a
// failure without such a stall fails t at once, as does a failure in every
// try.
func underStalls(t *testing.T, allowed time.Duration, scenario func() error) {
	t.Helper()
	for try := 1; ; try++ {
		w := watchStalls()
		err := scenario()
		stall := w.end()
		if err == nil {
			return
		}
		if stall < allowed {
			t.Fatalf("%v (the process was stalled for %v in total)", err, stall)
		}
		if try == stallTries {
			t.Fatalf("%v (in each of %d tries; the process stalled for %v in total in the last, >= %v)", err, stallTries, stall, allowed)
		}
		t.Logf("try %d: %v; the process stalled for %v in total (>= %v): running it again", try, err, stall, allowed)
	}
}

// codeErr is nil when err has code c and mentions every substr, else says how it differs.
func codeErr(err error, c status.Code, substr ...string) error {
	if got := status.CodeOf(err); got != c {
		return fmt.Errorf("error %v: code %v, want %v", err, got, c)
	}
	for _, s := range substr {
		if !strings.Contains(err.Error(), s) {
			return fmt.Errorf("error %q does not mention %q", err, s)
		}
	}
	return nil
}

// formErr starts n ranks concurrently with mk; on success every rank is
// closed when t ends, on a failure at once, and the first rank's error is
// returned.
func formErr(t testing.TB, n int, mk func(rank int) (*Bootstrap, error)) ([]*Bootstrap, error) {
	bs := make([]*Bootstrap, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { bs[r], errs[r] = mk(r) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for _, b := range bs {
				if b != nil {
					b.Close()
				}
			}
			return nil, fmt.Errorf("rank %d: init: %w", r, err)
		}
	}
	closeAll(t, bs)
	return bs, nil
}

// formAddrErr is formErr with InitAddr on a loopback port (formAddr for a scenario).
func formAddrErr(t testing.TB, n int, opts Options) ([]*Bootstrap, error) {
	addr := loopbackAddr(t)
	return formErr(t, n, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, n, opts) })
}

// underStallsFormed runs f on n ranks formed with timeout, under underStalls: a
// stall of half the timeout may fail the formation or delay what f times.
func underStallsFormed(t *testing.T, n int, timeout time.Duration, f func(bs []*Bootstrap) error) {
	t.Helper()
	underStalls(t, timeout/2, func() error {
		bs, err := formAddrErr(t, n, Options{Timeout: timeout})
		if err != nil {
			return err
		}
		return f(bs)
	})
}

// TestUnderStalls checks the helper itself: a failure without a stall fails at
// once, one under a stall is tried again, and a success ends it.
func TestUnderStalls(t *testing.T) {
	w := watchStalls()
	time.Sleep(20 * time.Millisecond)
	if s := w.end(); s < 0 || s > 10*time.Second {
		t.Fatalf("stall %v", s)
	}
	tries := 0
	underStalls(t, time.Hour, func() error { tries++; return nil })
	if tries != 1 {
		t.Fatalf("%d tries of a scenario that succeeds", tries)
	}
	// A scenario that fails with a stall of its own making (a blocked watch
	// cannot be forced, so allowed is 0: every failure counts as stalled).
	tries = 0
	underStalls(t, 0, func() error {
		if tries++; tries < stallTries {
			return errors.New("premise broken")
		}
		return nil
	})
	if tries != stallTries {
		t.Fatalf("%d tries, want %d", tries, stallTries)
	}
}
