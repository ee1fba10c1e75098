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
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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
	selftest := flag.Bool("selftest", false, "first check that the suite catches a crash, wrong bytes, litter and a hang")
	par := flag.Int("j", 2, "runs at a time (each its own simulated nodes; most of a run is waiting)")
	only := flag.Int("only", -1, "run only run number N of the sequence (with the same -seed, -cats and -runs: a replay)")
	maxHangs := flag.Int("max-hangs", 3, "a category's runs left after this many hangs are skipped (0: never), so that a broken category costs minutes, not hours")
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
	fmt.Printf("# faults: seed %d, %d runs over %d categories, %d at a time, bound %d s (replay: FAULTS_SEED=%d FAULTS_CATS=%s FAULTS_RUNS=%d)\n",
		*seed, *runs, len(list), *par, *bound, *seed, *cats, *runs)
	replay = fmt.Sprintf("FAULTS_SEED=%d FAULTS_CATS=%s FAULTS_RUNS=%d FAULTS_ONLY=", *seed, *cats, *runs)
	s := &suite{bin: *bin, logs: *logs, bound: *bound, verbose: *verbose, keep: *keep, counts: map[string]*counts{}, pids: map[uint64]bool{}}
	if *selftest && !s.selfTest() {
		os.Exit(1)
	}
	hostBefore := shmNames("/dev/shm")
	rng := rand.New(rand.NewSource(*seed))
	start := time.Now()
	jobs := make(chan job)
	var wg sync.WaitGroup
	for w := 0; w < max(*par, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if cnt := s.category(j.c.name); *maxHangs > 0 && s.hangsOf(cnt) >= *maxHangs {
					s.mu.Lock()
					cnt.skipped++
					s.mu.Unlock()
					continue
				}
				s.run(j.i, j.c, j.p)
			}
		}()
	}
	for i := 0; i < *runs; i++ {
		c := list[i%len(list)]
		p := c.plan(rng) // drawn even when skipped: the other runs replay the same
		if *only < 0 || i == *only {
			jobs <- job{i, c, p}
		}
	}
	close(jobs)
	wg.Wait()
	hostLeft := newNames(hostBefore, shmNames("/dev/shm"), s.pids)
	os.Exit(s.report(hostLeft, time.Since(start)))
}

// job is one run to do.
type job struct {
	i int
	c category
	p plan
}

// hangsOf reads a category's hang count.
func (s *suite) hangsOf(c *counts) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.hangs
}

// replay: the environment of tests/faults/run.sh that replays a run, less its number.
var replay string

// counts are the tallies of one category.
type counts struct {
	runs, skipped, fired, hangs, crashes, wrongBytes, wrongCodes, litter, other, errored, unnamed int
}

type suite struct {
	bin, logs string
	bound     int
	verbose   bool
	keep      bool
	quiet     bool       // self-test: no line per run
	mu        sync.Mutex // guards counts and pids (runs go in parallel)
	counts    map[string]*counts
	pids      map[uint64]bool // of every rank started: the library writes them into its segments
}

// selfTest runs the controls, each of which must be caught; a suite that
// cannot see a fault would report 0 for ever.
func (s *suite) selfTest() bool {
	st := &suite{bin: s.bin, logs: filepath.Join(s.logs, "selftest"), bound: 5, quiet: true, keep: true, counts: map[string]*counts{}, pids: map[uint64]bool{}}
	_ = os.MkdirAll(st.logs, 0o755)
	ok := true
	for i, t := range selftests {
		// many rounds: the fault lands inside the puts however fast they go
		st.run(i, t.c, plan{phase: t.phase, victim: 1, delayUs: 2000, holdMs: 100, rounds: 20000, chunk: 4096})
		if t.caught(st.counts[t.c.name]) {
			fmt.Printf("# self-test: %s: caught\n", t.what)
		} else {
			fmt.Printf("FAIL self-test: %s: NOT caught (the suite is blind to it; logs in %s)\n", t.what, st.logs)
			ok = false
		}
	}
	return ok
}

// report prints the table and returns the exit status.
func (s *suite) report(hostLeft []string, took time.Duration) int {
	names := make([]string, 0, len(s.counts))
	for n := range s.counts {
		names = append(names, n)
	}
	sort.Strings(names)
	var t counts
	fmt.Printf("# %-16s %5s %5s %5s %7s %11s %11s %6s %6s %8s %8s\n", "category", "runs", "fired", "hangs", "crashes",
		"wrong-bytes", "wrong-codes", "litter", "other", "errored", "unnamed")
	for _, n := range names {
		c := s.counts[n]
		fmt.Printf("# %-16s %5d %5d %5d %7d %11d %11d %6d %6d %8d %8d\n", n, c.runs, c.fired, c.hangs, c.crashes,
			c.wrongBytes, c.wrongCodes, c.litter, c.other, c.errored, c.unnamed)
		t.runs += c.runs
		t.skipped += c.skipped
		if c.skipped > 0 {
			fmt.Printf("# %-16s %d runs skipped after %d hangs\n", n, c.skipped, c.hangs)
		}
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
	fmt.Printf("runs %d (fault fired in %d; %d skipped), hangs %d, crashes %d, wrong bytes %d, wrong codes %d, litter %d, other failures %d (%.0f s)\n",
		t.runs, t.fired, t.skipped, t.hangs, t.crashes, t.wrongBytes, t.wrongCodes, t.litter, t.other, took.Seconds())
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

// newNames: the names of after that were not in before, are still there
// and hold the pid of one of our ranks (as the library's segments do): on a
// shared machine other jobs' names come and go in the host's /dev/shm.
func newNames(before, after map[string]bool, pids map[uint64]bool) []string {
	var out []string
	for n := range after {
		if before[n] {
			continue
		}
		if mentions(filepath.Join("/dev/shm", n), pids) {
			out = append(out, n)
		} else if _, err := os.Stat(filepath.Join("/dev/shm", n)); err == nil {
			fmt.Printf("# note: new in the host's /dev/shm, not ours (no pid of our ranks in it): %s\n", n)
		}
	}
	sort.Strings(out)
	return out
}

// mentions: whether the first MiB of the file holds one of pids as an
// aligned little-endian 64-bit word.
func mentions(path string, pids map[uint64]bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 1<<20)
	n, _ := io.ReadFull(f, b)
	for i := 0; i+8 <= n; i += 8 {
		if pids[binary.LittleEndian.Uint64(b[i:])] {
			return true
		}
	}
	return false
}
