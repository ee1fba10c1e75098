// Package layers checks which way the library's imports point (docs/ARCHITECTURE.md):
// every package of capi/, impl/, cuda/ and ib/ has a layer, and a package imports only
// packages of lower layers. Two packages of one layer never import each other, so the
// vendor bindings (cuda, ib) and the engine stay apart, and a transport never reaches
// another transport, the communicator core or capi.
package layers

import (
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/mscclpp-go/mscclpp/"

// layer of every product package (the path below the module). A new package must be placed
// here: the test fails until it is.
var layer = map[string]int{
	// 0-2: the ground every layer stands on: settings, result codes, logging, dlopen, memory.
	"impl/env": 0, "impl/status": 0, "impl/sysinfo": 0,
	"impl/logx": 1, "impl/dynlib": 1,
	"impl/hostmem": 2,
	// 3: the vendor bindings, the C engine, the node segment and the bootstrap network.
	"cuda": 3, "ib": 3, "impl/engine": 3, "impl/nodeshm": 3, "impl/bootstrap": 3,
	// 4: the contract between the core and a transport; 5: the CUDA-mode proxy that three
	// transports share, built on that contract.
	"impl/transport": 4, "impl/cudaproxy": 5,
	// 6: the transports, each in its own folder.
	"impl/shm": 6, "impl/p2p": 6, "impl/eth": 6, "impl/ib": 6,
	"impl/eth/ethfuzz": 6, // test support: Ethernet's C frame decoder for Go fuzz tests
	// 7: the communicator core (with the registry of transports); 8: the C API.
	"impl": 7,
	"capi": 8,
}

// allowed are the imports that break the rule, each with the reason it stands. The test fails
// when one is no longer needed, so the list only shrinks.
var allowed = map[[2]string]string{
	// P2P in host mode is SHM: it makes an SHM transport of its own (impl/p2p/hostmode.go).
	{"impl/p2p", "impl/shm"}: "P2P's host mode carries its connections as SHM",
}

// productImports returns, for every package under the product folders, the product packages
// it imports (its non-test Go files, as the default build context selects them).
func productImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, top := range []string{"capi", "impl", "cuda", "ib"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			p, err := build.ImportDir(path, 0)
			if _, none := err.(*build.NoGoError); none {
				return nil
			}
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			out[rel] = nil
			for _, imp := range p.Imports {
				if strings.HasPrefix(imp, module) {
					out[rel] = append(out[rel], strings.TrimPrefix(imp, module))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", "..")) // go test runs in the package's directory
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// upward returns, sorted, every import of imports that does not point to a lower layer and is
// not in allowed (one message each), every package with no layer, and the allowed pairs that
// no import uses any more.
func upward(imports map[string][]string, layer map[string]int, allowed map[[2]string]string) []string {
	var bad []string
	used := map[[2]string]bool{}
	for p, qs := range imports {
		lp, ok := layer[p]
		if !ok {
			bad = append(bad, fmt.Sprintf("package %s has no layer: place it in layers_test.go (and docs/ARCHITECTURE.md)", p))
			continue
		}
		for _, q := range qs {
			lq, ok := layer[q]
			if !ok || lq < lp {
				continue // an unplaced q is reported on its own
			}
			if _, ok := allowed[[2]string{p, q}]; ok {
				used[[2]string{p, q}] = true
				continue
			}
			bad = append(bad, fmt.Sprintf("%s (layer %d) imports %s (layer %d): imports must point to a lower layer", p, lp, q, lq))
		}
	}
	for e := range allowed {
		if !used[e] {
			bad = append(bad, fmt.Sprintf("the allowed import %s -> %s is gone: remove it from the list", e[0], e[1]))
		}
	}
	sort.Strings(bad)
	return bad
}

func TestImportsPointDown(t *testing.T) {
	imports := productImports(t, repoRoot(t))
	if len(imports) < 5 {
		t.Fatalf("found only %d packages: is the repository root right?", len(imports))
	}
	for _, msg := range upward(imports, layer, allowed) {
		t.Error(msg)
	}
	for e, why := range allowed {
		t.Logf("allowed: %s imports %s: %s", e[0], e[1], why)
	}
	for p := range layer {
		if _, ok := imports[p]; !ok {
			t.Errorf("the table places %s, which no longer exists", p)
		}
	}
}

// TestUpwardFindsWhatBreaksTheRule runs the check on a made-up graph, with the real layer
// table: the imports that point down or sideways-allowed pass, and each kind of import that
// breaks the rule is reported, and nothing else.
func TestUpwardFindsWhatBreaksTheRule(t *testing.T) {
	imports := map[string][]string{
		"capi":        {"impl", "impl/status"},           // down: fine
		"impl":        {"impl/shm", "capi"},              // the core reaching the C API
		"impl/p2p":    {"impl/shm", "impl/transport"},    // the allowed exception, then down
		"impl/eth":    {"impl/ib", "cuda"},               // a transport reaching another (same layer)
		"impl/engine": {"impl/shm", "impl/env"},          // the engine naming a transport
		"ib":          {"impl/ib"},                       // a binding reaching its transport
		"impl/shm":    {"impl/engine", "not/placed/pkg"}, // down; an unplaced import is not this row's
		"newpkg":      {"impl/env"},                      // a package with no layer
	}
	stale := map[[2]string]string{
		{"impl/p2p", "impl/shm"}: "test",
		{"cuda", "ib"}:           "nobody imports this any more",
	}
	got := upward(imports, layer, stale)
	want := []string{
		"ib (layer 3) imports impl/ib (layer 6): imports must point to a lower layer",
		"impl (layer 7) imports capi (layer 8): imports must point to a lower layer",
		"impl/engine (layer 3) imports impl/shm (layer 6): imports must point to a lower layer",
		"impl/eth (layer 6) imports impl/ib (layer 6): imports must point to a lower layer",
		"package newpkg has no layer: place it in layers_test.go (and docs/ARCHITECTURE.md)",
		"the allowed import cuda -> ib is gone: remove it from the list",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("upward reported:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
