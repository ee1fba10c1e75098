package impl

import (
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/env"
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

// TestTransportSettingsDeclared: every variable a built-in transport names in its
// Entry.Settings is an entry of impl/env's table, so transportSettings reads it, and a value set
// reaches the transport's Host.Setting.
func TestTransportSettingsDeclared(t *testing.T) {
	n := 0
	for _, e := range transports {
		for _, name := range e.Settings {
			n++
			if _, ok := env.Declared(name); !ok {
				t.Errorf("transport %s declares %s, which impl/env's table lacks", e.Name, name)
				continue
			}
			t.Setenv(name, " 7 ")
			if got := transportSettings()[name]; got != "7" {
				t.Errorf("transport %s: %s=\" 7 \" reads as %q, want \"7\"", e.Name, name, got)
			}
		}
	}
	if n < 5 {
		t.Fatalf("the transports declare %d variables: the registry is not what this test expects", n)
	}
}
