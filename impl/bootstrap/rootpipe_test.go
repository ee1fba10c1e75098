package bootstrap

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// Rank 0 of InitAddr registers with the root its process started through an in-memory
// pipe (the root logs it as registered "from pipe"), the others over TCP, and its
// listener is on the root's address, where its TCP connection to the root would have
// left from: the communicator forms and gathers as before.
func TestRankZeroRegistersInProcess(t *testing.T) {
	const n = 3
	var mu sync.Mutex
	var lines []string
	logf := func(warn bool, format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	addr := loopbackAddr(t)
	bs := form(t, n, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, n, Options{Logf: logf}) })
	checkAllGather(t, bs, 4, 2)
	mu.Lock()
	defer mu.Unlock()
	var zero, others int
	for _, l := range lines {
		switch {
		case strings.Contains(l, "rank 0 registered from pipe"):
			zero++
		case strings.Contains(l, "registered from 127.0.0.1:"):
			others++
		}
	}
	if zero != 1 || others != n-1 {
		t.Fatalf("registrations: rank 0 in process %d, over TCP %d; log:\n%s", zero, others, strings.Join(lines, "\n"))
	}
	if ap := netip.MustParseAddrPort(bs[0].ListenAddr()); ap.Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("rank 0 listens at %s", ap)
	}
}

func TestLocalSource(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3": "10.1.2.3", "::ffff:10.1.2.3": "10.1.2.3", "fd00::7": "fd00::7",
		"0.0.0.0": "127.0.0.1", "::": "::1", "127.0.1.1": "127.0.1.1",
	} {
		if got := localSource(netip.MustParseAddr(in)); got.String() != want {
			t.Errorf("localSource(%s) = %s, want %s", in, got, want)
		}
	}
}
