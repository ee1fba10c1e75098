package cuda

/*
#include <stdlib.h>
#include "calls.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SysfsRoot is where Topology reads /sys (tests point it elsewhere).
var SysfsRoot = "/sys"

// nvmlLibrary is the NVML library Topology opens (once) on its first call.
var nvmlLibrary = "libnvidia-ml.so.1"

// allowedCPUs returns the CPUs this process may run on (tests replace it).
var allowedCPUs = func() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

var defaultNvml struct {
	once sync.Once
	l    *loader
}

func nvml() *loader {
	defaultNvml.once.Do(func() { defaultNvml.l = newNvmlLoader(nvmlLibrary) })
	return defaultNvml.l
}

// Topology returns the NUMA node (-1 when unknown) of the GPU at busID and the CPUs near it that this process may use: NVML's CPU affinity, else sysfs local_cpulist; no CPUs (and no error) when neither is available, e.g. without NVML or a loaded driver. An error says why an available source could not be used; what was found is still returned.
func Topology(busID string) (numaNode int, cpus []int, err error) {
	return topology(busID, nvml())
}

func topology(busID string, nv *loader) (int, []int, error) {
	id, err := sysfsBusID(busID)
	if err != nil {
		return -1, nil, err
	}
	var errs []error
	dir := filepath.Join(SysfsRoot, "bus", "pci", "devices", id)
	numa := -1
	if b, rerr := os.ReadFile(filepath.Join(dir, "numa_node")); rerr == nil {
		n, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if perr != nil {
			errs = append(errs, fmt.Errorf("%s/numa_node: %q is not a number", dir, strings.TrimSpace(string(b))))
		} else if n >= 0 {
			numa = n
		}
	} else if !errors.Is(rerr, os.ErrNotExist) {
		errs = append(errs, rerr)
	}

	cpus, nerr := nvmlAffinity(nv, busID)
	if nerr != nil {
		errs = append(errs, nerr)
	}
	if cpus == nil {
		if b, rerr := os.ReadFile(filepath.Join(dir, "local_cpulist")); rerr == nil {
			list, perr := parseCPUList(string(b))
			if perr != nil {
				errs = append(errs, fmt.Errorf("%s/local_cpulist: %w", dir, perr))
			}
			cpus = list
		} else if !errors.Is(rerr, os.ErrNotExist) {
			errs = append(errs, rerr)
		}
	}
	if len(cpus) > 0 {
		allowed, aerr := allowedCPUs()
		if aerr != nil {
			errs = append(errs, fmt.Errorf("sched_getaffinity: %w", aerr))
			cpus = nil
		} else {
			cpus = intersect(cpus, allowed)
		}
	}
	if len(cpus) == 0 {
		cpus = nil
	}
	return numa, cpus, errors.Join(errs...)
}

// sysfsBusID turns a driver or NVML bus id ("0000:3B:00.0", "00000000:3B:00.0") into sysfs's ("0000:3b:00.0").
func sysfsBusID(busID string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(busID))
	dom, rest, ok := strings.Cut(s, ":")
	if !ok || strings.Count(rest, ":") != 1 || !strings.Contains(rest, ".") || strings.ContainsAny(s, "/ ") {
		return "", fmt.Errorf("cuda: %q is not a PCI bus id", busID)
	}
	d, err := strconv.ParseUint(dom, 16, 32)
	if err != nil {
		return "", fmt.Errorf("cuda: %q is not a PCI bus id", busID)
	}
	return fmt.Sprintf("%04x:%s", d, rest), nil
}

// nvmlAffinity asks NVML for the CPUs near the GPU; nil and no error when NVML is absent or has no driver.
func nvmlAffinity(nv *loader, busID string) ([]int, error) {
	if nv.load() != nil {
		return nil, nil
	}
	const words = 64 // 4096 CPUs
	set := make([]C.ulong, words)
	cbus := C.CString(busID)
	defer C.free(unsafe.Pointer(cbus))
	var call, msg *C.char
	rc := C.cuwNvmlCpuAffinity((*C.cuwNvml)(nv.Table()), cbus, &set[0], words, &call, &msg)
	if rc != 0 {
		if C.GoString(call) == "nvmlInit_v2" {
			return nil, nil // no driver, no GPU: nothing to bind to
		}
		return nil, fmt.Errorf("%s(%s): %s (NVML %d)", C.GoString(call), busID, C.GoString(msg), int(rc))
	}
	var cpus []int
	for w, v := range set {
		for b := 0; b < 64; b++ {
			if uint64(v)&(1<<b) != 0 {
				cpus = append(cpus, w*64+b)
			}
		}
	}
	return cpus, nil
}

// parseCPUList parses a kernel CPU list such as "0-3,8,10-11".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// intersect returns the sorted CPUs in both a and b, without duplicates.
func intersect(a, b []int) []int {
	in := make(map[int]bool, len(b))
	for _, c := range b {
		in[c] = true
	}
	var out []int
	for _, c := range a {
		if in[c] {
			out = append(out, c)
			in[c] = false
		}
	}
	sort.Ints(out)
	return out
}
