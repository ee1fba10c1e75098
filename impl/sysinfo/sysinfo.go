// Package sysinfo answers questions about the machine that the polling policies depend on.
package sysinfo

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

var online = sync.OnceValue(func() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n, err := CountCPUList(strings.TrimSpace(string(b)))
	if err != nil || n == 0 {
		return runtime.NumCPU()
	}
	return n
})

// OnlineCPUs is the number of CPUs of the machine (not of this process's affinity mask: ranks
// pinned to one CPU each are not oversubscribed).
func OnlineCPUs() int { return online() }

// CountCPUList counts the CPUs of a kernel CPU list such as "0-3,8,10-11".
func CountCPUList(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, err
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, err
			}
		}
		if b < a {
			return 0, strconv.ErrRange
		}
		n += b - a + 1
	}
	return n, nil
}

// AllowedCPUs is the number of CPUs the calling thread may run on (its affinity mask, as the
// process was started or pinned); OnlineCPUs when the mask cannot be read.
func AllowedCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() == 0 {
		return OnlineCPUs()
	}
	return set.Count()
}
