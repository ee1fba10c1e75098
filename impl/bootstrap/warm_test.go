package bootstrap

import (
	"os"
	"testing"
	"time"
)

// Warm finishes promptly and leaves nothing open behind it (its listener and both ends of
// its connection are closed), however often it runs.
func TestWarmLeavesNothingOpen(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(ents)
	}
	Warm() // the first run may open the netpoller's epoll descriptors, which stay
	before := fds()
	start := time.Now()
	for i := 0; i < 3; i++ {
		Warm()
	}
	if d := time.Since(start); d > 3*(warmTimeout+time.Second) {
		t.Fatalf("3 Warm calls took %v", d)
	}
	if after := fds(); after != before {
		t.Fatalf("%d descriptors open before Warm, %d after", before, after)
	}
}
