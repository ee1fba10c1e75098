package logx

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// capture configures the logger from env (vars are name, value pairs), sends
// lines to a slice and restores everything when the test ends.
func capture(t *testing.T, env ...string) *[]string {
	t.Helper()
	for _, k := range []string{"MSCCLPP_DEBUG", "MSCCLPP_DEBUG_SUBSYS", "MSCCLPP_DEBUG_FILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k) // t.Setenv restores the old value at cleanup
	}
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	Reset()
	var mu sync.Mutex
	lines := new([]string)
	SetHandler(func(l string) {
		mu.Lock()
		*lines = append(*lines, l)
		mu.Unlock()
	})
	t.Cleanup(func() {
		SetHandler(nil)
		SetDevice(-1)
		Reset()
	})
	Enabled(LevelNone, 0) // loads the configuration: its ENV lines and warnings are not the test's
	mu.Lock()
	*lines = nil
	mu.Unlock()
	return lines
}

// thisLine returns the line number of its caller.
func thisLine() int {
	_, _, l, _ := runtime.Caller(1)
	return l
}

func host(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	h, _, _ = strings.Cut(h, ".")
	return h
}

func TestLevels(t *testing.T) {
	type want struct{ version, warn, info, trace bool }
	for _, tc := range []struct {
		env string
		want
	}{
		{"", want{}},
		{"bogus", want{}},
		{"VERSION", want{version: true}},
		{"warn", want{version: true, warn: true}},
		{"Info", want{version: true, warn: true, info: true}},
		{"ABORT", want{version: true, warn: true, info: true}},
		{"TRACE", want{true, true, true, true}},
	} {
		t.Run("debug="+tc.env, func(t *testing.T) {
			lines := capture(t, "MSCCLPP_DEBUG", tc.env)
			Versionf("v")
			Warnf("w")
			Infof(Init, "i")
			Tracef(Init, "t")
			var got want
			for _, l := range *lines {
				switch {
				case strings.HasSuffix(l, " MSCCLPP v\n"):
					got.version = true
				case strings.HasSuffix(l, " MSCCLPP WARN w\n"):
					got.warn = true
				case strings.HasSuffix(l, " MSCCLPP INFO i\n"):
					got.info = true
				case strings.HasSuffix(l, " MSCCLPP TRACE t\n"):
					got.trace = true
				default:
					t.Errorf("unexpected line %q", l)
				}
			}
			if got != tc.want {
				t.Errorf("emitted %+v, want %+v (lines %q)", got, tc.want, *lines)
			}
			if len(*lines) != strings.Count(fmt.Sprint(got), "true") {
				t.Errorf("lines %q: duplicates", *lines)
			}
			for l := LevelNone; l <= LevelTrace; l++ {
				wantOn := map[Level]bool{LevelVersion: tc.version, LevelWarn: tc.warn,
					LevelInfo: tc.info, LevelAbort: tc.info && tc.env != "Info", LevelTrace: tc.trace}[l]
				if Enabled(l, Init) != wantOn {
					t.Errorf("Enabled(%v, Init) = %v", l, !wantOn)
				}
			}
		})
	}
}

func TestSubsys(t *testing.T) {
	for _, tc := range []struct {
		subsys string // "-" means unset
		on     Subsys
		off    Subsys
	}{
		{"-", Init, Coll | Net | Call},
		{"", 0, Init | Coll | Net},
		{"INIT", Init, Coll | Env},
		{"coll,net", Coll | Net, Init | P2P | Env},
		{"NET, SHM ,bogus", Net | SHM, Init},
		{"ALL", Init | Coll | P2P | SHM | Net | Graph | Tuning | Env | Alloc | Call, 0},
		{"^INIT", Coll | P2P | Net | Call, Init},
		{"^INIT,NET", Coll | P2P | Call | Alloc, Init | Net},
		{"^ALL", 0, Init | Coll | Net | Call},
	} {
		t.Run("subsys="+tc.subsys, func(t *testing.T) {
			env := []string{"MSCCLPP_DEBUG", "TRACE"}
			if tc.subsys != "-" {
				env = append(env, "MSCCLPP_DEBUG_SUBSYS", tc.subsys)
			}
			lines := capture(t, env...)
			for bit := Init; bit <= Call; bit <<= 1 {
				wantOn := tc.on&bit != 0
				if tc.off&bit != 0 && wantOn {
					t.Fatalf("bad case")
				}
				if tc.on&bit == 0 && tc.off&bit == 0 {
					continue
				}
				*lines = nil
				Infof(bit, "i")
				Tracef(bit, "t")
				if got := len(*lines) == 2; got != wantOn || (!wantOn && len(*lines) != 0) {
					t.Errorf("subsys %#x: lines %q, want on=%v", bit, *lines, wantOn)
				}
				if Enabled(LevelInfo, bit) != wantOn || Enabled(LevelTrace, bit) != wantOn {
					t.Errorf("Enabled(_, %#x) != %v", bit, wantOn)
				}
			}
			// WARN and VERSION ignore the mask.
			*lines = nil
			Warnf("w")
			Versionf("v")
			if len(*lines) != 2 || !Enabled(LevelWarn, 0) || !Enabled(LevelVersion, 0) {
				t.Errorf("warn/version with mask %q: %q", tc.subsys, *lines)
			}
		})
	}
}

