package sotest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's root directory (go test runs in the package's directory).
func repoRoot() string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return root
}

// testhooksOnly opens a Go file built only with -tags mscclpp_testhooks: a test harness.
const testhooksOnly = "//go:build mscclpp_testhooks\n"

// productSources returns the product's C, C++ and Go files (tests and test harnesses left out) under dirs.
func productSources(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(repoRoot(), d), func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && e.Name() == "testdata" {
				return filepath.SkipDir
			}
			n := e.Name()
			if e.IsDir() || strings.HasSuffix(n, "_test.go") {
				return nil
			}
			switch filepath.Ext(n) {
			case ".c", ".h", ".cc", ".go":
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if strings.HasPrefix(string(b), testhooksOnly) {
					return nil // a test harness: not in the shipped library
				}
				rel, _ := filepath.Rel(repoRoot(), p)
				out[rel] = string(b)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestErrorTextHasOneHome: error text lives below everything (impl/status's errs.c): no
// layer below capi calls up into it (no weak symbols, no capi* names), the tools layer does
// not depend on the forwarders, and the result-code strings are written once.
func TestErrorTextHasOneHome(t *testing.T) {
	below := productSources(t, "impl", "cuda", "ib")
	capiName := regexp.MustCompile(`\bcapi[A-Z]\w*`)
	for p, s := range below {
		if strings.Contains(s, "__attribute__((weak))") {
			t.Errorf("%s: a weak symbol (an up-call that links only in the library)", p)
		}
		if m := capiName.FindString(s); m != "" && !strings.HasSuffix(p, ".go") {
			t.Errorf("%s: names %s, a capi function: lower layers must not call up into capi", p, m)
		}
	}
	all := productSources(t, "capi", "impl", "cuda", "ib")
	if strings.Contains(all[filepath.Join("capi", "tools.c")], `#include "forward.h"`) {
		t.Errorf("capi/tools.c includes forward.h: the tools layer must not depend on the forwarders")
	}
	var homes []string
	for p, s := range all {
		if strings.Contains(s, `"remote process exited or there was a network error"`) {
			homes = append(homes, p)
		}
	}
	if len(homes) != 1 || homes[0] != filepath.Join("impl", "status", "errs.c") {
		t.Errorf("the result-code strings are written in %v, want only impl/status/errs.c", homes)
	}
}
