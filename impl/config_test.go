package impl

import (
	"testing"
	"time"
)

func TestBootstrapTimeoutEnv(t *testing.T) {
	saved := bootstrapTimeoutNs.Load()
	t.Cleanup(func() { bootstrapTimeoutNs.Store(saved) })
	bootstrapTimeoutNs.Store(0)
	for env, want := range map[string]time.Duration{
		"": DefaultBootstrapTimeout, "5": 5 * time.Second, "0": DefaultBootstrapTimeout,
		"-1": DefaultBootstrapTimeout, "x": DefaultBootstrapTimeout, "2.5": DefaultBootstrapTimeout,
		" 2 ": 2 * time.Second, "99999999999": DefaultBootstrapTimeout,
	} {
		t.Setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", env)
		bootOptions() // init reads it
		if got := BootstrapTimeout(); got != want {
			t.Errorf("MSCCLPP_BOOTSTRAP_TIMEOUT=%q: %v, want %v", env, got, want)
		}
	}
	// mscclppSetBootstrapConnTimeout overrides the variable.
	t.Setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", "5")
	if err := SetBootstrapTimeout(3); err != nil {
		t.Fatal(err)
	}
	if got := BootstrapTimeout(); got != 3*time.Second {
		t.Errorf("after SetBootstrapTimeout(3): %v", got)
	}
}

// TestMembarrierEnv: MSCCLPP_MEMBARRIER=0 turns membarrier off (the counting mode); unset, 1, or
// any other value (which is warned about, tests/go/envwarn_test.go) keeps it.
func TestMembarrierEnv(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{{"", true}, {"0", false}, {" 0 ", false}, {"1", true}} {
		t.Setenv("MSCCLPP_MEMBARRIER", tc.v)
		if got := membarrier(); got != tc.want {
			t.Errorf("MSCCLPP_MEMBARRIER=%q: membarrier %v, want %v", tc.v, got, tc.want)
		}
	}
}
