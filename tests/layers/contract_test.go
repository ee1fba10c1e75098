package layers

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The engine's one contract with a transport is the engOps table of impl/engine/transport.h
// (docs/ARCHITECTURE.md): the engine's files name no transport and none of a transport's
// features. transport.h and transport.c, the contract itself, may name them as examples.

// transportWords are the transports, and the features of one that once lived in the engine:
// SHM's eager ring and its landing, Ethernet's waits that read the socket, per-connection
// back-off flags. (The signal lock was SHM's and is the engine's now: every signal goes
// through it, transport.h.)
var transportWords = regexp.MustCompile(`(?i)\b(shm|eth|ethernet|ib|infiniband|p2p)\b` +
	`|\b(land|landPending|landQueued|lander|readSelf|yieldFirst|sleepFirst)\b` +
	`|(?i:eager)`)

// engineFiles are the engine's production files the rule covers.
func engineFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"*.c", "*.h", "*.go"} {
		m, err := filepath.Glob(filepath.Join(root, "impl/engine", pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			base := filepath.Base(p)
			if strings.HasSuffix(base, "_test.go") || base == "transport.h" || base == "transport.c" {
				continue
			}
			out = append(out, p)
		}
	}
	if len(out) < 8 {
		t.Fatalf("found %d engine files: the pattern no longer matches", len(out))
	}
	return out
}

// TestEngineNamesNoTransport: no file of the engine (but the contract, transport.h/.c) names a
// transport or one of a transport's features.
func TestEngineNamesNoTransport(t *testing.T) {
	root := repoRoot(t)
	for _, p := range engineFiles(t, root) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if w := transportWords.FindString(line); w != "" {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s:%d names %q, a transport or a transport's feature: the engine reaches a transport through its engOps table (transport.h) only\n\t%s", rel, i+1, w, strings.TrimSpace(line))
			}
		}
	}
}

// opsTable is a transport's ops table: `const engOps NAME = { ... };`.
var opsTable = regexp.MustCompile(`(?s)const engOps (\w+) = \{(.*?)\};`)

// opsRequired are the entries of engOps every table sets (transport.h: the engine fills the
// others from its named defaults, engOpsFill).
var opsRequired = []string{"name", "op", "sendSignal"}

// TestOpsTablesComplete: every engOps table of a transport sets its name, op and sendSignal with
// designated initializers and spells out no default (transport.h: the engine fills what a table
// leaves out, so no table names an engOpsNo* function).
func TestOpsTablesComplete(t *testing.T) {
	root := repoRoot(t)
	tables := 0
	err := filepath.WalkDir(filepath.Join(root, "impl"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".c") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range opsTable.FindAllStringSubmatch(string(b), -1) {
			tables++
			rel, _ := filepath.Rel(root, path)
			for _, e := range opsRequired {
				if !regexp.MustCompile(`(?m)^\s*\.` + e + `\s*=`).MatchString(m[2]) {
					t.Errorf("%s: ops table %s does not set .%s", rel, m[1], e)
				}
			}
			if strings.Contains(m[2], "engOpsNo") {
				t.Errorf("%s: ops table %s names an engOpsNo* default: leave the entry out, the engine fills it", rel, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tables < 5 {
		t.Fatalf("found %d ops tables: the pattern no longer matches", tables)
	}
}
