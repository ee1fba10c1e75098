package bootstrap

// The root's open-file budget. During init the root holds one connection per
// registered rank until the communicator formed (and in rank 0's process the
// star's hub adds another per rank). Past the process's open-file limit its
// accept fails with EMFILE: the root can only log that, and the ranks it could
// not accept fail at the bootstrap timeout saying they "never connected", which
// does not name the limit. So the root refuses such a communicator at the first
// registration, naming the limit, and every rank hears why at once.

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openFiles returns how many descriptors this process holds and its open-file limit
// (the soft one, which the Go runtime raises to the hard one at start); ok is false
// when either is unknown.
var openFiles = func() (open, limit uint64, ok bool) {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) != nil {
		return 0, 0, false
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, 0, false
	}
	return uint64(len(ents)), l.Cur, true
}

// fdShortfall says why the root cannot serve nranks ranks within its open-file limit
// ("" when it can, or when the limit is unknown): it needs at least one more descriptor
// per rank than it holds now.
func (r *root) fdShortfall(nranks int) string {
	open, limit, ok := openFiles()
	if !ok || nranks < 2 {
		return ""
	}
	need := open + uint64(nranks)
	if need <= limit {
		return ""
	}
	return fmt.Sprintf("the root at %s cannot serve %d ranks: it holds a connection per rank during init, at least %d descriptors with the %d open already, more than its open-file limit RLIMIT_NOFILE %d (raise the hard limit, ulimit -Hn; rank 0 needs about 2 per rank, every rank about 1 per peer it connects to)",
		r.addr, nranks, need, open, limit)
}
