//go:build mscclpp_testhooks

package engine

import "testing"

// The biased lock (bias.h) excludes: threads that start together count under each of many
// fresh locks without losing an increment, while the first taker owns a lock's bias and the
// others revoke it, also when its owner lost the CPU inside. One thread keeps its bias; without
// membarrier mode there is none.
func TestBiasLockExcludes(t *testing.T) {
	h := newPollHarness(1, false) // a context: the process decides how host calls hold contexts
	defer h.free()
	const nLocks, rounds = 500, 16
	t.Logf("membarrier mode: %v", MembarrierMode())
	for _, threads := range []int{1, 2, 4} {
		bad, biased, revoked := BiasStress(threads, nLocks, rounds)
		if bad != 0 {
			t.Fatalf("%d threads: %d of %d locks lost increments", threads, bad, nLocks)
		}
		switch {
		case !MembarrierMode():
			if biased != 0 || revoked != 0 {
				t.Errorf("%d threads without membarrier mode: %d takes through a bias, %d biases revoked; want none", threads, biased, revoked)
			}
		case threads == 1:
			if biased != nLocks*rounds || revoked != 0 {
				t.Errorf("one thread: %d of %d takes through the bias, %d biases revoked; want all, none", biased, nLocks*rounds, revoked)
			}
		default:
			if revoked != nLocks || biased == 0 {
				t.Errorf("%d threads: %d of %d biases revoked, %d takes through a bias; want all revoked, some taken", threads, revoked, nLocks, biased)
			}
		}
	}
}
