package sotest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The API list lives in one place, the X-macro of include/mscclpp_tools.h
// (every entry point a tool can intercept); the forwarders (capi/forward.c's
// FWD rows and the few written out), the Go exports (capi/exports.go) and the
// export list above (api, extensions) are checked against it here.

func readRepo(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func names(re *regexp.Regexp, s string) map[string]bool {
	out := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out[m[1]] = true
	}
	return out
}

func sorted[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cDefinitions: the mscclpp* functions defined (not declared) in the product's C and C++ files.
func cDefinitions(t *testing.T) map[string]bool {
	def := regexp.MustCompile(`(?m)^[A-Za-z_][\w \*]*?\b(mscclpp[A-Z]\w*)\([^;{]*\)\s*\{`)
	out := map[string]bool{}
	for p, s := range productSources(t, "capi", "impl", "cuda", "ib") {
		if strings.HasSuffix(p, ".go") {
			continue
		}
		for n := range names(def, s) {
			out[n] = true
		}
	}
	return out
}

func TestAPIListIsOne(t *testing.T) {
	tools := readRepo(t, "include/mscclpp_tools.h")
	i := strings.Index(tools, "#define MSCCLPP_TOOL_FUNCTIONS(X)")
	if i < 0 {
		t.Fatal("no MSCCLPP_TOOL_FUNCTIONS in include/mscclpp_tools.h")
	}
	list := names(regexp.MustCompile(`\bX\((\w+),`), tools[i:])
	if len(list) < 22 {
		t.Fatalf("the X-macro lists %d functions, want the 22 of the API and more", len(list))
	}

	// the forwarders: one FWD row per Go-backed entry point, the rest written out; each with its layer 0
	forward := readRepo(t, "capi/forward.c") + readRepo(t, "capi/regmem.cc")
	fwd := names(regexp.MustCompile(`(?m)^FWD\((\w+),`), forward)
	defined := cDefinitions(t)
	for n := range list {
		if !fwd[n] && !defined["mscclpp"+n] {
			t.Errorf("mscclpp%s is in the X-macro but capi defines no forwarder for it", n)
		}
		if !fwd[n] && !strings.Contains(forward, "capiLib"+n+"(int") {
			t.Errorf("mscclpp%s has no layer 0 (capiLib%s)", n, n)
		}
	}
	for n := range fwd {
		if !list[n] {
			t.Errorf("FWD(%s) is not in the X-macro", n)
		}
	}

	// the Go exports: each one the library half of a listed function, each FWD row backed by one
	goExp := names(regexp.MustCompile(`(?m)^//export go_mscclpp(\w+)$`), readRepo(t, "capi/exports.go"))
	for n := range goExp {
		if !list[n] {
			t.Errorf("//export go_mscclpp%s is not in the X-macro", n)
		}
	}
	for n := range fwd {
		if !goExp[n] {
			t.Errorf("FWD(%s) forwards to go_mscclpp%s, which capi/exports.go does not export", n, n)
		}
	}

	// the export list of TestExportsAndSoname: the listed functions plus the C-only
	// extensions (the host data path, the tool interface), exactly what the C files define
	want := map[string]bool{}
	for _, n := range append(append([]string{}, api...), extensions...) {
		want[n] = true
	}
	got := map[string]bool{}
	for n := range list {
		got["mscclpp"+n] = true
	}
	for n := range defined {
		got[n] = true
	}
	if d := cmp.Diff(sorted(want), sorted(got)); d != "" {
		t.Errorf("the export list of so_test.go differs from the X-macro plus the C definitions (-list +code):\n%s", d)
	}
}
