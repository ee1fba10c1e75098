package sotest

import (
	"regexp"
	"strings"
	"testing"
)

// TestIncludesByPath: C reaches another package's header through the #cgo CFLAGS -I path,
// never by a relative path that climbs out of its folder (docs/ARCHITECTURE.md), and no
// file declares a Go export by hand: C and C++ take them from cgo's _cgo_export.h, which
// cgo checks against the //export functions.
func TestIncludesByPath(t *testing.T) {
	climbs := regexp.MustCompile(`(?m)^\s*#\s*include\s*"\.\./`)
	handDecl := regexp.MustCompile(`(?m)^[^/*#\n]*\b(mscclppResult_t|int|void)\s+go_\w+\s*\([^)]*\)\s*;`)
	for p, s := range productSources(t, "capi", "impl", "cuda", "ib") {
		if m := climbs.FindString(s); m != "" {
			t.Errorf("%s: %q climbs out of its folder: add the folder to #cgo CFLAGS -I instead", p, strings.TrimSpace(m))
		}
		if strings.HasSuffix(p, ".go") {
			continue
		}
		if m := handDecl.FindString(s); m != "" {
			t.Errorf("%s: declares a Go export by hand (%q): include _cgo_export.h", p, strings.TrimSpace(m))
		}
	}
}
