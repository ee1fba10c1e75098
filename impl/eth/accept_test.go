package eth

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// With the process's descriptors used up (EMFILE), joins waiting for their peers' connections
// fail at once with the accept's error and the open-file limit, not after the whole timeout
// each; once descriptors come free, the accept loop serves again and the queued connections are
// joined.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	const timeout, conns = 10 * time.Second, 20
	e := newTestEth(t, 1, timeout)
	defer e.Close()
	var toks [conns][tokenBytes]byte
	for i := range toks {
		blob, err := e.Describe(i, 0, transport.Buffer{})
		if err != nil {
			t.Fatalf("Describe: %v", err)
		}
		copy(toks[i][:], blob[19:])
	}
	var socks [conns]int // the dialers' sockets, made while descriptors are left
	for i := range socks {
		var err error
		if socks[i], err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(socks[i])
	}
	fillers := useUpDescriptors(t)
	to := &unix.SockaddrInet4{Port: int(e.addr.Port()), Addr: e.addr.Addr().As4()}
	for i, fd := range socks { // queued at the listener, which cannot accept them
		if err := unix.Connect(fd, to); err != nil {
			t.Fatalf("connect %d: %v", i, err)
		}
		if _, err := unix.Write(fd, append([]byte("MSEH\x00\x00\x00\x00"), toks[i][:]...)); err != nil {
			t.Fatalf("hello %d: %v", i, err)
		}
	}

	start := time.Now()
	for i := range conns {
		_, err := e.await(i, 0, e.addr)
		if err == nil {
			t.Fatalf("join %d: joined with no descriptor left to accept with", i)
		}
		if status.CodeOf(err) != status.SystemError || !strings.Contains(err.Error(), "too many open files") ||
			!strings.Contains(err.Error(), "RLIMIT_NOFILE") {
			t.Fatalf("join %d: error %v, want SystemError naming the accept's 'too many open files' and RLIMIT_NOFILE", i, err)
		}
	}
	took := time.Since(start)
	for _, fd := range fillers {
		unix.Close(fd)
	}
	t.Logf("%d joins failed in %v (timeout %v)", conns, took, timeout)
	if took > 2*time.Second {
		t.Errorf("%d joins failed after %v (timeout %v), want at once", conns, took, timeout)
	}

	for i := range conns {
		got, err := e.await(i, 0, e.addr)
		if err != nil {
			t.Fatalf("with descriptors free again, queued connection %d was not joined: %v", i, err)
		}
		got.Close()
	}
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
	low.Cur = uint64(len(open) + 64)
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
