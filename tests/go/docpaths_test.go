package sotest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPath is a path into this repository as the docs write it: a top-level
// folder of the repository and what follows, or a top-level file. A path with
// a placeholder in it (impl/<name>/, tests/c/*.c, {a,b}) is a pattern, not a
// path, and is not checked.
var docPath = regexp.MustCompile(`(?:^|[\s` + "`" + `(\[])((?:capi|impl|cuda|ib|include|pkgconfig|tests|tools|docs|\.ci)/[^\s` + "`" + `()\[\]"',;]*|Makefile|README\.md|CHANGELOG\.md|LICENSE)`)

// docFiles are the pages a user reads: README.md, every page of docs/, the tools' and ib/'s READMEs.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"} // not CHANGELOG.md: history names files since moved
	for _, glob := range []string{"docs/*.md", "tools/*/README.md", "ib/README.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot(), glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(repoRoot(), p)
			files = append(files, rel)
		}
	}
	return files
}

// TestDocsNameFilesThatExist: every repository path a page names exists.
func TestDocsNameFilesThatExist(t *testing.T) {
	checked := 0
	for _, doc := range docFiles(t) {
		for _, m := range docPath.FindAllStringSubmatch(readRepo(t, doc), -1) {
			p := strings.TrimRight(m[1], ".:")
			if strings.ContainsAny(p, "<>*{}$") || strings.Contains(p, "...") || strings.Contains(p, "…") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(repoRoot(), p)); err != nil {
				t.Errorf("%s names %s, which does not exist", doc, p)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d paths found in the docs: the pattern no longer matches how they write paths", checked)
	}
}
