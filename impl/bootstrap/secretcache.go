package bootstrap

// The digest of a secret file (MSCCLPP_BOOTSTRAP_SECRET_FILE or the cookie),
// kept for the process while the file stays the same: a communicator formed
// later in the process (and the first one, when Warm read the file at load)
// pays one stat instead of open, fstat, read and close. The file is checked
// at every use as readSecretFile checks it (a regular file of this user, not
// accessible by group or others), and read again whenever its identity or
// its times or size changed; a file changed in the last racyWindow is not kept.

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/env"
)

// fileID is what tells a version of a file from another: a file replaced (a new
// inode) or written (mtime, ctime, size) is read again.
type fileID struct {
	dev, ino   uint64
	size       int64
	mtim, ctim syscall.Timespec
	uid, mode  uint32
}

func fileIDOf(st *syscall.Stat_t) fileID {
	return fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtim: st.Mtim, ctim: st.Ctim, uid: st.Uid, mode: st.Mode}
}

var secretCache struct {
	sync.Mutex
	path   string
	id     fileID
	digest [sha256.Size]byte
}

// fileSecret returns the digest of the secret in the file at path (what names it in
// errors), from the cache when the file is the one read last.
func fileSecret(path, what string) ([sha256.Size]byte, error) {
	var st syscall.Stat_t
	// The id holds the owner and the mode with the file's type: equal to the cached file's,
	// they pass readSecretFile's checks as that file's did, unless this process's user changed.
	if err := syscall.Stat(path, &st); err == nil && int(st.Uid) == os.Geteuid() {
		secretCache.Lock()
		hit := secretCache.path == path && secretCache.id == fileIDOf(&st)
		d := secretCache.digest
		secretCache.Unlock()
		if hit {
			return d, nil
		}
	}
	text, st2, err := readSecretFile(path, what)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	d := secretDigest(text)
	if st2 != nil && settled(st2) {
		secretCache.Lock()
		secretCache.path, secretCache.id, secretCache.digest = path, fileIDOf(st2), d
		secretCache.Unlock()
	}
	return d, nil
}

// racyWindow is how recent a file's last change may be for its digest not to be
// kept: a file changed again within the resolution of its file system's clock
// (a second or two on some) could keep the same times and size.
const racyWindow = 2 * time.Second

// settled reports whether the content of the file st describes was last written
// longer than racyWindow ago.
func settled(st *syscall.Stat_t) bool {
	return time.Since(time.Unix(st.Mtim.Unix())) > racyWindow
}

// warmSecret reads the secret file that an ip:port communicator would read now, if
// there is one (it creates no cookie, and reads nothing when MSCCLPP_BOOTSTRAP_SECRET
// is set); errors are left for the communicator to report.
func warmSecret() {
	if s, _ := env.Raw(EnvSecret); s != "" {
		return
	}
	path, _ := env.Raw(EnvSecretFile)
	if path == "" {
		home, _ := env.Raw("HOME")
		if home == "" {
			return
		}
		path = filepath.Join(home, CookieName)
	}
	_, _ = fileSecret(path, path)
}
