package layers

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// linkname is a //go:linkname directive: a link into another package's internals
// (the Go runtime's), which any Go release may change.
var linkname = regexp.MustCompile(`(?m)^\s*//go:linkname\b`)

// No production Go file of the library links into another package's internals.
func TestNoLinkname(t *testing.T) {
	root := repoRoot(t)
	var found []string
	for _, dir := range []string{"capi", "impl", "cuda", "ib"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if linkname.Match(src) {
				rel, _ := filepath.Rel(root, path)
				found = append(found, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) > 0 {
		t.Errorf("//go:linkname in production code (a dependency on another package's internals): %v", found)
	}
}
