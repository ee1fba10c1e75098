package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

const module = "github.com/mscclpp-go/mscclpp/"

// fileLine is the "name_test.go:12: " prefix t.Log and t.Skip put on a message.
var fileLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// goTest turns the JSON stream into readable lines and records; a line that is
// not JSON (a build error) is printed as it is.
func goTest(in io.Reader, w *bufio.Writer, recordsPath string) error {
	rec, err := os.Create(recordsPath)
	if err != nil {
		return fmt.Errorf("records: %w", err)
	}
	defer rec.Close()
	outputs := map[string][]string{} // package/test -> its output lines
	running := map[string][]string{} // package -> tests with output and no end yet
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Action == "" {
			fmt.Fprintln(w, sc.Text())
			continue
		}
		pkg := strings.TrimPrefix(e.Package, module)
		key := pkg + "/" + e.Test
		name := "go:" + pkg + "." + e.Test
		switch e.Action {
		case "output":
			if _, seen := outputs[key]; !seen && e.Test != "" {
				running[pkg] = append(running[pkg], e.Test)
			}
			outputs[key] = append(outputs[key], e.Output)
			continue
		case "build-output":
			fmt.Fprint(w, e.Output)
			continue
		case "build-fail":
			failed = true
			continue
		}
		if e.Test == "" { // a package's end
			switch e.Action {
			case "pass":
				fmt.Fprintf(w, "ok   go:%s  (%.1f s)\n", pkg, e.Elapsed)
			case "fail":
				failed = true
				unfinished(w, rec, pkg, running[pkg], outputs)
				fmt.Fprintf(w, "FAIL go:%s  (%.1f s)\n", pkg, e.Elapsed)
				printIndented(w, outputs[key])
				fmt.Fprintf(rec, "FAIL go:%s\n", pkg)
			}
			for _, test := range running[pkg] {
				delete(outputs, pkg+"/"+test)
			}
			delete(running, pkg)
			delete(outputs, key)
			continue
		}
		switch e.Action {
		case "pass":
			if !strings.Contains(e.Test, "/") {
				fmt.Fprintf(rec, "PASS %s  (%.1f s)\n", name, e.Elapsed)
			}
		case "fail":
			failed = true
			if top, _, sub := strings.Cut(e.Test, "/"); sub {
				// a failed subtest's lines say why its top-level test failed: keep them for it
				parent := pkg + "/" + top
				outputs[parent] = append(outputs[parent], outputs[key]...)
			} else {
				fmt.Fprintf(w, "FAIL %s  (%.1f s)\n", name, e.Elapsed)
				printIndented(w, outputs[key])
				fmt.Fprintf(rec, "FAIL %s  %s\n", name, failReason(outputs[key]))
			}
		case "skip":
			reason := skipReason(outputs[key])
			fmt.Fprintf(w, "SKIP %s: %s\n", name, reason)
			fmt.Fprintf(rec, "SKIP %s: %s\n", name, reason)
		}
		if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading go test -json: %w", err)
	}
	if failed {
		return errFailed
	}
	return nil
}

// unfinished prints, for a package whose test binary failed, every test of it that
// had output and never ended: the binary died while it ran (a timeout's panic and
// goroutine dump, a crash, os.Exit), and that output is what explains the failure.
// A top-level one is recorded as failed.
func unfinished(w *bufio.Writer, rec io.Writer, pkg string, tests []string, outputs map[string][]string) {
	for _, test := range tests {
		lines, ok := outputs[pkg+"/"+test]
		if !ok {
			continue // it ended
		}
		fmt.Fprintf(w, "FAIL go:%s.%s  (did not finish: the test binary of %s ended while it ran)\n", pkg, test, pkg)
		printIndented(w, lines)
		if !strings.Contains(test, "/") {
			fmt.Fprintf(rec, "FAIL go:%s.%s  %s\n", pkg, test, failReason(lines))
		}
	}
}

// failReason is the line of a failed test's output that most likely says why, for the
// closing summary: a panic's first line, else the last message of t.Error, t.Fatal or
// t.Log (t.Fatal's comes last), else "(no message)".
func failReason(lines []string) string {
	reason := ""
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "panic: ") {
			return clip(t)
		}
		if fileLine.MatchString(l) {
			reason = t
		}
	}
	if reason == "" {
		return "(no message)"
	}
	return clip(reason)
}

// skipReason: the message of t.Skip, without go test's framing lines.
func skipReason(lines []string) string {
	var msg []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		msg = append(msg, strings.TrimSpace(fileLine.ReplaceAllString(l, "")))
	}
	if len(msg) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msg, " ")
}

func printIndented(w *bufio.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprint(w, "    "+l)
		if !strings.HasSuffix(l, "\n") {
			fmt.Fprintln(w)
		}
	}
}
