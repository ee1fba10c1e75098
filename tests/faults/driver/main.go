// Command driver runs the fault-injection suite of tests/faults: many short
// jobs of tests/faults/fault_rank on simulated nodes (tests/multinode/cluster.sh),
// each with one fault — a rank SIGKILLed, SIGSTOPped (for good, or for a
// while) at a random moment of init, setup, puts or destroy, or a node's
// link taken down (for good, or for a while) — and counts what went wrong:
// hangs (a run past its bound, killed, its log kept), crashes (a rank killed
// by a signal nobody sent), wrong bytes (in a round that completed), wrong
// result codes, and names left in /dev/shm (each node's private one, read
// after the run through a descriptor held on it, and the host's).
//
//	driver -bin DIR -runs N [-seed S] [-cats LIST] [-bound SEC] [-logs DIR]
//
// DIR holds launch, fault_rank and ibdouble/libibverbs.so.1. The categories
// are run in turn, the runs split evenly between them. Exit status 0 only
// when every count but runs is 0.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	bin := flag.String("bin", "", "directory of launch, fault_rank and ibdouble/")
	runs := flag.Int("runs", 200, "runs in all, split between the categories")
	seed := flag.Int64("seed", 0, "random seed (0: from the clock); printed to replay a run")
	cats := flag.String("cats", strings.Join(allCategories(), ","), "categories to run, comma list")
	bound := flag.Int("bound", 20, "seconds a run may take before it counts as a hang")
	logs := flag.String("logs", "", "where the logs of failed runs are kept (default BIN/logs)")
	verbose := flag.Bool("v", false, "print every run")
	keep := flag.Bool("keep", false, "keep the logs of every run, not only of the failed ones")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "driver: -bin is required")
		os.Exit(2)
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1000000007
	}
	if *logs == "" {
		*logs = filepath.Join(*bin, "logs")
	}
	if err := os.MkdirAll(*logs, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(2)
	}
	list, err := pickCategories(*cats)
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(2)
	}
	fmt.Printf("# faults: seed %d, %d runs over %d categories, bound %d s (replay: -seed %d -cats %s -runs %d)\n",
		*seed, *runs, len(list), *bound, *seed, *cats, *runs)
	s := &suite{bin: *bin, logs: *logs, bound: *bound, verbose: *verbose, keep: *keep, counts: map[string]*counts{}}
	hostBefore := shmNames("/dev/shm")
	rng := rand.New(rand.NewSource(*seed))
	start := time.Now()
	for i := 0; i < *runs; i++ {
		c := list[i%len(list)]
		s.run(i, c, c.plan(rng))
	}
	hostLeft := newNames(hostBefore, shmNames("/dev/shm"))
	os.Exit(s.report(hostLeft, time.Since(start)))
}

// counts are the tallies of one category.
type counts struct {
	runs, fired, hangs, crashes, wrongBytes, wrongCodes, litter, other, errored int
}

type suite struct {
	bin, logs string
	bound     int
	verbose   bool
	keep      bool
	counts    map[string]*counts
}

// report prints the table and returns the exit status.
func (s *suite) report(hostLeft []string, took time.Duration) int {
	names := make([]string, 0, len(s.counts))
	for n := range s.counts {
		names = append(names, n)
	}
	sort.Strings(names)
	var t counts
	fmt.Printf("# %-16s %5s %5s %5s %7s %11s %11s %6s %6s %8s\n", "category", "runs", "fired", "hangs", "crashes",
		"wrong-bytes", "wrong-codes", "litter", "other", "errored")
	for _, n := range names {
		c := s.counts[n]
		fmt.Printf("# %-16s %5d %5d %5d %7d %11d %11d %6d %6d %8d\n", n, c.runs, c.fired, c.hangs, c.crashes,
			c.wrongBytes, c.wrongCodes, c.litter, c.other, c.errored)
		t.runs += c.runs
		t.fired += c.fired
		t.hangs += c.hangs
		t.crashes += c.crashes
		t.wrongBytes += c.wrongBytes
		t.wrongCodes += c.wrongCodes
		t.litter += c.litter
		t.other += c.other
	}
	for _, n := range hostLeft {
		fmt.Printf("# left in the host's /dev/shm: %s\n", n)
	}
	t.litter += len(hostLeft)
	fmt.Printf("runs %d (fault fired in %d), hangs %d, crashes %d, wrong bytes %d, wrong codes %d, litter %d, other failures %d (%.0f s)\n",
		t.runs, t.fired, t.hangs, t.crashes, t.wrongBytes, t.wrongCodes, t.litter, t.other, took.Seconds())
	if t.hangs+t.crashes+t.wrongBytes+t.wrongCodes+t.litter+t.other > 0 {
		fmt.Printf("FAILED; logs of the failed runs in %s\n", s.logs)
		return 1
	}
	fmt.Println("OK")
	return 0
}

// shmNames lists the names in a /dev/shm directory that the library makes.
func shmNames(dir string) map[string]bool {
	m := map[string]bool{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "mscclpp") {
			m[e.Name()] = true
		}
	}
	return m
}

// newNames: the names of after that were not in before and are still there.
func newNames(before, after map[string]bool) []string {
	var out []string
	for n := range after {
		if !before[n] {
			if _, err := os.Stat(filepath.Join("/dev/shm", n)); err == nil {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}
