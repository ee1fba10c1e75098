package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Paths of the stand-in libraries built from testdata/ by TestMain.
var (
	fakeCuda       string // testdata/fakecuda.c
	fakeCudaOldIpc string // the same, exporting cuIpcOpenMemHandle instead of _v2
	fakeCudaNoHtoD string // the same, without cuMemcpyHtoDAsync_v2
	fakeNvml       string // testdata/fakenvml.c
)

func cc() string {
	if c := os.Getenv("CC"); c != "" {
		return c
	}
	if _, err := exec.LookPath("cc"); err == nil {
		return "cc"
	}
	return "gcc"
}

func buildFake(dir, src, out string, defs ...string) (string, error) {
	path := filepath.Join(dir, out)
	args := append([]string{"-shared", "-fPIC", "-O1", "-o", path}, defs...)
	args = append(args, filepath.Join("testdata", src), "-lpthread")
	if b, err := exec.Command(cc(), args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %v: %v\n%s", cc(), args, err, b)
	}
	return path, nil
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cuda-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, f := range []struct {
		dst      *string
		src, out string
		defs     []string
	}{
		{&fakeCuda, "fakecuda.c", "libfakecuda.so", nil},
		{&fakeCudaOldIpc, "fakecuda.c", "libfakecuda-oldipc.so", []string{"-DFAKE_OLD_IPC"}},
		{&fakeCudaNoHtoD, "fakecuda.c", "libfakecuda-nohtod.so", []string{"-DFAKE_NO_HTOD"}},
		{&fakeNvml, "fakenvml.c", "libfakenvml.so", nil},
	} {
		if *f.dst, err = buildFake(dir, f.src, f.out, f.defs...); err != nil {
			fmt.Fprintln(os.Stderr, "building the test libraries:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
