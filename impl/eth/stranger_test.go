package eth

import (
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// Silent strangers on the data port are dropped after the bootstrap's short handshake deadline
// (not the whole bootstrap timeout), and many of them make two WARN lines, not one each.
func TestSilentStrangersDroppedQuicklyAndLoggedOnce(t *testing.T) {
	t.Setenv("MSCCLPP_DEBUG", "WARN")
	logx.Reset()
	var mu sync.Mutex
	var warns []string
	logx.SetHandler(func(line string) {
		if strings.Contains(line, "Ethernet transport: dropped") {
			mu.Lock()
			warns = append(warns, line)
			mu.Unlock()
		}
	})
	defer func() { logx.SetHandler(nil); os.Unsetenv("MSCCLPP_DEBUG"); logx.Reset() }()

	const timeout = 30 * time.Second // the bootstrap timeout: far longer than the handshake deadline
	e := newTestEth(t, 0, timeout)

	const n = 40
	start := time.Now()
	conns := make([]net.Conn, n)
	var err error
	for i := range conns {
		if conns[i], err = net.Dial("tcp", e.addr.String()); err != nil {
			t.Fatalf("stranger %d: dial %s: %v", i, e.addr, err)
		}
		defer conns[i].Close()
	}
	limit := bootstrap.HandshakeTimeout(timeout) + 2*time.Second // scheduling slack on a loaded machine
	var slowest time.Duration
	for i, c := range conns {
		c.SetReadDeadline(start.Add(limit))
		var b [1]byte
		_, err := c.Read(b[:])
		if err == nil {
			t.Fatalf("stranger %d: the data port sent a byte to a silent stranger", i)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("stranger %d: still open after %v (bootstrap timeout %v): %v", i, limit, timeout, err)
		}
		slowest = max(slowest, time.Since(start))
	}
	t.Logf("%d silent strangers closed within %v", n, slowest.Round(time.Millisecond))

	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warns) != 2 || !strings.Contains(warns[1], "dropped 39 more connection(s)") {
		t.Fatalf("want 2 WARN lines (the first drop, then a count of 39 more), got %d:\n%s", len(warns), strings.Join(warns, ""))
	}
}
