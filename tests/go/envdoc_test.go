package sotest

import (
	"regexp"
	"testing"
)

// docVar is an entry heading of docs/ENVIRONMENT.md: "### `MSCCLPP_NAME`".
var docVar = regexp.MustCompile("(?m)^### `(MSCCLPP_[A-Z0-9_]+)`")

// codeVar is a string literal that is exactly a variable name, "MSCCLPP_NAME": how the
// library names every variable it reads (an entry of impl/env's table, vars.go, or the one
// getenv of capi/tools.c: settings_test.go holds every other file to them). The header's
// macros (MSCCLPP_VERSION, ...) are never quoted, so they do not count.
var codeVar = regexp.MustCompile(`"(MSCCLPP_[A-Z0-9_]+)"`)

// TestEnvironmentDocMatchesCode: docs/ENVIRONMENT.md has an entry for every MSCCLPP_*
// variable the library's sources read, and the library reads every variable the page has
// an entry for.
func TestEnvironmentDocMatchesCode(t *testing.T) {
	documented := names(docVar, readRepo(t, "docs/ENVIRONMENT.md"))
	read := map[string]string{} // variable -> a file that reads it
	for path, src := range productSources(t, "capi", "impl", "cuda", "ib") {
		for v := range names(codeVar, src) {
			read[v] = path
		}
	}
	if len(read) < 10 || len(documented) < 10 {
		t.Fatalf("the scan found %d variables in the code and %d on the page: the patterns no longer match", len(read), len(documented))
	}
	for v, path := range read {
		if !documented[v] {
			t.Errorf("%s reads %s, which docs/ENVIRONMENT.md has no \"### `%s`\" entry for", path, v, v)
		}
	}
	for _, v := range sorted(documented) {
		if _, ok := read[v]; !ok {
			t.Errorf("docs/ENVIRONMENT.md documents %s, which no library source reads", v)
		}
	}
}
