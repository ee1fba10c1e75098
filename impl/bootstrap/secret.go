package bootstrap

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// The key of an ip:port communicator (InitAddr). Nothing is exchanged out
// of band there, so the ranks' shared secret comes from the environment,
// like an Erlang cookie:
//
//   - MSCCLPP_BOOTSTRAP_SECRET, a string; or else
//   - MSCCLPP_BOOTSTRAP_SECRET_FILE, a file the launcher shares; or else
//   - $HOME/.mscclpp_cookie, created with 32 random bytes (as hex) when
//     missing: every job of the user on every node that shares the home
//     directory shares it.
//
// A file (the secret file or the cookie) must be a regular file owned by
// this user and not accessible by group or others; otherwise it is refused
// with InvalidUsage saying how to fix it. The text (trailing white space
// trimmed) is hashed, so the same text in the variable or in a file gives
// the same secret; the key is then HMAC(secret, root address), so a key
// proves membership of one communicator only.
const (
	// CookieName is the per-user cookie file in $HOME.
	CookieName = ".mscclpp_cookie"

	maxSecretFile = 4096
	cookieRandom  = 32
)

// secretDigest hashes a secret's text.
func secretDigest(text []byte) [sha256.Size]byte {
	m := sha256.New()
	m.Write([]byte("mscclpp-go bootstrap secret v2\x00"))
	m.Write(text)
	var out [sha256.Size]byte
	m.Sum(out[:0])
	return out
}

// addrKey returns the key of the ip:port communicator at addr and a
// description of where its secret came from.
func addrKey(addr netip.AddrPort, logf logFunc) ([keyBytes]byte, string, error) {
	secret, source, err := baseSecret(logf)
	if err != nil {
		return [keyBytes]byte{}, "", err
	}
	m := hmac.New(sha256.New, secret[:])
	m.Write([]byte("mscclpp-go bootstrap key v2\x00" + addr.String()))
	var key [keyBytes]byte
	m.Sum(key[:0])
	return key, source, nil
}

func baseSecret(logf logFunc) ([sha256.Size]byte, string, error) {
	if s := secretEnv(); s != "" {
		if secretFileEnv() != "" {
			logf(false, "bootstrap: both %s and %s are set; using %s", EnvSecret, EnvSecretFile, EnvSecret)
		}
		text := strings.TrimRight(s, " \t\r\n")
		if text == "" {
			// trailing whitespace is ignored, so ' ' and a tab would be the same empty secret
			return [sha256.Size]byte{}, "", status.Errorf(status.InvalidUsage,
				"bootstrap: %s is only whitespace (%d bytes): set it to a non-empty secret, or unset it", EnvSecret, len(s))
		}
		return secretDigest([]byte(text)), EnvSecret, nil
	}
	if p := secretFileEnv(); p != "" {
		d, err := readSecret(p, EnvSecretFile+" "+p)
		if err != nil {
			return [sha256.Size]byte{}, "", err
		}
		return d, EnvSecretFile + " " + p, nil
	}
	home := homeEnv()
	if home == "" {
		return [sha256.Size]byte{}, "", status.Errorf(status.InvalidUsage,
			"bootstrap: no secret for an ip:port communicator: set %s or %s (HOME is not set, so there is no ~/%s)",
			EnvSecret, EnvSecretFile, CookieName)
	}
	path := filepath.Join(home, CookieName)
	what := "the bootstrap cookie " + path
	d, err := readSecret(path, what)
	if errors.Is(err, fs.ErrNotExist) {
		if err = createCookie(path); err != nil {
			return [sha256.Size]byte{}, "", err
		}
		logf(false, "bootstrap: created %s", what)
		d, err = readSecret(path, what)
	}
	if err != nil {
		return [sha256.Size]byte{}, "", err
	}
	return d, path, nil
}

// readSecret returns the digest of the secret in the file at path (what names
// it in errors).
func readSecret(path, what string) ([sha256.Size]byte, error) {
	text, err := readSecretFile(path, what)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return secretDigest(text), nil
}

// readSecretFile reads a secret file after checking that only this user
// can read or change it, and returns its text. An error is InvalidUsage
// saying how to fix it, or wraps fs.ErrNotExist.
func readSecretFile(path, what string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, status.Errorf(status.InvalidUsage, "bootstrap: %s does not exist: %w", what, err)
		}
		return nil, status.Errorf(status.InvalidUsage, "bootstrap: cannot open %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, status.Errorf(status.InvalidUsage, "bootstrap: cannot stat %s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, status.Errorf(status.InvalidUsage, "bootstrap: %s is not a regular file (%v)", what, fi.Mode().Type())
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil && int(st.Uid) != os.Geteuid() {
		return nil, status.Errorf(status.InvalidUsage,
			"bootstrap: %s belongs to uid %d, not to this user (uid %d): a secret must be in a file of your own (remove it, or chown it to yourself and chmod 600 it)",
			what, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, status.Errorf(status.InvalidUsage,
			"bootstrap: %s is accessible by group or others (mode %#o): run chmod 600 %s", what, perm, path)
	}
	// A cookie being created by another rank through the O_EXCL fallback
	// may be empty for a moment.
	var text []byte
	for wait := time.Millisecond; ; wait *= 2 {
		text, err = io.ReadAll(io.LimitReader(f, maxSecretFile+1))
		if err != nil {
			return nil, status.Errorf(status.InvalidUsage, "bootstrap: cannot read %s: %w", what, err)
		}
		text = []byte(strings.TrimRight(string(text), " \t\r\n"))
		if len(text) > 0 || wait > 256*time.Millisecond {
			break
		}
		time.Sleep(wait)
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, status.Errorf(status.InvalidUsage, "bootstrap: cannot read %s: %w", what, err)
		}
	}
	switch {
	case len(text) > maxSecretFile:
		return nil, status.Errorf(status.InvalidUsage, "bootstrap: %s is longer than %d bytes", what, maxSecretFile)
	case len(text) == 0:
		return nil, status.Errorf(status.InvalidUsage, "bootstrap: %s is empty", what)
	}
	return text, nil
}

// createCookie creates the cookie at path without ever clobbering one that
// exists: a temporary file (mode 0600) with 32 random bytes as hex, then a
// hard link to path (EEXIST: another process won, and its cookie is used).
// Where hard links are not supported it falls back to O_CREAT|O_EXCL.
func createCookie(path string) error {
	var raw [cookieRandom]byte
	rand.Read(raw[:])
	content := []byte(hex.EncodeToString(raw[:]) + "\n")
	fail := func(err error) error {
		return status.Errorf(status.InvalidUsage,
			"bootstrap: cannot create the bootstrap cookie %s: %w (set %s or %s instead)", path, err, EnvSecret, EnvSecretFile)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), CookieName+".tmp*")
	if err != nil {
		return fail(err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	err = os.Link(tmpName, path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil
	}
	// No hard links here (some network or FUSE file systems).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fail(err)
	}
	_, err = f.Write(content)
	if e := f.Close(); err == nil {
		err = e
	}
	if err != nil {
		return fail(err)
	}
	return nil
}
