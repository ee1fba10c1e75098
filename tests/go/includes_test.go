package sotest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestIncludesByPath: C reaches another package's header by its path relative to the
// including file, never through a #cgo -I${SRCDIR} (docs/ARCHITECTURE.md: go/build makes
// such a path absolute, so the clone's directory would enter every cgo package's key in Go's
// build cache), each such path names a header of the tree, and no file declares a Go export
// by hand: C and C++ take them from cgo's _cgo_export.h, which cgo checks against the
// //export functions.
func TestIncludesByPath(t *testing.T) {
	srcdirFlag := regexp.MustCompile(`(?m)^(//)?\s*#cgo\s[^\n]*-I\s*\$\{SRCDIR\}`)
	climbs := regexp.MustCompile(`(?m)^\s*#\s*include\s*"(\.\./[^"]*)"`)
	handDecl := regexp.MustCompile(`(?m)^[^/*#\n]*\b(mscclppResult_t|int|void)\s+go_\w+\s*\([^)]*\)\s*;`)
	root := repoRoot()
	for p, s := range productSources(t, "capi", "impl", "cuda", "ib") {
		if m := srcdirFlag.FindString(s); m != "" {
			t.Errorf("%s: %q: include the header by its relative path instead (an absolute -I enters Go's cache key)", p, strings.TrimSpace(m))
		}
		for _, m := range climbs.FindAllStringSubmatch(s, -1) {
			h := filepath.Join(root, filepath.Dir(p), m[1])
			if _, err := os.Stat(h); err != nil || !strings.HasSuffix(h, ".h") {
				t.Errorf("%s: #include %q names no header of the tree", p, m[1])
			}
		}
		if strings.HasSuffix(p, ".go") {
			continue
		}
		if m := handDecl.FindString(s); m != "" {
			t.Errorf("%s: declares a Go export by hand (%q): include _cgo_export.h", p, strings.TrimSpace(m))
		}
	}
}