func TestLineShapes(t *testing.T) {
	lines := capture(t, "MSCCLPP_DEBUG", "TRACE", "MSCCLPP_DEBUG_SUBSYS", "ALL")
	pfx := regexp.QuoteMeta(host(t)) + ":" + strconv.Itoa(os.Getpid()) + `:[1-9][0-9]* `

	Infof(Init, "hello %d", 1)
	Versionf("MSCCLPP version %d.%d", 0, 1)
	SetDevice(3)
	Warnf("bad %s", "thing")
	warnLine := thisLine() - 1
	Tracef(Net, "trace %q", "x")
	traceLine := thisLine() - 1
	func() {
		Tracef(Coll, "closure")
	}()
	closureLine := thisLine() - 2

	want := []string{
		`^` + pfx + `\[-1\] MSCCLPP INFO hello 1\n$`,
		`^` + pfx + `\[-1\] MSCCLPP MSCCLPP version 0\.1\n$`,
		`^` + pfx + `\[3\] logx_test\.go:` + strconv.Itoa(warnLine) + ` MSCCLPP WARN bad thing\n$`,
		`^` + pfx + `\[3\] [0-9]+\.[0-9]{6} TestLineShapes:` + strconv.Itoa(traceLine) + ` MSCCLPP TRACE trace "x"\n$`,
		`^` + pfx + `\[3\] [0-9]+\.[0-9]{6} TestLineShapes\.func1:` + strconv.Itoa(closureLine) + ` MSCCLPP TRACE closure\n$`,
	}
	if len(*lines) != len(want) {
		t.Fatalf("got %d lines %q, want %d", len(*lines), *lines, len(want))
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString((*lines)[i]) {
			t.Errorf("line %d = %q, want match for %s", i, (*lines)[i], re)
		}
	}
	// The tid is this goroutine's OS thread when it is locked to one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	*lines = nil
	Infof(Init, "tid")
	if want := ":" + strconv.Itoa(gettid()) + " ["; len(*lines) != 1 || !strings.Contains((*lines)[0], want) {
		t.Errorf("line %q does not contain %q", *lines, want)
	}
}

// warnWrapper stands for a helper that logs on behalf of its caller.
func warnWrapper(msg string) { WarnfDepth(1, "%s", msg) }

func TestWarnfDepth(t *testing.T) {
	lines := capture(t, "MSCCLPP_DEBUG", "WARN")
	warnWrapper("wrapped")
	wrapped := thisLine() - 1
	WarnfDepth(0, "direct")
	direct := thisLine() - 1
	if len(*lines) != 2 {
		t.Fatalf("lines %q", *lines)
	}
	for i, l := range []int{wrapped, direct} {
		if want := " logx_test.go:" + strconv.Itoa(l) + " MSCCLPP WARN "; !strings.Contains((*lines)[i], want) {
			t.Errorf("line %q does not contain %q", (*lines)[i], want)
		}
	}
}

func TestWarnWithLoggingOff(t *testing.T) {
	lines := capture(t)
	Warnf("first %d", 1)
	Warnf("second %d", 2)
	if len(*lines) != 0 {
		t.Errorf("logging off but got %q", *lines)
	}
}

