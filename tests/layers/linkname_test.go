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

// productionFiles calls fn with the path (relative to the repository) and contents of every
// production source file below dirs whose extension is in exts: no _test.go file, nothing
// below a testdata folder.
func productionFiles(t *testing.T, dirs, exts []string, fn func(rel string, src []byte)) {
	t.Helper()
	root := repoRoot(t)
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			ext := filepath.Ext(path)
			keep := false
			for _, e := range exts {
				keep = keep || ext == e
			}
			if !keep || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			fn(rel, src)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// No production Go file of the library links into another package's internals.
func TestNoLinkname(t *testing.T) {
	var found []string
	productionFiles(t, []string{"capi", "impl", "cuda", "ib"}, []string{".go"}, func(rel string, src []byte) {
		if linkname.Match(src) {
			found = append(found, rel)
		}
	})
	if len(found) > 0 {
		t.Errorf("//go:linkname in production code (a dependency on another package's internals): %v", found)
	}
}
