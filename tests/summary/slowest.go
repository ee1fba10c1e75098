package main

import (
	"bufio"
	"fmt"
	"regexp"
	"sort"
	"strconv"
)

// timed is one check's line that carries its time: "PASS name  (1.2 s)" or
// "FAIL name  (1.2 s)...", as the C suite, the Go records and tests/test.sh's
// own steps write them, or "PASS name (1.2s)", as the data-path suite does.
var timed = regexp.MustCompile(`^(?:PASS|FAIL) (\S+) +\((\d+(?:\.\d+)?) ?s\)`)

type checkTime struct {
	name string
	secs float64
}

// noteTime records the time of a check's line, if it carries one.
func (t *tally) noteTime(line string) {
	m := timed.FindStringSubmatch(line)
	if m == nil {
		return
	}
	secs, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return
	}
	t.times = append(t.times, checkTime{m[1], secs})
}

// slowest prints the n checks that took longest, slowest first (ties by name).
func (t *tally) slowest(w *bufio.Writer, n int) {
	if len(t.times) == 0 {
		return
	}
	sort.SliceStable(t.times, func(i, j int) bool {
		if t.times[i].secs != t.times[j].secs {
			return t.times[i].secs > t.times[j].secs
		}
		return t.times[i].name < t.times[j].name
	})
	if len(t.times) < n {
		n = len(t.times)
	}
	fmt.Fprintf(w, "# the %d slowest checks:\n", n)
	for _, c := range t.times[:n] {
		fmt.Fprintf(w, "#   %7.1f s  %s\n", c.secs, c.name)
	}
}
