package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// allowList reads ALLOW: one regular expression a line, matched against a
// skip's "name: reason"; blank lines and lines starting with # are ignored.
func allowList(path string) ([]*regexp.Regexp, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("allow-list: %w", err)
	}
	var res []*regexp.Regexp
	for i, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		re, err := regexp.Compile(l)
		if err != nil {
			return nil, fmt.Errorf("allow-list %s:%d: %w", path, i+1, err)
		}
		res = append(res, re)
	}
	return res, nil
}

type tally struct {
	passed, failed int
	skips          []string // "name: reason"
	failures       []string
	times          []checkTime // the checks whose lines carry their time
}

// add counts the lines of one file that start with PASS, FAIL or SKIP.
func (t *tally) add(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	why := -1 // the failure whose indented log follows, until its first failed check is seen
	for sc.Scan() {
		l := sc.Text()
		if why >= 0 && strings.HasPrefix(l, " ") {
			if strings.Contains(l, "CHECK FAILED") || strings.Contains(l, "FAILED:") {
				t.failures[why] += ": " + clip(strings.TrimSpace(l))
				why = -1
			}
			continue
		}
		why = -1
		t.noteTime(l)
		switch {
		case strings.HasPrefix(l, "PASS "):
			t.passed++
		case strings.HasPrefix(l, "FAIL "):
			t.failed++
			t.failures = append(t.failures, strings.TrimSpace(strings.TrimPrefix(l, "FAIL "))) // the name and what follows
			why = len(t.failures) - 1
		case strings.HasPrefix(l, "SKIP "):
			t.skips = append(t.skips, strings.TrimPrefix(l, "SKIP "))
		}
	}
	return sc.Err()
}

// clip shortens a reason for the closing list.
func clip(s string) string {
	const max = 300
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

func allowed(allow []*regexp.Regexp, skip string) bool {
	for _, re := range allow {
		if re.MatchString(skip) {
			return true
		}
	}
	return false
}

func final(w *bufio.Writer, allowPath string, strict bool, files []string) error {
	allow, err := allowList(allowPath)
	if err != nil {
		return err
	}
	var t tally
	for _, f := range files {
		if err := t.add(f); err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
	}
	notAllowed := 0
	if len(t.skips) > 0 {
		fmt.Fprintf(w, "# skipped (allowed where %s has a pattern for the reason):\n", allowPath)
	}
	for _, s := range t.skips {
		mark := "allowed"
		if !allowed(allow, s) {
			mark = "NOT ALLOWED: this machine can run it"
			notAllowed++
		}
		fmt.Fprintf(w, "#   %s  [%s]\n", s, mark)
	}
	for _, f := range t.failures {
		fmt.Fprintf(w, "# failed: %s\n", f)
	}
	t.slowest(w, 10)
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped", t.passed, t.failed, len(t.skips))
	if notAllowed > 0 {
		fmt.Fprintf(w, " (%d not allowed)", notAllowed)
	}
	fmt.Fprintln(w)
	if t.failed > 0 || (strict && notAllowed > 0) {
		return errFailed
	}
	return nil
}
