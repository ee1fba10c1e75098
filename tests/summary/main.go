// Command summary counts every check of `make test` (tests/test.sh) and says
// which skipped and why.
//
//	summary gotest RECORDS < go-test-json   the `go test -json` stream: prints a
//	    line per package, the output of failing tests (also of a test that was
//	    running when its package's binary died: a timeout, a crash) and a SKIP
//	    line per skipped test; writes "PASS name  (1.2 s)", "FAIL name  reason" (a panic or
//	    the last message), "SKIP name: reason" to RECORDS
//	summary final ALLOW [--strict] FILE...  reads records (and the C suite's
//	    output: its lines starting PASS, FAIL, SKIP), lists the skips, marking
//	    those whose "name: reason" matches no pattern of the allow-list ALLOW,
//	    lists the failures (a C case with its first failed check), the ten
//	    slowest checks (of the lines "PASS name  (1.2 s)" and "FAIL name  (1.2 s)")
//	    and prints the closing line "N passed, M failed, K skipped". Exit
//	    status 1 when something failed, or with --strict when a skip is not
//	    allowed (a check this machine could have run).
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		if !errors.Is(err, errFailed) {
			fmt.Fprintln(os.Stderr, "summary:", err)
		}
		os.Exit(1)
	}
}

// errFailed: the checks ran and something failed (already reported).
var errFailed = errors.New("checks failed")

func run(args []string, in io.Reader, out io.Writer) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	switch {
	case len(args) == 2 && args[0] == "gotest":
		return goTest(in, w, args[1])
	case len(args) >= 2 && args[0] == "final":
		strict := false
		files := args[2:]
		if len(files) > 0 && files[0] == "--strict" {
			strict, files = true, files[1:]
		}
		return final(w, args[1], strict, files)
	}
	return fmt.Errorf("usage: summary gotest RECORDS < json | summary final ALLOW [--strict] FILE...")
}
