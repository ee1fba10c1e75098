package eth

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// The data port listens with plain TCP, as the bootstrap does: a Go listener is Multipath TCP
// by default where the kernel offers it, and the plain-TCP connections it accepts (every peer
// dials plain TCP) keep that listener's socket settings (SO_RCVLOWAT 0 instead of 1).
func TestDataPortIsPlainTCP(t *testing.T) {
	e := newTestEth(t, 0, 30*time.Second)
	defer e.Close()
	raw, err := e.ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	proto, serr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) { proto, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PROTOCOL) }); err != nil || serr != nil {
		t.Fatalf("SO_PROTOCOL of the data port: %v, %v", err, serr)
	}
	if proto != unix.IPPROTO_TCP {
		t.Errorf("the data port's protocol is %d, want IPPROTO_TCP (%d)", proto, unix.IPPROTO_TCP)
	}
}

// newTestEth is the Ethernet transport of rank (of 2) listening at 127.0.0.1 with timeout; the
// caller closes it (its engine state is freed at the test's end).
func newTestEth(t *testing.T, rank int, timeout time.Duration) *eth {
	t.Helper()
	eng := engine.NewComm(0, engine.Backoff{Spin: 64, Yields: 64, SleepMaxUs: 1000}, engine.Backoff{Spin: 64, Yields: 64, SleepMaxUs: 200})
	t.Cleanup(eng.Free)
	tr, err := newEth(&transport.Host{Rank: rank, ListenIP: "127.0.0.1", Eng: eng, Timeout: timeout})
	if err != nil {
		t.Fatalf("newEth: %v", err)
	}
	return tr.(*eth)
}