func TestDebugFile(t *testing.T) {
	dir := t.TempDir()
	capture(t, "MSCCLPP_DEBUG", "INFO",
		"MSCCLPP_DEBUG_FILE", filepath.Join(dir, "log.%h.%p.%%.%x.txt"))
	SetHandler(nil)
	Infof(Init, "to the file")
	Warnf("also to the file")
	DefaultHandler("raw\n")

	name := filepath.Join(dir, "log."+host(t)+"."+strconv.Itoa(os.Getpid())+".%.%x.txt")
	data, err := os.ReadFile(name)
	if err != nil {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("%v (dir has %v)", err, entries)
	}
	got := strings.Split(string(data), "\n")
	if len(got) != 4 || !strings.HasSuffix(got[0], " MSCCLPP INFO to the file") ||
		!strings.HasSuffix(got[1], " MSCCLPP WARN also to the file") || got[2] != "raw" || got[3] != "" {
		t.Errorf("file holds %q", data)
	}

	// Appends, does not truncate, when opened again.
	Reset()
	Infof(Init, "again")
	Reset()
	data, _ = os.ReadFile(name)
	if !strings.HasPrefix(string(data), got[0]) || !strings.HasSuffix(string(data), " MSCCLPP INFO again\n") {
		t.Errorf("after reopen file holds %q", data)
	}
}

func TestDebugFileNotOpenedWhenOff(t *testing.T) {
	dir := t.TempDir()
	capture(t, "MSCCLPP_DEBUG_FILE", filepath.Join(dir, "log"))
	Warnf("x")
	Infof(All, "y")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("logging off created %v", entries)
	}
}

// withStdout runs f with os.Stdout redirected to a file and returns what f wrote.
func withStdout(t *testing.T, f func()) string {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	old := os.Stdout
	os.Stdout = tmp
	defer func() { os.Stdout = old }()
	f()
	data, err := os.ReadFile(tmp.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestDefaultStreamIsStdout(t *testing.T) {
	capture(t, "MSCCLPP_DEBUG", "INFO")
	SetHandler(nil)
	out := withStdout(t, func() { Infof(Init, "on stdout") })
	if !strings.HasSuffix(out, " MSCCLPP INFO on stdout\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("stdout got %q", out)
	}
}

func TestDebugFileFallsBackToStdout(t *testing.T) {
	capture(t, "MSCCLPP_DEBUG", "INFO",
		"MSCCLPP_DEBUG_FILE", filepath.Join(t.TempDir(), "no", "such", "dir", "log"))
	SetHandler(nil)
	out := withStdout(t, func() { Infof(Init, "fallback") })
	if !strings.HasSuffix(out, " MSCCLPP INFO fallback\n") {
		t.Errorf("stdout got %q", out)
	}
}

func TestHandlerReplaceAndRestore(t *testing.T) {
	lines := capture(t, "MSCCLPP_DEBUG", "INFO")
	Infof(Init, "to handler")
	if len(*lines) != 1 {
		t.Fatalf("handler got %q", *lines)
	}
	var second []string
	SetHandler(func(l string) { second = append(second, l) })
	Infof(Init, "to second")
	if len(*lines) != 1 || len(second) != 1 {
		t.Errorf("after replace: first %q, second %q", *lines, second)
	}
	SetHandler(nil)
	out := withStdout(t, func() { Infof(Init, "restored") })
	if len(*lines) != 1 || len(second) != 1 || !strings.HasSuffix(out, " MSCCLPP INFO restored\n") {
		t.Errorf("after restore: first %q, second %q, stdout %q", *lines, second, out)
	}
}

func TestHandlerMayLogAgain(t *testing.T) {
	capture(t, "MSCCLPP_DEBUG", "INFO")
	var got []string
	SetHandler(func(l string) {
		got = append(got, l)
		if len(got) == 1 {
			Warnf("from handler")
			Infof(Init, "info from handler")
		}
	})
	Warnf("outer")
	if len(got) != 3 || !strings.Contains(got[1], "MSCCLPP WARN from handler") {
		t.Errorf("got %q", got)
	}
}

func TestConcurrent(t *testing.T) {
	const goroutines, each = 32, 200
	lineRE := regexp.MustCompile(`^[^:\n]+:[0-9]+:[0-9]+ \[-?[0-9]+\] .*MSCCLPP (INFO|WARN|TRACE) g[0-9]+ n[0-9]+\n$`)
	run := func(t *testing.T) {
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range each {
					switch n % 4 {
					case 0:
						Warnf("g%d n%d", g, n)
					case 1:
						Infof(Coll, "g%d n%d", g, n)
					case 2:
						Tracef(Init, "g%d n%d", g, n)
					default:
						SetDevice(g)
						_ = Enabled(LevelInfo, Net)
					}
				}
			}()
		}
		wg.Wait()
	}
	wantLines := goroutines * each * 3 / 4

	t.Run("handler", func(t *testing.T) {
		capture(t, "MSCCLPP_DEBUG", "TRACE", "MSCCLPP_DEBUG_SUBSYS", "INIT,COLL")
		var mu sync.Mutex
		whole, broken := 0, 0
		SetHandler(func(l string) {
			ok := lineRE.MatchString(l)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				whole++
			} else {
				broken++
			}
		})
		run(t)
		if whole != wantLines || broken != 0 {
			t.Errorf("whole %d (want %d), broken %d", whole, wantLines, broken)
		}
	})

	t.Run("file", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "log")
		capture(t, "MSCCLPP_DEBUG", "TRACE", "MSCCLPP_DEBUG_SUBSYS", "INIT,COLL", "MSCCLPP_DEBUG_FILE", name)
		SetHandler(nil)
		run(t)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(data), "\n")
		lines = lines[:len(lines)-1] // after the final "\n"
		if len(lines) != wantLines {
			t.Errorf("file has %d lines, want %d", len(lines), wantLines)
		}
		for _, l := range lines {
			if !lineRE.MatchString(l) {
				t.Fatalf("broken line %q", l)
			}
		}
	})

	t.Run("reset", func(t *testing.T) {
		capture(t, "MSCCLPP_DEBUG", "INFO")
		SetHandler(func(string) {})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); run(t) }()
		go func() {
			defer wg.Done()
			for range 100 {
				Reset()
			}
		}()
		wg.Wait()
	})
}

