package bootstrap

import (
	"os"
	"strings"
	"testing"
	"time"
)

// sockets is the set of this process's open sockets ("socket:[inode]").
func sockets(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			out[l] = true
		}
	}
	return out
}

// Warm finishes promptly and leaves no socket open behind it (its listener and both ends
// of its connection are closed when it returns), however often it runs.
func TestWarmLeavesNothingOpen(t *testing.T) {
	before := sockets(t)
	start := time.Now()
	for i := 0; i < 3; i++ {
		Warm()
	}
	if d := time.Since(start); d > 3*(warmTimeout+time.Second) {
		t.Fatalf("3 Warm calls took %v", d)
	}
	for s := range sockets(t) {
		if !before[s] {
			t.Fatalf("%s open after Warm returned", s)
		}
	}
}
