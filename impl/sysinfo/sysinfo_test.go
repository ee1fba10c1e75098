package sysinfo

import "testing"

func TestCountCPUList(t *testing.T) {
	for s, want := range map[string]int{"0": 1, "0-3": 4, "0-3,8,10-11": 7, "": 0} {
		if got, err := CountCPUList(s); err != nil || got != want {
			t.Errorf("CountCPUList(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "0-x"} {
		if _, err := CountCPUList(bad); err == nil {
			t.Errorf("CountCPUList(%q) accepted", bad)
		}
	}
	if OnlineCPUs() < 1 {
		t.Fatal("no CPUs online")
	}
}
