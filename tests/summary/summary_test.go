package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goJSON = `{"Action":"run","Package":"github.com/mscclpp-go/mscclpp/ib","Test":"TestA"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/ib","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"github.com/mscclpp-go/mscclpp/ib","Test":"TestA","Elapsed":0.1}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/ib","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/ib","Test":"TestB","Output":"    ib_test.go:35: libibverbs-dev not installed\n"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/ib","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}
{"Action":"skip","Package":"github.com/mscclpp-go/mscclpp/ib","Test":"TestB","Elapsed":0}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/ib","Test":"TestC","Output":"    ib_test.go:516: no RDMA device here\n"}
{"Action":"skip","Package":"github.com/mscclpp-go/mscclpp/ib","Test":"TestC","Elapsed":0}
{"Action":"pass","Package":"github.com/mscclpp-go/mscclpp/ib","Elapsed":1.5}
`

// The Go stream becomes records with each skip's reason; the final summary
// counts them with the C suite's lines and fails, in strict mode only, on a
// skip the allow-list does not cover.
func TestSummary(t *testing.T) {
	dir := t.TempDir()
	goRec := filepath.Join(dir, "go.records")
	var out bytes.Buffer
	if err := run([]string{"gotest", goRec}, strings.NewReader(goJSON), &out); err != nil {
		t.Fatalf("gotest: %v\n%s", err, out.String())
	}
	rec, _ := os.ReadFile(goRec)
	want := "PASS go:ib.TestA\nSKIP go:ib.TestB: libibverbs-dev not installed\nSKIP go:ib.TestC: no RDMA device here\n"
	if string(rec) != want {
		t.Fatalf("records:\n%s\nwant:\n%s", rec, want)
	}
	cLog := filepath.Join(dir, "c.log")
	os.WriteFile(cLog, []byte("PASS bootstrap-n2  (1.0 s)\n    PASS not a case line\nSKIP check-cuda-compile: nvcc not found\n"), 0o644)
	allow := filepath.Join(dir, "allow")
	os.WriteFile(allow, []byte("# hardware\n: no RDMA device\\b\n"), 0o644)

	out.Reset()
	if err := run([]string{"final", allow, goRec, cLog}, nil, &out); err != nil {
		t.Fatalf("final (not strict): %v\n%s", err, out.String())
	}
	got := out.String()
	for _, line := range []string{
		"#   go:ib.TestB: libibverbs-dev not installed  [NOT ALLOWED: this machine can run it]\n",
		"#   go:ib.TestC: no RDMA device here  [allowed]\n",
		"#   check-cuda-compile: nvcc not found  [NOT ALLOWED: this machine can run it]\n",
		"2 passed, 0 failed, 3 skipped (2 not allowed)\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("final output lacks %q:\n%s", line, got)
		}
	}
	out.Reset()
	if err := run([]string{"final", allow, "--strict", goRec, cLog}, nil, &out); !errors.Is(err, errFailed) {
		t.Errorf("strict final with skips not allowed: %v, want errFailed", err)
	}
	os.WriteFile(cLog, []byte("FAIL datapath-n2  (1.0 s)\n"), 0o644)
	out.Reset()
	if err := run([]string{"final", allow, goRec, cLog}, nil, &out); !errors.Is(err, errFailed) ||
		!strings.Contains(out.String(), "1 passed, 1 failed, 2 skipped") {
		t.Errorf("final with a failure: %v\n%s", err, out.String())
	}
}

// A failed subtest's message is printed under its top-level test, whose own
// lines carry no reason.
func TestSubtestFailureShown(t *testing.T) {
	const stream = `{"Action":"run","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestX"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestX","Output":"=== RUN   TestX\n"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestX/sub","Output":"    x_test.go:7: the reason\n"}
{"Action":"fail","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestX/sub","Elapsed":0.1}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestX","Output":"--- FAIL: TestX (0.10s)\n"}
{"Action":"fail","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestX","Elapsed":0.1}
{"Action":"fail","Package":"github.com/mscclpp-go/mscclpp/impl","Elapsed":0.2}
`
	var out bytes.Buffer
	err := run([]string{"gotest", filepath.Join(t.TempDir(), "rec")}, strings.NewReader(stream), &out)
	if !errors.Is(err, errFailed) || !strings.Contains(out.String(), "x_test.go:7: the reason") {
		t.Fatalf("gotest: %v\n%s", err, out.String())
	}
}
