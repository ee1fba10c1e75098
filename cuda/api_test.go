package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDeclarationsMatchToolkit compiles testdata/api_check.c, which checks
// every hand-written declaration of cuapi.h against the toolkit's cuda.h and
// nvml.h, where a toolkit is installed (CUDA_HOME, /usr/local/cuda, /usr).
func TestDeclarationsMatchToolkit(t *testing.T) {
	var inc string
	for _, dir := range []string{os.Getenv("CUDA_HOME"), "/usr/local/cuda", "/usr"} {
		if dir == "" {
			continue
		}
		d := filepath.Join(dir, "include")
		if _, err := os.Stat(filepath.Join(d, "cuda.h")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "nvml.h")); err != nil {
			continue
		}
		inc = d
		break
	}
	if inc == "" {
		t.Skip("no CUDA toolkit headers (cuda.h, nvml.h) here")
	}
	out := filepath.Join(t.TempDir(), "api_check.o")
	cmd := exec.Command(cc(), "-std=c11", "-Wall", "-Werror", "-c", "-I"+inc, "-I.", "-I../impl/dynlib",
		filepath.Join("testdata", "api_check.c"), "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, b)
	}
	t.Logf("cuapi.h matches %s/cuda.h and nvml.h", inc)
}
