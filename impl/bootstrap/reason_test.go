package bootstrap

import (
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestRootProcessRankFailsEarly: the rank in the root's process fails
// before it registers (here a MSCCLPP_SOCKET_IFNAME that matches nothing,
// read when it picks its listening address). The ranks already registered
// learn the reason from the root at once, and so does a rank that arrives
// later, instead of waiting for the timeout or reading only that the root
// went away.
func TestRootProcessRankFailsEarly(t *testing.T) {
	t.Setenv(EnvSocketIfname, "")
	t.Setenv(EnvCommID, loopbackAddr(t)) // the root on loopback
	logs := newLogSink()
	const timeout = 30 * time.Second
	id, err := NewID(Options{Timeout: timeout, Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for r := 1; r < n-1; r++ {
		wg.Go(func() {
			b, err := Init(id, r, n, Options{Timeout: timeout})
			if b != nil {
				b.Close()
			}
			errs[r] = err
		})
	}
	logs.waitFor(t, "rank 1 registered")
	logs.waitFor(t, "rank 2 registered")
	// Every rank reads the variable when it picks its address: set now, it
	// concerns rank 0 and the late rank 3 only.
	t.Setenv(EnvSocketIfname, "=no-such-interface0")
	_, errs[0] = Init(id, 0, n, Options{Timeout: timeout})
	wantCode(t, errs[0], status.InvalidUsage, EnvSocketIfname)
	wg.Wait()
	t.Setenv(EnvSocketIfname, "")
	_, errs[n-1] = Init(id, n-1, n, Options{Timeout: timeout}) // late: the root still answers
	for r := 1; r < n; r++ {
		wantCode(t, errs[r], status.InvalidUsage, "rank 0", "could not join", EnvSocketIfname, "no-such-interface0")
	}
	if d := time.Since(start); d > timeout/3 {
		t.Fatalf("the ranks learned it after %v (timeout %v)", d, timeout)
	}
	ReleaseID(id)
}
