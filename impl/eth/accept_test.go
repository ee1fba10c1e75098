package eth

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// With the process's descriptors used up (EMFILE), a join waiting for its peer's connection
// fails at once with the accept's error and the open-file limit, not after the whole timeout
// (one timeout per connection); once descriptors come free, the accept loop serves again and
// the queued connection is joined.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	const timeout = 10 * time.Second
	eng := engine.NewComm(0, engine.Backoff{Spin: 64, Yields: 64, SleepMaxUs: 1000}, engine.Backoff{Spin: 64, Yields: 64, SleepMaxUs: 200})
	defer eng.Free()
	tr, err := newEth(&transport.Host{Rank: 1, NRanks: 2, ListenIP: "127.0.0.1", Eng: eng, Timeout: timeout})
	if err != nil {
		t.Fatalf("newEth: %v", err)
	}
	e := tr.(*eth)
	defer e.Close()
	blob, err := e.Describe(0, 0, transport.Buffer{})
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	var tok [tokenBytes]byte
	copy(tok[:], blob[19:])
	fillers := useUpDescriptors(t)
	unix.Close(fillers[0]) // the dialer's socket: none is left for the accept
	fillers = fillers[1:]
	c, err := e.dial(e.addr, tok) // queued at the listener, which cannot accept it
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	start := time.Now()
	_, err = e.await(0, 0, e.addr)
	took := time.Since(start)
	for _, fd := range fillers {
		unix.Close(fd)
	}
	if err == nil {
		t.Fatal("joined with no descriptor left to accept with")
	}
	if status.CodeOf(err) != status.SystemError || !strings.Contains(err.Error(), "too many open files") ||
		!strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		t.Errorf("error %v, want SystemError naming the accept's 'too many open files' and RLIMIT_NOFILE", err)
	}
	if took > 2*time.Second {
		t.Errorf("the join failed after %v (timeout %v), want at once", took, timeout)
	}

	got, err := e.await(0, 0, e.addr)
	if err != nil {
		t.Fatalf("with descriptors free again, the queued connection was not joined: %v", err)
	}
	got.Close()
}

// useUpDescriptors lowers the soft RLIMIT_NOFILE to a few above what the process has open and
// opens /dev/null until open fails with EMFILE; it returns those descriptors (the caller closes
// them) and restores the limit at the test's end.
func useUpDescriptors(t *testing.T) []int {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(len(open) + 16)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
	var fds []int
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EMFILE) {
			return fds
		}
		if err != nil {
			t.Fatalf("open /dev/null: %v", err)
		}
		fds = append(fds, fd)
	}
}
