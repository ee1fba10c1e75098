package sotest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docEntry is one "### `MSCCLPP_NAME`" entry of docs/ENVIRONMENT.md: its name and text.
type docEntry struct{ name, text string }

func envEntries(t *testing.T) []docEntry {
	doc := readRepo(t, "docs/ENVIRONMENT.md")
	locs := docVar.FindAllStringSubmatchIndex(doc, -1)
	var out []docEntry
	for i, l := range locs {
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := doc[l[1]:end]
		if j := strings.Index(body, "\n#"); j >= 0 { // the next section's heading
			body = body[:j]
		}
		out = append(out, docEntry{doc[l[2]:l[3]], body})
	}
	return out
}

var (
	// an entry that says a malformed value is an error, not a WARN
	docSaysError = regexp.MustCompile("(?i)(malformed|out of range|anything else)[^.]*(error|fails|`mscclpp[A-Z]\\w*`)")
	docValues    = regexp.MustCompile(`Values: (.*?)(\. Mirrors|\n|$)`)
	backticked   = regexp.MustCompile("`[^`]+`")
	numberRange  = regexp.MustCompile(`\d+\D* to \d+`)
)

// malformedValues derives from an entry's "Values:" what is malformed for it: nil with why for an
// entry that takes any string (a path, a name) or says a malformed value is an error.
func malformedValues(e docEntry) (bad []string, why string) {
	if docSaysError.MatchString(e.text) {
		return nil, "the entry says a malformed value is an error"
	}
	m := docValues.FindStringSubmatch(e.text)
	if m == nil {
		return nil, ""
	}
	v := m[1]
	switch {
	case strings.Contains(v, "path") || strings.Contains(v, "any string") || strings.Contains(v, "name prefixes") ||
		strings.Contains(v, "colon-separated") || strings.Contains(v, "library"):
		return nil, "any string is a value"
	case strings.Contains(v, "0 or 1"):
		return []string{"2", "yes"}, ""
	case len(backticked.FindAllString(v, -1)) >= 2:
		return []string{"nosuchvalue"}, ""
	case strings.Contains(v, "positive"):
		return []string{"abc", "0", "-1"}, ""
	case strings.Contains(v, "non-negative") || strings.Contains(v, "byte count") || numberRange.MatchString(v):
		return []string{"abc", "-1"}, ""
	}
	return nil, ""
}

// buildPerf builds tools/perf/perf.c against build/ (skipping when the library is not built) and
// returns it with the environment of a run: this one's without MSCCLPP_ and NCCL_ variables.
func buildPerf(t *testing.T) (perf string, base []string) {
	t.Helper()
	root := repoRoot()
	b := filepath.Join(root, "build")
	if _, err := os.Stat(filepath.Join(b, "lib", "libmscclpp.so")); err != nil {
		t.Skipf("the library is not built (run make first): %v", err)
	}
	perf = filepath.Join(t.TempDir(), "perf")
	cc := exec.Command("cc", "-std=c11", "-O1", "-I"+filepath.Join(b, "include"), filepath.Join(root, "tools/perf/perf.c"),
		"-o", perf, "-L"+filepath.Join(b, "lib"), "-Wl,-rpath,"+filepath.Join(b, "lib"), "-lmscclpp", "-pthread")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("building the perf tool: %v\n%s", err, out)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MSCCLPP_") && !strings.HasPrefix(kv, "NCCL_") && !strings.HasPrefix(kv, "SLURM_") &&
			!strings.HasPrefix(kv, "PMIX_") && !strings.HasPrefix(kv, "OMPI_") {
			base = append(base, kv)
		}
	}
	return perf, base
}

// TestEveryMalformedSettingWarnsOnce walks docs/ENVIRONMENT.md: for each variable whose values are
// a number, a 0-or-1 switch or a list of names, each malformed value (derived from the entry's
// "Values:") given to a 2-rank job (the perf tool, host mode over SHM: init, connections, proxies,
// waits, destroy) makes each rank print exactly one WARN naming the variable, and the job still
// succeeds with the default. An entry the walk cannot classify fails: say in the doc what its
// values are. Variables checked only where the IB transport is used are not run here.
func TestEveryMalformedSettingWarnsOnce(t *testing.T) {
	perf, base := buildPerf(t)
	warnLine := regexp.MustCompile(`(?m)^[^ :]+:(\d+):\d+ .*MSCCLPP WARN (.*)$`)
	ran := 0
	for _, e := range envEntries(t) {
		bad, why := malformedValues(e)
		if bad == nil {
			if why == "" {
				t.Errorf("%s: cannot tell from its \"Values:\" what a malformed value is: say it in docs/ENVIRONMENT.md "+
					"(a number, `A`, `B` names, 0 or 1, a path) and teach malformedValues", e.name)
			} else {
				t.Logf("%s: not run: %s", e.name, why)
			}
			continue
		}
		if strings.Contains(e.text, "when the IB transport is first used") {
			t.Logf("%s: not run: read where the IB transport is used", e.name)
			continue
		}
		names := regexp.MustCompile(regexp.QuoteMeta(e.name) + `([^A-Z0-9_]|$)`)
		for _, v := range bad {
			ran++
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			c := exec.CommandContext(ctx, perf, "--nranks", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0")
			c.Env = append(append([]string(nil), base...), e.name+"="+v)
			out, err := c.CombinedOutput()
			cancel()
			if err != nil {
				t.Errorf("%s=%q: the job failed: %v\n%s", e.name, v, err, out)
				continue
			}
			perPid := map[string]int{}
			for _, m := range warnLine.FindAllStringSubmatch(string(out), -1) {
				if names.MatchString(m[2]) {
					perPid[m[1]]++
				}
			}
			if len(perPid) != 2 {
				t.Errorf("%s=%q: WARN lines naming it from %d processes, want both ranks:\n%s", e.name, v, len(perPid), out)
			}
			for pid, n := range perPid {
				if n != 1 {
					t.Errorf("%s=%q: pid %s warned %d times, want once:\n%s", e.name, v, pid, n, out)
				}
			}
		}
	}
	if ran < 20 {
		t.Errorf("only %d malformed values were run: the walk of docs/ENVIRONMENT.md no longer matches its entries", ran)
	}
}
