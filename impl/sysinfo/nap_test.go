package sysinfo

import (
	"testing"
	"time"
)

func TestNapSleepsAtLeastD(t *testing.T) {
	for _, d := range []time.Duration{50 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
		start := time.Now()
		Nap(d)
		if el := time.Since(start); el < d {
			t.Errorf("Nap(%v) returned after %v", d, el)
		}
	}
}
