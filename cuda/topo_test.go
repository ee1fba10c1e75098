package cuda

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeSysfs makes SysfsRoot a temp dir holding the given files of PCI device id, and allows cpus 0..127.
func fakeSysfs(t *testing.T, id string, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "bus", "pci", "devices", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oldRoot, oldAllowed := SysfsRoot, allowedCPUs
	SysfsRoot = root
	allowedCPUs = func() ([]int, error) {
		var all []int
		for i := 0; i < 128; i++ {
			all = append(all, i)
		}
		return all, nil
	}
	t.Cleanup(func() { SysfsRoot, allowedCPUs = oldRoot, oldAllowed })
}

func TestSysfsBusID(t *testing.T) {
	for in, want := range map[string]string{
		"0000:3B:00.0":     "0000:3b:00.0",
		"00000000:3B:00.0": "0000:3b:00.0",
		"0001:af:1f.7":     "0001:af:1f.7",
	} {
		if got, err := sysfsBusID(in); err != nil || got != want {
			t.Errorf("sysfsBusID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "3b:00.0", "0000:3b:00", "zz:3b:00.0", "0000:../../x:00.0", "0000:3b:00.0:1"} {
		if got, err := sysfsBusID(bad); err == nil {
			t.Errorf("sysfsBusID(%q) = %q, want an error", bad, got)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{
		"0-3,8,10-11\n": {0, 1, 2, 3, 8, 10, 11},
		"5":             {5},
		"":              nil,
		"\n":            nil,
	} {
		if got, err := parseCPUList(in); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "1,,2", "-1", "0-x"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) succeeded", bad)
		}
	}
}

func TestTopologySysfs(t *testing.T) {
	noNvml := newNvmlLoader("/nonexistent/libnvidia-ml.so.1")
	fakeSysfs(t, "0000:3b:00.0", map[string]string{"numa_node": "1\n", "local_cpulist": "0-3,8,10-11\n"})
	numa, cpus, err := topology("0000:3B:00.0", noNvml)
	if err != nil || numa != 1 || !reflect.DeepEqual(cpus, []int{0, 1, 2, 3, 8, 10, 11}) {
		t.Errorf("topology = %d, %v, %v", numa, cpus, err)
	}
	// only the CPUs this process may use
	allowedCPUs = func() ([]int, error) { return []int{2, 3, 4, 11}, nil }
	if _, cpus, _ := topology("0000:3B:00.0", noNvml); !reflect.DeepEqual(cpus, []int{2, 3, 11}) {
		t.Errorf("restricted to 2,3,4,11: %v", cpus)
	}
	allowedCPUs = func() ([]int, error) { return []int{5}, nil }
	if _, cpus, _ := topology("0000:3B:00.0", noNvml); cpus != nil {
		t.Errorf("no allowed CPU near the GPU: %v, want none", cpus)
	}
}

func TestTopologySysfsOdd(t *testing.T) {
	noNvml := newNvmlLoader("/nonexistent/libnvidia-ml.so.1")
	fakeSysfs(t, "0000:3b:00.0", map[string]string{"numa_node": "-1\n", "local_cpulist": "0-1\n"})
	if numa, cpus, err := topology("0000:3b:00.0", noNvml); err != nil || numa != -1 || len(cpus) != 2 {
		t.Errorf("numa_node -1: %d, %v, %v", numa, cpus, err)
	}
	fakeSysfs(t, "0000:3b:00.0", map[string]string{"numa_node": "x\n", "local_cpulist": "0-1\n"})
	if numa, cpus, err := topology("0000:3b:00.0", noNvml); err == nil || numa != -1 || len(cpus) != 2 ||
		!strings.Contains(err.Error(), "numa_node") {
		t.Errorf("bad numa_node: %d, %v, %v; want an error and the CPUs", numa, cpus, err)
	}
	// no such device in sysfs, no NVML: nothing, and no error
	if numa, cpus, err := topology("0000:01:00.0", noNvml); err != nil || numa != -1 || cpus != nil {
		t.Errorf("unknown device: %d, %v, %v", numa, cpus, err)
	}
	if _, _, err := topology("nonsense", noNvml); err == nil {
		t.Error("a malformed bus id gave no error")
	}
}

func TestTopologyNvml(t *testing.T) {
	fakeSysfs(t, "0000:3c:00.0", map[string]string{"numa_node": "0\n", "local_cpulist": "8-9\n"})
	nv := newNvmlLoader(fakeNvml)
	numa, cpus, err := topology("0000:3B:00.0", nv)
	if err != nil || numa != -1 || !reflect.DeepEqual(cpus, []int{1, 3, 64}) {
		t.Errorf("NVML's affinity: %d, %v, %v; want -1, [1 3 64]", numa, cpus, err)
	}
	// NVML does not know the GPU: its error, and sysfs's answer
	numa, cpus, err = topology("0000:3C:00.0", nv)
	if err == nil || !strings.Contains(err.Error(), "nvmlDeviceGetHandleByPciBusId_v2(0000:3C:00.0): Not Found") ||
		numa != 0 || !reflect.DeepEqual(cpus, []int{8, 9}) {
		t.Errorf("unknown to NVML: %d, %v, %v", numa, cpus, err)
	}
}

func TestTopologyWithoutNvml(t *testing.T) {
	fakeSysfs(t, "0000:3b:00.0", nil)
	for _, name := range []string{"/nonexistent/libnvidia-ml.so.1", "libc.so.6", "libnvidia-ml.so.1"} {
		// the system's libnvidia-ml.so.1, where present without a driver, fails nvmlInit (9)
		numa, cpus, err := topology("0000:3b:00.0", newNvmlLoader(name))
		if name == "libnvidia-ml.so.1" && err != nil && strings.Contains(err.Error(), "nvmlDevice") {
			t.Logf("%s: a driver is loaded here: %v", name, err)
			continue
		}
		if err != nil || numa != -1 || cpus != nil {
			t.Errorf("%s: %d, %v, %v; want no binding and no error", name, numa, cpus, err)
		}
	}
	// the package's own NVML (the system's, loaded once)
	if _, _, err := Topology("0000:3b:00.0"); err != nil && !strings.Contains(err.Error(), "nvml") {
		t.Errorf("Topology: %v", err)
	}
}

func TestAllowedCPUs(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("allowedCPUs = %v, %v", cpus, err)
	}
}
