// Package layers checks which way the library's imports point (docs/ARCHITECTURE.md):
// every package of capi/, impl/, cuda/ and ib/ has a layer, and a package imports only
// packages of lower layers. Two packages of one layer never import each other, so the
// vendor bindings (cuda, ib) and the engine stay apart, and a transport never reaches
// another transport, the communicator core or capi.
package layers

import (
	"go/build"
	"os"
	"path/filepath"
	"runtime"
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
	// 4: what transports are built from: their contract and the shared CUDA-mode proxy.
	"impl/transport": 4, "impl/cudaproxy": 4,
	// 5: the transports, each in its own folder.
	"impl/shm": 5, "impl/p2p": 5, "impl/eth": 5, "impl/ib": 5,
	"impl/eth/ethfuzz": 5, // test support: Ethernet's C frame decoder for Go fuzz tests
	// 6: the communicator core (with the registry of transports); 7: the C API.
	"impl": 6,
	"capi": 7,
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
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func TestImportsPointDown(t *testing.T) {
	imports := productImports(t, repoRoot(t))
	if len(imports) < 5 {
		t.Fatalf("found only %d packages: is the repository root right?", len(imports))
	}
	used := map[[2]string]bool{}
	var pkgs []string
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		lp, ok := layer[p]
		if !ok {
			t.Errorf("package %s has no layer: place it in layers_test.go (and docs/ARCHITECTURE.md)", p)
			continue
		}
		for _, q := range imports[p] {
			lq, ok := layer[q]
			if !ok || lq < lp {
				continue // an unplaced q is reported on its own
			}
			if why, ok := allowed[[2]string{p, q}]; ok {
				used[[2]string{p, q}] = true
				t.Logf("allowed: %s (layer %d) imports %s (layer %d): %s", p, lp, q, lq, why)
				continue
			}
			t.Errorf("%s (layer %d) imports %s (layer %d): imports must point to a lower layer", p, lp, q, lq)
		}
	}
	for e := range allowed {
		if !used[e] {
			t.Errorf("the allowed import %s -> %s is gone: remove it from the list", e[0], e[1])
		}
	}
	for p := range layer {
		if _, ok := imports[p]; !ok {
			t.Errorf("the table places %s, which no longer exists", p)
		}
	}
}

// TestNoCycle checks that the import graph (with the allowed exceptions) has no circle: Go
// refuses a circle among Go imports, and this also covers the table's exceptions.
func TestNoCycle(t *testing.T) {
	imports := productImports(t, repoRoot(t))
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var path []string
	var visit func(p string)
	visit = func(p string) {
		color[p] = grey
		path = append(path, p)
		for _, q := range imports[p] {
			switch color[q] {
			case grey:
				t.Errorf("import circle: %s -> %s", strings.Join(path, " -> "), q)
			case white:
				visit(q)
			}
		}
		path = path[:len(path)-1]
		color[p] = black
	}
	for p := range imports {
		if color[p] == white {
			visit(p)
		}
	}
}

// TestTheRuleBites feeds the check a graph with an upward import: it must report it.
func TestTheRuleBites(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"impl/engine", "impl/shm"}, // the engine naming a transport
		{"ib", "impl/ib"},           // a binding reaching its transport
		{"impl/transport", "impl"},  // the contract reaching the core
		{"impl/eth", "impl/ib"},     // a transport reaching another
		{"impl", "capi"},            // the core reaching the C API
	} {
		lf, lt := layer[c.from], layer[c.to]
		_, exempt := allowed[[2]string{c.from, c.to}]
		if lt < lf || exempt {
			t.Errorf("%s -> %s would pass the check", c.from, c.to)
		}
	}
}
