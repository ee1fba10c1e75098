// Package tracefmt checks the shipped profile and trace tools on a 4-rank job: the merged trace is valid
// trace-event JSON with every rank, and both tools count exactly the calls the job made.
package tracefmt

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

const nranks = 4

// the calls testdata/job.c makes on each rank, and the bytes of those that move any
var wantCalls = map[string]int{
	"mscclppCommInitRank": 1, "mscclppCommRank": 1, "mscclppCommSize": 1, "mscclppBootstrapAllGather": 1,
	"mscclppGetVersion": 3, "mscclppBootstrapBarrier": 1, "mscclppCommDestroy": 1,
}

const allGatherBytes = 4 * nranks

// built returns the paths make builds, failing when one is missing.
func built(t *testing.T) (root, profile, trace, merge string) {
	t.Helper()
	root, _ = filepath.Abs(filepath.Join("..", "..", "..")) // go test runs in the package's directory
	b := filepath.Join(root, "build")
	profile = filepath.Join(b, "lib", "mscclpp", "libmscclpp_profile.so")
	trace = filepath.Join(b, "lib", "mscclpp", "libmscclpp_trace.so")
	merge = filepath.Join(b, "bin", "mscclpp-trace-merge")
	for _, p := range []string{profile, trace, merge, filepath.Join(b, "lib", "libmscclpp.so"), filepath.Join(b, "include", "mscclpp.h")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is not built (run make first): %v", p, err)
		}
	}
	return root, profile, trace, merge
}

// runJob builds testdata/job.c and runs it on nranks local ranks with env added.
func runJob(t *testing.T, root, dir string, env ...string) {
	t.Helper()
	b := filepath.Join(root, "build")
	job := filepath.Join(dir, "job")
	cc := exec.Command("cc", "-std=c11", "-Wall", "-Werror", "-I"+filepath.Join(b, "include"), "testdata/job.c", "-o", job,
		"-L"+filepath.Join(b, "lib"), "-Wl,-rpath,"+filepath.Join(b, "lib"), "-lmscclpp", "-pthread")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("building job.c: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmds := make([]*exec.Cmd, nranks)
	outs := make([]strings.Builder, nranks)
	for r := range cmds {
		cmds[r] = exec.CommandContext(ctx, job, addr, strconv.Itoa(nranks), strconv.Itoa(r))
		cmds[r].Dir = dir
		cmds[r].Env = append(os.Environ(), env...)
		cmds[r].Stdout = &outs[r]
		cmds[r].Stderr = &outs[r]
		if err := cmds[r].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for r, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("rank %d: %v\n%s", r, err, outs[r].String())
		}
	}
}

type event struct {
	Name string          `json:"name"`
	Ph   string          `json:"ph"`
	Ts   *float64        `json:"ts"`
	Dur  *float64        `json:"dur"`
	Pid  *int            `json:"pid"`
	Tid  *int            `json:"tid"`
	Args json.RawMessage `json:"args"`
}

// validate checks the trace-event format of a merged file and returns its complete events per rank.
func validate(t *testing.T, path string) map[int][]event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []event `json:"traceEvents"`
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: traceEvents: %v", path, err)
	}
	if len(doc.TraceEvents) == 0 {
		t.Fatalf("%s: no traceEvents", path)
	}
	byRank := map[int][]event{}
	named := map[int]bool{}
	threadNamed := map[[2]int]bool{}
	last := map[[2]int]float64{}
	for i, e := range doc.TraceEvents {
		where := fmt.Sprintf("event %d (%s)", i, e.Name)
		if e.Name == "" || e.Pid == nil || e.Tid == nil {
			t.Fatalf("%s: needs name, pid and tid", where)
		}
		var args map[string]any
		if err := json.Unmarshal(e.Args, &args); err != nil || args == nil {
			t.Fatalf("%s: args is not an object: %s", where, e.Args)
		}
		switch e.Ph {
		case "M":
			switch e.Name {
			case "process_name":
				named[*e.Pid] = true
			case "thread_name":
				threadNamed[[2]int{*e.Pid, *e.Tid}] = true
			case "process_sort_index":
			default:
				t.Fatalf("%s: unknown metadata", where)
			}
			if _, ok := args["name"]; !ok && e.Name != "process_sort_index" {
				t.Fatalf("%s: metadata without args.name", where)
			}
		case "X":
			if e.Ts == nil || e.Dur == nil {
				t.Fatalf("%s: a complete event needs ts and dur", where)
			}
			if *e.Ts < 0 || *e.Dur < 0 {
				t.Fatalf("%s: ts %v dur %v: negative", where, *e.Ts, *e.Dur)
			}
			k := [2]int{*e.Pid, *e.Tid}
			if prev, ok := last[k]; ok && *e.Ts < prev {
				t.Fatalf("%s: ts %v before the previous event of rank %d thread %d (%v)", where, *e.Ts, k[0], k[1], prev)
			}
			last[k] = *e.Ts
			if !threadNamed[k] {
				t.Fatalf("%s: thread %d of rank %d has no thread_name before its events", where, k[1], k[0])
			}
			if r, ok := args["result"].(string); !ok || r == "" {
				t.Fatalf("%s: no args.result", where)
			}
			byRank[*e.Pid] = append(byRank[*e.Pid], e)
		default:
			t.Fatalf("%s: ph %q is neither X nor M", where, e.Ph)
		}
	}
	for r := 0; r < nranks; r++ {
		if !named[r] || len(byRank[r]) == 0 {
			t.Fatalf("rank %d: process_name %v, %d events", r, named[r], len(byRank[r]))
		}
	}
	if len(byRank) != nranks {
		t.Fatalf("events of %d processes, want %d", len(byRank), nranks)
	}
	return byRank
}

