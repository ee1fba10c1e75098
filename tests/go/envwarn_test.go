package sotest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	numberRange  = regexp.MustCompile(`\d+\D* to (\d+)`)
)

// malformedValues derives from an entry's "Values:" what is malformed for it: nil with why for an
// entry that takes any string (a path, a name).
func malformedValues(e docEntry) (bad []string, why string) {
	m := docValues.FindStringSubmatch(e.text)
	if m == nil {
		return nil, ""
	}
	v := m[1]
	switch {
	case strings.Contains(v, "not made only of whitespace"):
		return []string{" ", "\t"}, ""
	case strings.Contains(v, "device[:port]"):
		return []string{"double_0:99", "^"}, ""
	case strings.Contains(v, "path") || strings.Contains(v, "any string") || strings.Contains(v, "name prefixes") ||
		strings.Contains(v, "colon-separated") || strings.Contains(v, "library"):
		return nil, "any string is a value"
	case strings.Contains(v, "0 or 1"):
		return []string{"2", "yes"}, ""
	case len(backticked.FindAllString(v, -1)) >= 2:
		return []string{"nosuchvalue"}, ""
	case strings.Contains(v, "positive"):
		return []string{"abc", "0", "-1"}, ""
	case numberRange.MatchString(v):
		r := numberRange.FindStringSubmatch(v)
		max, _ := strconv.Atoi(r[1])
		return []string{"abc", "-1", strconv.Itoa(max + 1)}, ""
	case strings.Contains(v, "non-negative") || strings.Contains(v, "byte count"):
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

// codeText is mscclppGetErrorString's text for each code an entry may name.
var codeText = map[string]string{
	"mscclppInvalidArgument":    "invalid argument",
	"mscclppInvalidUsage":       "invalid usage",
	"mscclppSystemError":        "unhandled system error",
	"mscclppInternalError":      "internal error",
	"mscclppUnhandledCudaError": "unhandled cuda error",
}

// docErrorCode is the result code and the call an entry that says a malformed value is an error
// names ("" when it says a WARN): the call is "init", "mscclppConnect" or "mscclppGetUniqueId".
func docErrorCode(e docEntry) (code, call string) {
	loc := docSaysError.FindStringIndex(e.text)
	if loc == nil {
		return "", ""
	}
	rest := e.text[loc[0]:]
	if m := regexp.MustCompile("`(mscclpp(?:Invalid\\w+|\\w*Error))`").FindStringSubmatch(rest); m != nil {
		code = m[1]
	}
	switch {
	case strings.Contains(rest, "`mscclppGetUniqueId`"):
		call = "mscclppGetUniqueId"
	case strings.Contains(rest, "`mscclppConnect`"):
		call = "mscclppConnect"
	case strings.Contains(rest, "init"):
		call = "init"
	}
	return code, call
}

// uniqueIDProgram builds a program that calls mscclppGetUniqueId once and prints its result
// and the last error text; it exits 1 when the call fails.
func uniqueIDProgram(t *testing.T) string {
	t.Helper()
	b := filepath.Join(repoRoot(), "build")
	src := filepath.Join(t.TempDir(), "uid.c")
	code := "#include <stdio.h>\n#include <mscclpp.h>\nint main(void) {\n  mscclppUniqueId id;\n" +
		"  mscclppResult_t r = mscclppGetUniqueId(&id);\n" +
		"  printf(\"mscclppGetUniqueId: %s (%s)\\n\", mscclppGetErrorString(r), mscclppGetLastError(NULL));\n" +
		"  return r != mscclppSuccess;\n}\n"
	if err := os.WriteFile(src, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := strings.TrimSuffix(src, ".c")
	cc := exec.Command("cc", "-std=c11", "-I"+filepath.Join(b, "include"), src, "-o", bin,
		"-L"+filepath.Join(b, "lib"), "-Wl,-rpath,"+filepath.Join(b, "lib"), "-lmscclpp")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("building the mscclppGetUniqueId program: %v\n%s", err, out)
	}
	return bin
}

// ibDouble builds the libibverbs test double and returns it.
func ibDouble(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("bash", filepath.Join(repoRoot(), "tests/ib/double/build.sh"), dir).CombinedOutput(); err != nil {
		t.Fatalf("building the verbs double: %v\n%s", err, out)
	}
	return filepath.Join(dir, "libibverbs.so.1")
}

// TestEveryMalformedSettingWarnsOnce walks docs/ENVIRONMENT.md: for each variable whose values are
// a number, a 0-or-1 switch, a list of names or a non-blank string, each malformed value (derived
// from the entry's "Values:") is given to a 2-rank job (the perf tool, host mode over SHM: init,
// connections, proxies, waits, destroy; over IB on the verbs double for the variables read where
// the IB transport is used; ip:port init for one read by such jobs). Where the entry says a
// malformed value is an error, the documented call fails with the documented code and a message
// naming the variable; else each rank prints exactly one WARN naming the variable, and the job
// still succeeds with the default. An entry the walk cannot classify fails: say in the doc what
// its values are.
func TestEveryMalformedSettingWarnsOnce(t *testing.T) {
	perf, base := buildPerf(t)
	uid := uniqueIDProgram(t)
	dbl := ibDouble(t)
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
		code, call := docErrorCode(e)
		if docSaysError.MatchString(e.text) && (codeText[code] == "" || call == "") {
			t.Errorf("%s: the entry says a malformed value is an error but names no result code (`mscclppInvalidArgument`) "+
				"or no call (init, `mscclppConnect`, `mscclppGetUniqueId`) it is returned by", e.name)
			continue
		}
		args := []string{"--nranks", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0"}
		var extra []string
		if strings.Contains(e.text, "IB transport is first used") {
			args = append(args, "--transport", "ib")
			extra = append(extra, "MSCCLPP_PERF_IB_DEV=double_0", "MSCCLPP_IBV_SO="+dbl)
		}
		if strings.Contains(e.text, "`mscclppCommInitRank(comm, n, \"ip:port\", rank)` jobs") {
			extra = append(extra, "MSCCLPP_TEST_ADDR=127.0.0.1:"+freePort(t))
		}
		names := regexp.MustCompile(regexp.QuoteMeta(e.name) + `([^A-Z0-9_]|$)`)
		for _, v := range bad {
			ran++
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			c := exec.CommandContext(ctx, perf, args...)
			if call == "mscclppGetUniqueId" {
				c = exec.CommandContext(ctx, uid)
			}
			c.Env = append(append(append([]string(nil), base...), extra...), e.name+"="+v)
			if len(extra) > 0 && strings.HasPrefix(extra[0], "MSCCLPP_PERF_IB_DEV") {
				c.Env = append(c.Env, "MSCCLPP_IBV_DOUBLE_DIR="+t.TempDir())
			}
			out, err := c.CombinedOutput()
			hung := ctx.Err() == context.DeadlineExceeded
			cancel()
			if hung {
				t.Errorf("%s=%q: the job hung past 60 s:\n%s", e.name, v, out)
				continue
			}
			if code != "" {
				checkDocumentedError(t, e.name, v, code, call, names, err, string(out))
				continue
			}
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
	if ran < 40 {
		t.Errorf("only %d malformed values were run: the walk of docs/ENVIRONMENT.md no longer matches its entries", ran)
	}
}

// checkDocumentedError checks that a run given name=v failed at the documented call with the
// documented code's text and a message naming the variable.
func checkDocumentedError(t *testing.T, name, v, code, call string, names *regexp.Regexp, err error, out string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s=%q: the job succeeded, want %s at %s:\n%s", name, v, code, call, out)
		return
	}
	// perf names the failing call (CK's "mscclppCommInitRank...: text (last error)", or "cannot connect")
	at := map[string]string{"init": "mscclppCommInit", "mscclppConnect": "cannot connect", "mscclppGetUniqueId": "mscclppGetUniqueId: "}[call]
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, at) && strings.Contains(line, codeText[code]) && names.MatchString(line) {
			return
		}
	}
	t.Errorf("%s=%q: no line says %s failed with %s (%q) naming the variable:\n%s", name, v, call, code, codeText[code], out)
}

// freePort is a TCP port of 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
