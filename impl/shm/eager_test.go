package shm

import "testing"

// TestEagerSetting: MSCCLPP_EAGER_BYTES as the core read it: unset is the default, 0 turns
// eager puts off, a value above the ring's largest entry is capped and a malformed one falls
// back to the default.
func TestEagerSetting(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want uint64
	}{{"", defaultEagerBytes}, {"0", 0}, {"100", 100}, {"100000", 64 << 10}, {"abc", defaultEagerBytes}, {"-1", defaultEagerBytes}} {
		if got := eagerSetting(tc.v); got != tc.want {
			t.Errorf("MSCCLPP_EAGER_BYTES=%q: %d, want %d", tc.v, got, tc.want)
		}
	}
}
