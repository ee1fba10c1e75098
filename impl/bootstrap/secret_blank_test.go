package bootstrap

import (
	"strings"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestBlankEnvSecret: a secret of only whitespace is refused with InvalidUsage naming the
// variable, on every rank, before any network wait; it is not the empty secret that any
// other blank value would match (' ' on one rank and a tab on another formed a job).
func TestBlankEnvSecret(t *testing.T) {
	for _, blank := range []string{" ", "\t", " \t\r\n"} {
		t.Setenv(EnvSecret, blank)
		addr := loopbackAddr(t)
		opts := Options{Timeout: 5 * time.Second}
		chs := []chan error{initAsync(addr, 0, 2, opts), initAsync(addr, 1, 2, opts)}
		for r, ch := range chs {
			err := waitErr(t, ch, 8*time.Second)
			if status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), EnvSecret) ||
				!strings.Contains(err.Error(), "whitespace") {
				t.Fatalf("secret %q, rank %d: %v; want InvalidUsage saying %s is only whitespace", blank, r, err, EnvSecret)
			}
		}
	}
	// a secret with trailing whitespace is still that secret
	t.Setenv(EnvSecret, "s3cret \n")
	if _, src, err := baseSecret(func(bool, string, ...any) {}); err != nil || src != EnvSecret {
		t.Fatalf("secret with a trailing newline: %v (source %q)", err, src)
	}
}
