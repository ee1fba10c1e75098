package bootstrap

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// The digest of a secret file is kept only while the file is unchanged: a file
// rewritten (even to the same size) or replaced gives the key of its new text, and one
// made readable by others is refused although its digest was kept.
func TestSecretFileCache(t *testing.T) {
	ap, _ := ParseAddr("127.0.0.1:5000")
	nolog := func(bool, string, ...any) {}
	t.Setenv(EnvSecret, "")
	keyOf := func(text string) [keyBytes]byte { // the key of text, through the variable
		t.Helper()
		t.Setenv(EnvSecret, text)
		defer t.Setenv(EnvSecret, "")
		k, _, err := addrKey(ap, nolog)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	kA, kB := keyOf("secret-a"), keyOf("secret-b")
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	t.Setenv(EnvSecretFile, file)
	old := time.Now().Add(-time.Hour) // settled: the digest is kept
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, old, old); err != nil {
			t.Fatal(err)
		}
		old = old.Add(time.Second)
	}
	want := func(k [keyBytes]byte, what string) {
		t.Helper()
		for range 2 { // read, then (kept) again
			got, _, err := addrKey(ap, nolog)
			if err != nil || got != k {
				t.Fatalf("%s: %v, same key %v", what, err, got == k)
			}
		}
	}
	write("secret-a")
	want(kA, "first read")
	write("secret-b") // same size, new times
	want(kB, "rewritten")
	tmp := filepath.Join(dir, "new")
	os.WriteFile(tmp, []byte("secret-a"), 0o600)
	os.Chtimes(tmp, old, old)
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	want(kA, "replaced")
	os.Chmod(file, 0o640)
	_, _, err := addrKey(ap, nolog)
	wantCode(t, err, status.InvalidUsage, "mode 0640")
	os.Chmod(file, 0o600)
	want(kA, "mode restored")
	// A file changed just now is read at every use: rewritten within the same
	// clock tick, it would keep its times.
	os.WriteFile(file, []byte("secret-b"), 0o600)
	want(kB, "fresh")
	os.WriteFile(file, []byte("secret-a"), 0o600)
	want(kA, "fresh, rewritten")
}

// Warm reads an existing cookie but never creates one.
func TestWarmSecretCreatesNothing(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv(EnvSecret, "")
	t.Setenv(EnvSecretFile, "")
	warmSecret()
	if _, err := os.Stat(filepath.Join(home, CookieName)); !os.IsNotExist(err) {
		t.Fatalf("warmSecret created the cookie (%v)", err)
	}
}
