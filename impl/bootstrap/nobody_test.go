package bootstrap

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// A rank joining an address where nobody listens says so within a few retries (a WARN line
// naming the address), keeps retrying until the bootstrap timeout, and its error says so too.
func TestJoinNobodyListens(t *testing.T) {
	t.Setenv("MSCCLPP_DEBUG", "WARN")
	t.Setenv("MSCCLPP_DEBUG_FILE", "")
	os.Unsetenv("MSCCLPP_DEBUG_FILE")
	logx.Reset()
	var mu sync.Mutex
	var told time.Time
	var line string
	start := time.Now()
	logx.SetHandler(func(l string) {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(l, "nobody listens at") && told.IsZero() {
			told, line = time.Now(), l
		}
	})
	t.Cleanup(func() {
		logx.SetHandler(nil)
		logx.Reset()
	})
	addr := deadAddr(t)
	const timeout = 4 * time.Second
	_, err := InitAddr(addr, 1, 2, Options{Timeout: timeout})
	took := time.Since(start)
	if err := codeErr(err, status.RemoteError, "no answer from the root at "+addr+" within the bootstrap timeout (4s): nobody listens at "+addr); err != nil {
		t.Error(err)
	}
	if took < timeout {
		t.Errorf("gave up after %v, before the bootstrap timeout (%v)", took, timeout)
	}
	mu.Lock()
	defer mu.Unlock()
	if told.IsZero() {
		t.Fatalf("no line said that nobody listens at %s", addr)
	}
	if d := told.Sub(start); d > 2500*time.Millisecond {
		t.Errorf("the line saying nobody listens came after %v: %s", d, line)
	}
	if !strings.Contains(line, "nobody listens at "+addr) || !strings.Contains(line, "Retrying until the bootstrap timeout (4s)") {
		t.Errorf("the line does not name the address and the retries: %s", line)
	}
}