func TestTraceAndProfileOfAFourRankJob(t *testing.T) {
	root, profile, trace, merge := built(t)
	dir := t.TempDir()
	runJob(t, root, dir, "MSCCLPP_TOOLS="+profile+":"+trace, "MSCCLPP_TRACE_FILE="+filepath.Join(dir, "trace.%r.json"),
		"MSCCLPP_PROFILE_FILE="+filepath.Join(dir, "profile.%r.txt"))

	files, _ := filepath.Glob(filepath.Join(dir, "trace.*.json"))
	if len(files) != nranks {
		t.Fatalf("trace files %v, want %d", files, nranks)
	}
	merged := filepath.Join(dir, "job.json")
	if out, err := exec.Command(merge, append([]string{"-o", merged}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("mscclpp-trace-merge: %v\n%s", err, out)
	}
	byRank := validate(t, merged)

	var barrierStart, barrierEnd []float64
	for r := 0; r < nranks; r++ {
		got := map[string]int{}
		tids := map[string]map[int]bool{}
		for _, e := range byRank[r] {
			got[e.Name]++
			if tids[e.Name] == nil {
				tids[e.Name] = map[int]bool{}
			}
			tids[e.Name][*e.Tid] = true
			var args struct {
				Result string  `json:"result"`
				Bytes  *uint64 `json:"bytes"`
			}
			if err := json.Unmarshal(e.Args, &args); err != nil {
				t.Fatal(err)
			}
			if e.Name != "mscclppGetVersion" && args.Result != "mscclppSuccess" {
				t.Errorf("rank %d: %s result %q", r, e.Name, args.Result)
			}
			if e.Name == "mscclppBootstrapAllGather" && (args.Bytes == nil || *args.Bytes != allGatherBytes) {
				t.Errorf("rank %d: allgather bytes %v, want %d", r, args.Bytes, allGatherBytes)
			}
			if e.Name == "mscclppBootstrapBarrier" {
				barrierStart = append(barrierStart, *e.Ts)
				barrierEnd = append(barrierEnd, *e.Ts+*e.Dur)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(wantCalls) {
			t.Errorf("rank %d: traced calls %v, want %v", r, got, wantCalls)
		}
		for v := range tids["mscclppGetVersion"] {
			if tids["mscclppCommInitRank"][v] {
				t.Errorf("rank %d: mscclppGetVersion traced on the main thread, the job calls it from another", r)
			}
		}
		checkProfile(t, filepath.Join(dir, fmt.Sprintf("profile.%d.txt", r)), r)
	}
	// clocks aligned: no rank leaves the barrier before the last one entered it
	sort.Float64s(barrierStart)
	sort.Float64s(barrierEnd)
	if len(barrierStart) != nranks || barrierStart[nranks-1] > barrierEnd[0]+0.002 {
		t.Errorf("barrier starts %v, ends %v: a rank left before the last entered; clocks not aligned", barrierStart, barrierEnd)
	}
}

// checkProfile checks one rank's profile file: the header and one row per function the job called, with its count.
func checkProfile(t *testing.T, path string, rank int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	got := map[string]int{}
	var header string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "mscclpp-profile:" {
			t.Fatalf("%s: line %q", path, sc.Text())
		}
		if header == "" {
			header = sc.Text()
			continue
		}
		if fields[1] == "function" {
			continue
		}
		if len(fields) != 8 {
			t.Fatalf("%s: row %q has %d fields, want 8", path, sc.Text(), len(fields))
		}
		n, err := strconv.Atoi(fields[3])
		if err != nil {
			t.Fatalf("%s: row %q: calls: %v", path, sc.Text(), err)
		}
		got[fields[1]] += n
		wantBytes := "-"
		if fields[1] == "mscclppBootstrapAllGather" {
			wantBytes = strconv.Itoa(allGatherBytes)
		}
		if fields[7] != wantBytes {
			t.Errorf("%s: %s bytes %s, want %s", path, fields[1], fields[7], wantBytes)
		}
	}
	if want := fmt.Sprintf("mscclpp-profile: rank %d of %d, pid ", rank, nranks); !strings.HasPrefix(header, want) ||
		!strings.Contains(header, ": 9 calls of 7 functions, ") {
		t.Errorf("%s: header %q, want %q... 9 calls of 7 functions", path, header, want)
	}
	if fmt.Sprint(got) != fmt.Sprint(wantCalls) {
		t.Errorf("%s: profiled calls %v, want %v", path, got, wantCalls)
	}
}

// perfSource is the perf tool's source: where it lives now, or where it lived.
func perfSource(t *testing.T, root string) string {
	t.Helper()
	for _, p := range []string{"tools/perf/perf.c", "tests/c/perf.c"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			return filepath.Join(root, p)
		}
	}
	t.Fatal("no perf.c under tools/perf or tests/c")
	return ""
}

// A 4-rank perf run (the perf tool spawns its ranks) traced and profiled: one merged trace in the
// trace-event format with every rank, each rank's connections to its 3 peers in both tools.
func TestTraceOfAPerfRun(t *testing.T) {
	root, profile, trace, merge := built(t)
	b := filepath.Join(root, "build")
	dir := t.TempDir()
	perf := filepath.Join(dir, "perf")
	cc := exec.Command("cc", "-std=c11", "-O2", "-I"+filepath.Join(b, "include"), perfSource(t, root), "-o", perf,
		"-L"+filepath.Join(b, "lib"), "-Wl,-rpath,"+filepath.Join(b, "lib"), "-lmscclpp", "-pthread")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("building perf.c: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, perf, "--nranks", strconv.Itoa(nranks), "-b", "8", "-e", "64K", "-f", "8", "-n", "3", "-w", "1")
	run.Dir = dir
	run.Env = append(os.Environ(), "MSCCLPP_TOOLS="+trace+":"+profile, "MSCCLPP_TRACE_FILE="+filepath.Join(dir, "perf.%r.json"),
		"MSCCLPP_PROFILE_FILE="+filepath.Join(dir, "profile.%r.txt"))
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("perf: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "perf.*.json"))
	if len(files) != nranks {
		t.Fatalf("trace files %v, want one per rank (the launching process makes no call)", files)
	}
	merged := filepath.Join(dir, "perf.json")
	if out, err := exec.Command(merge, append([]string{"-o", merged}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("mscclpp-trace-merge: %v\n%s", err, out)
	}
	byRank := validate(t, merged)
	for r := 0; r < nranks; r++ {
		peers := map[int]bool{}
		for _, e := range byRank[r] {
			if e.Name != "mscclppConnect" {
				continue
			}
			var args struct {
				Peer *int `json:"peer"`
			}
			if err := json.Unmarshal(e.Args, &args); err != nil || args.Peer == nil {
				t.Fatalf("rank %d: mscclppConnect without a peer: %s", r, e.Args)
			}
			peers[*args.Peer] = true
		}
		if len(peers) != nranks-1 || peers[r] {
			t.Errorf("rank %d: traced connections to %v, want the %d other ranks", r, peers, nranks-1)
		}
		prof, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("profile.%d.txt", r)))
		if err != nil {
			t.Fatal(err)
		}
		for p := 0; p < nranks; p++ {
			row := regexp.MustCompile(fmt.Sprintf(`(?m)^mscclpp-profile: mscclppConnect +%d +1 `, p))
			if got := row.Match(prof); got == (p == r) {
				t.Errorf("rank %d: profile row for peer %d present=%v:\n%s", r, p, got, prof)
			}
		}
	}
}
