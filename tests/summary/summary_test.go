package main

import (
	"bytes"
	"errors"
	"fmt"
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
	want := "PASS go:ib.TestA  (0.1 s)\nSKIP go:ib.TestB: libibverbs-dev not installed\nSKIP go:ib.TestC: no RDMA device here\n"
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
	wantLines(t, out.String(),
		"#   go:ib.TestB: libibverbs-dev not installed  [NOT ALLOWED: this machine can run it]\n",
		"#   go:ib.TestC: no RDMA device here  [allowed]\n",
		"#   check-cuda-compile: nvcc not found  [NOT ALLOWED: this machine can run it]\n",
		"2 passed, 0 failed, 3 skipped (2 not allowed)\n")
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

// The closing summary lists the ten slowest checks, slowest first, from every
// file's timed lines (C cases, Go tests, the steps of tests/test.sh), failed
// ones included; lines without a time do not count.
func TestSlowestTen(t *testing.T) {
	dir := t.TempDir()
	var c strings.Builder
	for i := 1; i <= 11; i++ { // case-1 .. case-11 take 1 .. 11 s
		fmt.Fprintf(&c, "PASS case-%d  (%d.0 s)\n", i, i)
	}
	c.WriteString("FAIL slow-failure  (30.5 s)\n    the reason\nPASS untimed\nPASS stop_n4 (10.5s)\n")
	cLog := filepath.Join(dir, "c.log")
	os.WriteFile(cLog, []byte(c.String()), 0o644)
	goRec := filepath.Join(dir, "go.records")
	os.WriteFile(goRec, []byte("PASS go:impl.TestSlow  (12.5 s)\nPASS go-vet  (0.2 s)\n"), 0o644)
	allow := filepath.Join(dir, "allow")
	os.WriteFile(allow, nil, 0o644)
	var out bytes.Buffer
	run([]string{"final", allow, goRec, cLog}, nil, &out)
	got := out.String()
	want := "# the 10 slowest checks:\n#      30.5 s  slow-failure\n#      12.5 s  go:impl.TestSlow\n" +
		"#      11.0 s  case-11\n#      10.5 s  stop_n4\n"
	for i := 10; i >= 5; i-- {
		want += fmt.Sprintf("#   %7.1f s  case-%d\n", float64(i), i)
	}
	want += "15 passed, 1 failed, 0 skipped\n"
	if !strings.Contains(got, want) {
		t.Fatalf("final output lacks\n%s\ngot:\n%s", want, got)
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

// A test still running when its package's test binary died (a timeout's panic,
// a crash) has no end event of its own: its output, which says why, is printed
// under it and the closing list names it with the panic; a C case's failure
// carries its first failed check there.
func TestUnfinishedTestShown(t *testing.T) {
	const stream = `{"Action":"run","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestOK"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestOK","Elapsed":0.1}
{"Action":"run","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestHang"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestHang","Output":"panic: test timed out after 3s\n"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/impl","Test":"TestHang","Output":"goroutine 7 [chan receive]:\n"}
{"Action":"output","Package":"github.com/mscclpp-go/mscclpp/impl","Output":"FAIL\tgithub.com/mscclpp-go/mscclpp/impl\t3.0s\n"}
{"Action":"fail","Package":"github.com/mscclpp-go/mscclpp/impl","Elapsed":3.0}
`
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	var out bytes.Buffer
	err := run([]string{"gotest", rec}, strings.NewReader(stream), &out)
	got := out.String()
	if !errors.Is(err, errFailed) || !strings.Contains(got, "FAIL go:impl.TestHang  (did not finish") ||
		!strings.Contains(got, "    panic: test timed out after 3s\n    goroutine 7 [chan receive]:") ||
		strings.Contains(got, "TestOK") {
		t.Fatalf("gotest: %v\n%s", err, got)
	}
	cLog := filepath.Join(dir, "c.log")
	os.WriteFile(cLog, []byte("FAIL robust_hogs_n2  (1.0 s)\n    [rank 0] hogs rank 0: a 30 ms wait took 31.0 ms\n"+
		"    [rank 0] robust rank 0: robust.cc:87: CHECK FAILED (ms <= t + 50): a 30 ms wait took 99.0 ms\nPASS other  (1.0 s)\n"), 0o644)
	allow := filepath.Join(dir, "allow")
	os.WriteFile(allow, nil, 0o644)
	out.Reset()
	err = run([]string{"final", allow, rec, cLog}, nil, &out)
	wantLines(t, out.String(),
		"# failed: go:impl.TestHang  panic: test timed out after 3s\n",
		"# failed: go:impl\n",
		"# failed: robust_hogs_n2  (1.0 s): [rank 0] robust rank 0: robust.cc:87: CHECK FAILED (ms <= t + 50): a 30 ms wait took 99.0 ms\n",
		"2 passed, 3 failed, 0 skipped\n")
	if !errors.Is(err, errFailed) {
		t.Errorf("final: %v, want errFailed", err)
	}
}

// The reason of a failed test in the records: a panic's line, else its last message.
func TestFailReason(t *testing.T) {
	cases := []struct {
		lines []string
		want  string
	}{
		{[]string{"=== RUN   TestA\n", "    a_test.go:3: a log\n", "    a_test.go:9: the failure\n", "--- FAIL: TestA\n"}, "a_test.go:9: the failure"},
		{[]string{"    a_test.go:3: a log\n", "panic: boom [recovered]\n", "    a_test.go:9: later\n"}, "panic: boom [recovered]"},
		{[]string{"=== RUN   TestA\n", "--- FAIL: TestA\n"}, "(no message)"},
	}
	for _, c := range cases {
		if got := failReason(c.lines); got != c.want {
			t.Errorf("failReason(%q) = %q, want %q", c.lines, got, c.want)
		}
	}
}

// wantLines fails t for each of lines that the summary's output got lacks.
func wantLines(t *testing.T, got string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if !strings.Contains(got, line) {
			t.Errorf("final output lacks %q:\n%s", line, got)
		}
	}
}
