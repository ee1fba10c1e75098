package bootstrap

import (
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// A root whose open-file limit cannot hold a connection per rank refuses the
// communicator at the first registration, naming the limit: every rank fails at
// once with InvalidUsage, not at the bootstrap timeout saying that ranks "never
// connected" (what an accept failing with EMFILE leads to). At the limit, it forms.
func TestRootRefusesPastOpenFileLimit(t *testing.T) {
	saved := openFiles
	t.Cleanup(func() { openFiles = saved })
	const n, open, timeout = 4, 10, 5 * time.Second
	ranks := []int{0, 1, 2, 3}

	openFiles = func() (uint64, uint64, bool) { return open, open + n - 1, true }
	addr := loopbackAddr(t)
	errs, took := initSome(ranks, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, n, Options{Timeout: timeout}) })
	for r, err := range errs {
		if err := codeErr(err, status.InvalidUsage, "the root at "+addr+" cannot serve 4 ranks", "open-file limit RLIMIT_NOFILE 13"); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if took > timeout/2 {
		t.Errorf("the ranks failed after %v, not at once (timeout %v)", took, timeout)
	}

	openFiles = func() (uint64, uint64, bool) { return open, open + n, true }
	bs := formAddr(t, n, Options{Timeout: timeout})
	closeAll(t, bs)
}
