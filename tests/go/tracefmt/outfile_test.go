package tracefmt

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildOne builds testdata/one.c into dir.
func buildOne(t *testing.T, root, dir string) string {
	t.Helper()
	b := filepath.Join(root, "build")
	one := filepath.Join(dir, "one")
	cc := exec.Command("cc", "-std=c11", "-Wall", "-Werror", "-I"+filepath.Join(b, "include"), "testdata/one.c", "-o", one,
		"-L"+filepath.Join(b, "lib"), "-Wl,-rpath,"+filepath.Join(b, "lib"), "-lmscclpp")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("building one.c: %v\n%s", err, out)
	}
	return one
}

// run runs argv with env added and returns its exit status and output.
func run(t *testing.T, env []string, argv ...string) (int, string) {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), env...)
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("%v: %v\n%s", argv, err, out)
	return -1, ""
}

// victim is a file another path may point at: its bytes must never change.
func victim(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "victim")
	if err := os.WriteFile(p, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func unchanged(t *testing.T, p string) {
	t.Helper()
	if b, err := os.ReadFile(p); err != nil || string(b) != "precious\n" {
		t.Errorf("%s changed: %q, %v", p, b, err)
	}
}

// TestToolsRefuseLinksAndOtherUsersFiles: the trace and profile tools and
// mscclpp-trace-merge never write through a symbolic link or into another
// user's file at their output's name: they say so, and the trace tool and
// merge exit 1 (the profile goes to stderr instead).
func TestToolsRefuseLinksAndOtherUsersFiles(t *testing.T) {
	root, profile, trace, merge := built(t)
	dir := t.TempDir()
	one := buildOne(t, root, dir)
	v := victim(t, dir)
	link := filepath.Join(dir, "out.json")
	if err := os.Symlink(v, link); err != nil {
		t.Fatal(err)
	}
	rc, out := run(t, []string{"MSCCLPP_TOOLS=" + trace, "MSCCLPP_TRACE_FILE=" + link}, one)
	if rc != 1 || !strings.Contains(out, "mscclpp-trace: refusing "+link+": it is a symbolic link") {
		t.Errorf("trace to a link: exit %d, output:\n%s", rc, out)
	}
	unchanged(t, v)
	rc, out = run(t, []string{"MSCCLPP_TOOLS=" + profile, "MSCCLPP_PROFILE_FILE=" + link}, one)
	if rc != 0 || !strings.Contains(out, "mscclpp-profile: refusing "+link+": it is a symbolic link") ||
		!strings.Contains(out, "mscclpp-profile: the profile goes to stderr") || !strings.Contains(out, "mscclppGetVersion") {
		t.Errorf("profile to a link: exit %d, output:\n%s", rc, out)
	}
	unchanged(t, v)

	// a trace to merge, then merge into the link
	good := filepath.Join(dir, "good.json")
	if rc, out := run(t, []string{"MSCCLPP_TOOLS=" + trace, "MSCCLPP_TRACE_FILE=" + good}, one); rc != 0 {
		t.Fatalf("trace: exit %d\n%s", rc, out)
	}
	rc, out = run(t, nil, merge, "-o", link, good)
	if rc != 1 || !strings.Contains(out, "refusing "+link+": it is a symbolic link") {
		t.Errorf("merge into a link: exit %d, output:\n%s", rc, out)
	}
	unchanged(t, v)

	if os.Geteuid() != 0 {
		t.Log("not root: the case of another user's file is not run")
		return
	}
	other := victim(t, t.TempDir())
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	rc, out = run(t, []string{"MSCCLPP_TOOLS=" + trace, "MSCCLPP_TRACE_FILE=" + other}, one)
	if rc != 1 || !strings.Contains(out, "refusing "+other+": it belongs to uid 65534, not to this user (uid 0)") {
		t.Errorf("trace into uid 65534's file: exit %d, output:\n%s", rc, out)
	}
	unchanged(t, other)
	rc, out = run(t, nil, merge, "-o", other, good)
	if rc != 1 || !strings.Contains(out, "refusing "+other+": it belongs to uid 65534") {
		t.Errorf("merge into uid 65534's file: exit %d, output:\n%s", rc, out)
	}
	unchanged(t, other)

	// this user's own earlier output is replaced
	if rc, out := run(t, []string{"MSCCLPP_TOOLS=" + trace, "MSCCLPP_TRACE_FILE=" + good}, one); rc != 0 ||
		!strings.Contains(out, "one: version") {
		t.Errorf("trace over its own earlier file: exit %d\n%s", rc, out)
	}
	if b, err := os.ReadFile(good); err != nil || !bytes.Contains(b, []byte(`"name":"mscclppGetVersion"`)) {
		t.Errorf("the replaced trace: %v\n%s", err, b)
	}
}

// TestToolsReportAFullDisk: on a full file system (a 4 KiB tmpfs filled up,
// in a mount namespace of its own) the trace and profile tools and
// mscclpp-trace-merge say they could not write, leave no file and exit 1.
func TestToolsReportAFullDisk(t *testing.T) {
	root, profile, trace, merge := built(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	dir := t.TempDir()
	one := buildOne(t, root, dir)
	good := filepath.Join(dir, "good.json")
	if rc, out := run(t, []string{"MSCCLPP_TOOLS=" + trace, "MSCCLPP_TRACE_FILE=" + good}, one); rc != 0 {
		t.Fatalf("trace: exit %d\n%s", rc, out)
	}
	full := filepath.Join(dir, "full")
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	// in the namespace: mount, fill, run, then list what the run left
	script := `mount -t tmpfs -o size=4k none "$1" || exit 99
head -c 65536 /dev/zero > "$1/fill" 2>/dev/null
shift; "$@"; rc=$?; echo "left: $(ls "` + full + `" | grep -v '^fill$' | tr '\n' ' ')"; exit $rc`
	inNS := func(env []string, argv ...string) (int, string) {
		return run(t, env, append([]string{"unshare", "-m", "sh", "-c", script, "sh", full}, argv...)...)
	}
	cases := []struct {
		name, what string
		env        []string
		argv       []string
	}{
		{"trace", "mscclpp-trace: cannot write " + full + "/t.json", []string{"MSCCLPP_TOOLS=" + trace, "MSCCLPP_TRACE_FILE=" + full + "/t.json"}, []string{one}},
		{"profile", "mscclpp-profile: cannot write " + full + "/p.txt", []string{"MSCCLPP_TOOLS=" + profile, "MSCCLPP_PROFILE_FILE=" + full + "/p.txt"}, []string{one}},
		{"merge", "mscclpp-trace-merge: cannot write " + full + "/m.json", nil, []string{merge, "-o", full + "/m.json", good}},
	}
	for _, c := range cases {
		rc, out := inNS(c.env, c.argv...)
		if rc == 99 {
			t.Skipf("cannot mount a tmpfs here:\n%s", out)
		}
		if rc != 1 || !strings.Contains(out, c.what+": No space left on device") || !strings.Contains(out, "left: \n") {
			t.Errorf("%s on a full disk: exit %d (want 1), output:\n%s", c.name, rc, out)
		}
	}
}

// TestTraceMaxEventsValidated: a malformed MSCCLPP_TRACE_MAX_EVENTS is
// ignored with one line naming it, and the trace is still written with the
// default bound.
func TestTraceMaxEventsValidated(t *testing.T) {
	root, _, trace, _ := built(t)
	dir := t.TempDir()
	one := buildOne(t, root, dir)
	for _, bad := range []string{"-1", "abc", "0", "12x", "99999999999999999999", " 5"} {
		path := filepath.Join(dir, "t.json")
		os.Remove(path)
		rc, out := run(t, []string{"MSCCLPP_TOOLS=" + trace, "MSCCLPP_TRACE_FILE=" + path, "MSCCLPP_TRACE_MAX_EVENTS=" + bad}, one)
		want := `mscclpp-trace: ignoring MSCCLPP_TRACE_MAX_EVENTS="` + bad + `": not a whole number from 1 to`
		if rc != 0 || strings.Count(out, want) != 1 || strings.Contains(out, "out of memory") {
			t.Errorf("MSCCLPP_TRACE_MAX_EVENTS=%q: exit %d, output:\n%s", bad, rc, out)
		}
		if b, err := os.ReadFile(path); err != nil || bytes.Count(b, []byte(`"name":"mscclppGetVersion"`)) != 3 {
			t.Errorf("MSCCLPP_TRACE_MAX_EVENTS=%q: the trace: %v\n%s", bad, err, b)
		}
	}
}
