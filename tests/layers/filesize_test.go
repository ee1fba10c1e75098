package layers

import (
	"bytes"
	"testing"
)

// maxLines bounds a production file: past it a file holds more than one responsibility.
const maxLines = 500

// No production source file (Go, C, headers, the public headers included) is longer
// than maxLines; tests and their test data are exempt.
func TestProductionFilesAtMostMaxLines(t *testing.T) {
	var long []string
	dirs := []string{"capi", "impl", "cuda", "ib", "include", "tools"}
	productionFiles(t, dirs, []string{".go", ".c", ".h", ".cc", ".cu"}, func(rel string, src []byte) {
		if bytes.Count(src, []byte("\n")) > maxLines {
			long = append(long, rel)
		}
	})
	if len(long) > 0 {
		t.Errorf("production files over %d lines (split them by responsibility): %v", maxLines, long)
	}
}
