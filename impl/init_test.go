package impl

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// runBootstrap hands back f's value and error, and turns a panic of f into an InternalError
// (it would otherwise end the process: the C entry point's recover cannot see it), on the
// init worker and on a goroutine of its own (while another job holds the worker).
func TestRunBootstrap(t *testing.T) {
	check := func(when string) {
		v, err := runBootstrap(func() (int, error) { return 7, nil })
		if v != 7 || err != nil {
			t.Fatalf("%s: got %d, %v", when, v, err)
		}
		boom := errors.New("boom")
		if _, err := runBootstrap(func() (int, error) { return 0, boom }); !errors.Is(err, boom) {
			t.Fatalf("%s: error %v, want %v", when, err, boom)
		}
		_, err = runBootstrap(func() (*int, error) { panic("kaput") })
		if status.CodeOf(err) != status.InternalError || !strings.Contains(err.Error(), "kaput") {
			t.Fatalf("%s: a panic gave %v", when, err)
		}
	}
	check("alone")
	busy, started := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runBootstrap(func() (int, error) { close(started); <-busy; return 0, nil })
	}()
	<-started
	check("beside a running job")
	close(busy)
	<-done
}

// Concurrent runBootstrap calls run at once (one may take the idle init worker, the others get
// goroutines of their own: none waits for another's job), and a job's panic leaves the worker
// serving the next ones.
func TestRunBootstrapConcurrentAndAfterPanic(t *testing.T) {
	for i := 0; i < 3; i++ {
		if _, err := runBootstrap(func() (int, error) { panic("again") }); status.CodeOf(err) != status.InternalError {
			t.Fatalf("a panic gave %v", err)
		}
	}
	const n = 8
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := runBootstrap(func() (int, error) {
				started.Done()
				select { // every job waits until all n are running at the same time
				case <-all:
					return 0, nil
				case <-time.After(10 * time.Second):
					return 0, errors.New("the jobs did not all run at once")
				}
			})
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if v, err := runBootstrap(func() (int, error) { return 42, nil }); v != 42 || err != nil {
		t.Fatalf("got %d, %v", v, err)
	}
}
