// Package sotest checks the built libmscclpp.so as a linker and an application see it.
package sotest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// api is the 0.1 API (22 functions) plus the documented extensions.
var api = []string{
	"mscclppGetUniqueId", "mscclppCommInitRank", "mscclppCommInitRankFromId", "mscclppBootstrapAllGather",
	"mscclppBootstrapBarrier", "mscclppCommDestroy", "mscclppGetErrorString", "mscclppConnect",
	"mscclppConnectWithoutBuffer", "mscclppRegisterBufferForConnection", "mscclppConnectionSetup",
	"mscclppGetAllDeviceConnections", "mscclppGetDeviceConnection", "mscclppProxyLaunch", "mscclppProxyStop",
	"mscclppCommRank", "mscclppCommSize", "mscclppSetBootstrapConnTimeout", "mscclppDefaultLogHandler",
	"mscclppSetLogHandler", "mscclppRegisterBuffer", "mscclppRegisteredBufferWrite",
}

var extensions = []string{
	"mscclppGetLastError", "mscclppGetVersion", "mscclppCommGetAsyncError", "mscclppHostAlloc", "mscclppHostFree",
	"mscclppConnOp", "mscclppConnPutHandle", "mscclppConnWait", "mscclppConnWaitNext", "mscclppConnEpochIncrement",
	"mscclppConnSignalOp", "mscclppFifoPush", "mscclppFifoWaitServed", "mscclppCommReport",
	// the tool interface (mscclpp_tools.h)
	"mscclppToolRegisterName", "mscclppToolRegisterFunction", "mscclppToolGetNext", "mscclppToolSetContext",
	"mscclppToolGetContext", "mscclppToolFunctionName", "mscclppToolLayerName", "mscclppToolNumLayers",
}

// library returns the path of the built library, building it into a temp dir when make has not.
func library(t *testing.T) string {
	t.Helper()
	root := repoRoot()
	built := filepath.Join(root, "build", "lib", "libmscclpp.so.0.1.0")
	if _, err := os.Stat(built); err == nil {
		return built
	}
	out := filepath.Join(t.TempDir(), "libmscclpp.so.0.1.0")
	ld := "-extldflags '-Wl,-soname,libmscclpp.so.0 -Wl,--version-script=" + filepath.Join(root, "capi", "exports.map") + "'"
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "-ldflags", ld, "./capi")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	return out
}

func TestExportsAndSoname(t *testing.T) {
	f, err := elf.Open(library(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	soname, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(soname) != 1 || soname[0] != "libmscclpp.so.0" {
		t.Fatalf("SONAME %v (%v), want libmscclpp.so.0", soname, err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var exported, undefined []string
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF {
			undefined = append(undefined, s.Name)
			continue
		}
		if b := elf.ST_BIND(s.Info); b == elf.STB_GLOBAL || b == elf.STB_WEAK {
			exported = append(exported, s.Name)
		}
	}
	want := append(append([]string{}, api...), extensions...)
	sort.Strings(want)
	sort.Strings(exported)
	if d := cmp.Diff(want, exported); d != "" {
		t.Errorf("exported symbols differ (-want +got):\n%s", d)
	}
	for _, u := range undefined {
		if strings.HasPrefix(u, "nvml") || strings.HasPrefix(u, "cu") && !strings.HasPrefix(u, "cur") || strings.HasPrefix(u, "ibv_") {
			t.Errorf("undefined vendor symbol %s: vendor libraries must be loaded at run time", u)
		}
	}
	needed, _ := f.ImportedLibraries()
	for _, n := range needed {
		if strings.Contains(n, "cuda") || strings.Contains(n, "nvidia") || strings.Contains(n, "ibverbs") {
			t.Errorf("links %s: vendor libraries must be loaded at run time", n)
		}
	}
}

// testHook reports whether a symbol of the library's full symbol table (nm, not
// only nm -D) belongs to a test harness: the cgo wrappers of cuda/harness.go, impl/p2p/harness.go and
// ib/harness.go, or a Go function of this module named for tests.
func testHook(name string) bool {
	return strings.Contains(name, "_Cfunc_harness") || strings.Contains(name, "_Cfunc_ibTest") ||
		strings.HasPrefix(name, "github.com/mscclpp-go/mscclpp/") &&
			(strings.Contains(name, ".Test") || strings.Contains(strings.ToLower(name), "harness"))
}

// TestNoTestHooksInLibrary: the shipped library holds only the product; the
// harnesses build only with -tags mscclpp_testhooks (the Go tests' build).
func TestNoTestHooksInLibrary(t *testing.T) {
	f, err := elf.Open(library(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var hooks []string
	for _, s := range syms {
		if testHook(s.Name) {
			hooks = append(hooks, s.Name)
		}
	}
	if len(hooks) != 0 {
		t.Errorf("%d test-only symbols in the library (build the harnesses only with -tags mscclpp_testhooks):\n%s",
			len(hooks), strings.Join(hooks, "\n"))
	}
}
