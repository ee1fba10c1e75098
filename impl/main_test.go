package impl

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// testParallel is how many tests marked t.Parallel run at once unless -test.parallel says
// otherwise: most of them wait on child processes, sockets and timers, not on a CPU, so the
// default (GOMAXPROCS) would leave the package waiting one test after another.
const testParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", fmt.Sprint(testParallel))
	}
	code := m.Run()
	if sharedBuilds.dir != "" {
		os.RemoveAll(sharedBuilds.dir)
	}
	os.Exit(code)
}

// sharedBuilds holds what the tests build once per test process (the stand-in CUDA driver,
// the verbs double): each build runs at most once, and its outputs are removed at exit.
var sharedBuilds struct {
	mu    sync.Mutex
	dir   string
	built map[string]*sharedBuild
}

type sharedBuild struct {
	once sync.Once
	path string
	err  error
}

// sharedArtifact returns the path of the artifact name, built by build(dir) into a directory of
// its own the first time any test asks for it; t fails if that build failed.
func sharedArtifact(t *testing.T, name string, build func(dir string) (string, error)) string {
	t.Helper()
	sharedBuilds.mu.Lock()
	if sharedBuilds.built == nil {
		sharedBuilds.built = map[string]*sharedBuild{}
	}
	b := sharedBuilds.built[name]
	if b == nil {
		b = &sharedBuild{}
		sharedBuilds.built[name] = b
	}
	if sharedBuilds.dir == "" {
		dir, err := os.MkdirTemp("", "mscclpp-impl-test-")
		if err != nil {
			sharedBuilds.mu.Unlock()
			t.Fatal(err)
		}
		sharedBuilds.dir = dir
	}
	dir := filepath.Join(sharedBuilds.dir, name)
	sharedBuilds.mu.Unlock()
	b.once.Do(func() {
		if b.err = os.Mkdir(dir, 0o755); b.err == nil {
			b.path, b.err = build(dir)
		}
	})
	if b.err != nil {
		t.Fatalf("building %s: %v", name, b.err)
	}
	return b.path
}
