// Package hostmem is the mscclppHostAlloc allocator: host memory backed by a
// memfd, which node-local peers map through /proc/<pid>/fd so that a put
// into it is one memcpy.
package hostmem

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

type region struct {
	mem []byte
	fd  int
	ino uint64
}

var (
	mu      sync.Mutex
	regions = map[uintptr]*region{} // by base address

	remoteMu sync.Mutex
	remotes  = map[remoteKey]*remoteMap{}
)

// remoteMap is a peer's region mapped here, shared by every registration that uses it.
type remoteMap struct {
	mem  []byte
	refs int
}

type remoteKey struct {
	pid int
	ino uint64
}

// Alloc returns size bytes of zeroed shareable host memory.
func Alloc(size uint64) (unsafe.Pointer, error) {
	if size == 0 {
		return nil, status.Errorf(status.InvalidArgument, "mscclppHostAlloc of 0 bytes")
	}
	fd, err := unix.MemfdCreate("mscclpp-hostalloc", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, status.Errorf(status.SystemError, "memfd_create: %w", err)
	}
	if err = unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, status.Errorf(status.SystemError, "size host allocation to %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, status.Errorf(status.SystemError, "map host allocation of %d bytes: %w", size, err)
	}
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, status.Errorf(status.SystemError, "fstat host allocation: %w", err)
	}
	p := unsafe.Pointer(&mem[0])
	mu.Lock()
	regions[uintptr(p)] = &region{mem: mem, fd: fd, ino: st.Ino}
	mu.Unlock()
	logx.Infof(logx.Alloc, "mscclppHostAlloc: %d bytes at %p (memfd, shareable with the ranks of this node)", size, p)
	return p, nil
}

// Free releases memory returned by Alloc; other pointers are InvalidArgument.
func Free(p unsafe.Pointer) error {
	mu.Lock()
	r, ok := regions[uintptr(p)]
	delete(regions, uintptr(p))
	mu.Unlock()
	if !ok {
		return status.Errorf(status.InvalidArgument, "mscclppHostFree(%p): not a pointer returned by mscclppHostAlloc", p)
	}
	unix.Munmap(r.mem)
	unix.Close(r.fd)
	logx.Infof(logx.Alloc, "mscclppHostFree: %d bytes at %p", len(r.mem), p)
	return nil
}

// Share describes how a peer can map a buffer that lies in an Alloc region.
type Share struct {
	Fd     int
	Ino    uint64
	Size   uint64 // the region's size
	Offset uint64 // the buffer's offset in the region
}

// Lookup returns how to share [p, p+size) when it lies inside one Alloc region.
func Lookup(p unsafe.Pointer, size uint64) (Share, bool) {
	a := uintptr(p)
	mu.Lock()
	defer mu.Unlock()
	for base, r := range regions {
		if a >= base && uint64(a-base)+size <= uint64(len(r.mem)) {
			return Share{Fd: r.fd, Ino: r.ino, Size: uint64(len(r.mem)), Offset: uint64(a - base)}, true
		}
	}
	return Share{}, false
}

// Mapping is one use of a peer's region; Release it when done.
type Mapping struct{ key remoteKey }

// MapRemote maps the region a peer process shared (one mapping per process and region,
// counted: each call must be paired with Release).
func MapRemote(pid int, s Share) (unsafe.Pointer, Mapping, error) {
	k := remoteKey{pid, s.Ino}
	remoteMu.Lock()
	defer remoteMu.Unlock()
	m, ok := remotes[k]
	if !ok {
		path := fmt.Sprintf("/proc/%d/fd/%d", pid, s.Fd)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, Mapping{}, status.Errorf(status.SystemError, "open peer memory %s: %w", path, err)
		}
		defer f.Close()
		var st unix.Stat_t
		if err = unix.Fstat(int(f.Fd()), &st); err != nil || st.Ino != s.Ino {
			return nil, Mapping{}, status.Errorf(status.RemoteError, "peer memory %s is not the region the peer registered", path)
		}
		mem, err := unix.Mmap(int(f.Fd()), 0, int(s.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return nil, Mapping{}, status.Errorf(status.SystemError, "map peer memory %s: %w", path, err)
		}
		m = &remoteMap{mem: mem}
		remotes[k] = m
	}
	if s.Offset >= uint64(len(m.mem)) {
		return nil, Mapping{}, status.Errorf(status.RemoteError, "peer region offset %d beyond its %d bytes", s.Offset, len(m.mem))
	}
	m.refs++
	return unsafe.Add(unsafe.Pointer(&m.mem[0]), s.Offset), Mapping{key: k}, nil
}

// Release ends one use of a mapping; the last one unmaps the region.
func Release(mp Mapping) {
	remoteMu.Lock()
	defer remoteMu.Unlock()
	m, ok := remotes[mp.key]
	if !ok {
		return
	}
	if m.refs--; m.refs <= 0 {
		unix.Munmap(m.mem)
		delete(remotes, mp.key)
	}
}

// Mapped is the number of peer regions mapped in this process (for tests).
func Mapped() int {
	remoteMu.Lock()
	defer remoteMu.Unlock()
	return len(remotes)
}
