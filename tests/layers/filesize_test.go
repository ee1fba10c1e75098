package layers

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines bounds a production file: past it a file holds more than one responsibility.
const maxLines = 500

// No production source file (Go, C, headers, the public headers included) is longer
// than maxLines; tests and their test data are exempt.
func TestProductionFilesAtMostMaxLines(t *testing.T) {
	root := repoRoot(t)
	var long []string
	for _, dir := range []string{"capi", "impl", "cuda", "ib", "include", "tools"} {
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
			switch filepath.Ext(path) {
			case ".go", ".c", ".h", ".cc", ".cu":
			default:
				return nil
			}
			if strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if n := bytes.Count(src, []byte("\n")); n > maxLines {
				rel, _ := filepath.Rel(root, path)
				long = append(long, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(long) > 0 {
		t.Errorf("production files over %d lines (split them by responsibility): %v", maxLines, long)
	}
}