func TestExpandPath(t *testing.T) {
	for in, want := range map[string]string{
		"plain":    "plain",
		"a.%h.%p":  "a.node.42",
		"100%%":    "100%",
		"%%h":      "%h",
		"%z and %": "%z and %",
		"%h%p%%%h": "node42%node",
	} {
		if got := expandPath(in, "node", 42); got != want {
			t.Errorf("expandPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShortFunc(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/mscclpp-go/mscclpp/impl/logx.TestShortFunc": "TestShortFunc",
		"example.com/a/pkg.(*T).M":                              "(*T).M",
		"example.com/a/pkg.F.func1":                             "F.func1",
		"main.main":                                             "main",
		"nodots":                                                "nodots",
	} {
		if got := shortFunc(in); got != want {
			t.Errorf("shortFunc(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLevelString(t *testing.T) {
	if LevelTrace.String() != "TRACE" || LevelNone.String() != "NONE" || Level(9).String() != "Level(9)" {
		t.Error("Level.String")
	}
}

// withStderr runs f with os.Stderr redirected to a file and returns what f wrote.
func withStderr(t *testing.T, f func()) string {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	old := os.Stderr
	os.Stderr = tmp
	defer func() { os.Stderr = old }()
	f()
	data, err := os.ReadFile(tmp.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestDebugFileMode(t *testing.T) {
	name := filepath.Join(t.TempDir(), "log")
	capture(t, "MSCCLPP_DEBUG", "INFO", "MSCCLPP_DEBUG_FILE", name)
	SetHandler(nil)
	Infof(Init, "x")
	fi, err := os.Stat(name)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("debug file: %v %v", fi, err)
	}
}

func TestDebugFileRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, nil, 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	out := withStderr(t, func() {
		capture(t, "MSCCLPP_DEBUG", "INFO", "MSCCLPP_DEBUG_FILE", link)
		SetHandler(nil)
		Infof(Init, "not through the link")
	})
	if !strings.Contains(out, "MSCCLPP WARN refusing MSCCLPP_DEBUG_FILE "+link+": it is a symbolic link") ||
		!strings.HasSuffix(out, " MSCCLPP INFO not through the link\n") {
		t.Errorf("stderr got %q", out)
	}
	if data, _ := os.ReadFile(target); len(data) != 0 {
		t.Errorf("the link's target got %q", data)
	}
}

func TestDebugFileRefusesOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file of another user")
	}
	name := filepath.Join(t.TempDir(), "log")
	os.WriteFile(name, nil, 0o666)
	if err := os.Chown(name, 12345, 12345); err != nil {
		t.Skip(err)
	}
	out := withStderr(t, func() {
		capture(t, "MSCCLPP_DEBUG", "INFO", "MSCCLPP_DEBUG_FILE", name)
		SetHandler(nil)
		Infof(Init, "not into their file")
	})
	if !strings.Contains(out, "belongs to uid 12345") || !strings.HasSuffix(out, " MSCCLPP INFO not into their file\n") {
		t.Errorf("stderr got %q", out)
	}
	if data, _ := os.ReadFile(name); len(data) != 0 {
		t.Errorf("their file got %q", data)
	}
}

// The first use logs "X set by environment to Y" for the logger's own
// variables (INFO, ENV) and warns about unknown subsystem names, once.
func TestEnvLinesAndUnknownSubsys(t *testing.T) {
	capture(t)
	t.Setenv("MSCCLPP_DEBUG", "INFO")
	t.Setenv("MSCCLPP_DEBUG_SUBSYS", "ENV,bogus")
	Reset()
	var lines []string
	SetHandler(func(l string) { lines = append(lines, l) })
	Infof(Env, "first")
	Infof(Env, "second")
	text := strings.Join(lines, "")
	for _, want := range []string{
		"MSCCLPP INFO MSCCLPP_DEBUG set by environment to INFO\n",
		"MSCCLPP INFO MSCCLPP_DEBUG_SUBSYS set by environment to ENV,bogus\n",
		`MSCCLPP WARN MSCCLPP_DEBUG_SUBSYS: unknown subsystem "BOGUS" ignored`,
		"MSCCLPP INFO first\n", "MSCCLPP INFO second\n",
	} {
		if strings.Count(text, want) != 1 {
			t.Errorf("want exactly one %q in:\n%s", want, text)
		}
	}
	if len(lines) != 5 {
		t.Errorf("got %d lines, want 5:\n%s", len(lines), text)
	}
}

// Malformed reaches the handler when WARN is on, and stderr (once per
// message) when logging is off.
func TestMalformed(t *testing.T) {
	lines := capture(t, "MSCCLPP_DEBUG", "WARN")
	Malformed("ignoring X=%q", "y")
	Malformed("ignoring X=%q", "y")
	if len(*lines) != 1 || !strings.Contains((*lines)[0], `MSCCLPP WARN ignoring X="y"`) {
		t.Errorf("with WARN on: %q", *lines)
	}

	lines = capture(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	Malformed("ignoring Z=%q", "1")
	Malformed("ignoring Z=%q", "1")
	os.Stderr = saved
	w.Close()
	buf := make([]byte, 4096)
	n, _ := r.Read(buf)
	r.Close()
	got := string(buf[:n])
	if len(*lines) != 0 || strings.Count(got, `MSCCLPP WARN ignoring Z="1"`) != 1 {
		t.Errorf("with logging off: handler %q, stderr %q", *lines, got)
	}
}

// A peer's text prints as one quoted line of printable ASCII, bounded in length.
func TestPeerTextIsPrintableQuotedAndBounded(t *testing.T) {
	for _, in := range []string{
		"\x1b[2J", "\x1b]0;owned\x07", "ok\nhost:1:1 [0] MSCCLPP WARN forged", "caf\u00e9 \xff\xfe", strings.Repeat("A\x1b", 4096),
	} {
		out := PeerText(in)
		if len(out) > 4*MaxPeerText+64 {
			t.Errorf("PeerText(%d bytes) is %d bytes", len(in), len(out))
		}
		if out[0] != '"' {
			t.Errorf("PeerText(%q) = %s: not quoted", in, out)
		}
		for i := 0; i < len(out); i++ {
			if out[i] < 0x20 || out[i] > 0x7e {
				t.Fatalf("PeerText(%q) = %q: byte %#x at %d", in, out, out[i], i)
			}
		}
	}
}
