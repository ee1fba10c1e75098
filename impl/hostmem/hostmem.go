// Package hostmem is the mscclppHostAlloc allocator: host memory backed by a
// memfd, which node-local peers map through /proc/<pid>/fd so that a put
// into it is one memcpy.
package hostmem

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

type region struct {
	mem  []byte
	fd   int
	ino  uint64
	pins map[*Pin]struct{} // live registrations of buffers in it: Free refuses while any
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
	mem, fd, ino, err := newSealed("mscclpp-hostalloc", "host allocation", size)
	if err != nil {
		return nil, err
	}
	p := unsafe.Pointer(&mem[0])
	mu.Lock()
	regions[uintptr(p)] = &region{mem: mem, fd: fd, ino: ino}
	mu.Unlock()
	logx.Infof(logx.Alloc, "mscclppHostAlloc: %d bytes at %p (memfd, shareable with the ranks of this node)", size, p)
	return p, nil
}

// newSealed creates size bytes of zeroed memory in a memfd named name, sealed at its size
// (peers that map it check the seal, so neither side can shrink the memory behind the
// other's mapping: an access past the end would be SIGBUS), and maps it here. what names
// the memory in errors.
func newSealed(name, what string, size uint64) (mem []byte, fd int, ino uint64, err error) {
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, -1, 0, status.Errorf(status.SystemError, "memfd_create %s: %w", name, err)
	}
	fail := func(step string, err error) ([]byte, int, uint64, error) {
		if mem != nil {
			unix.Munmap(mem)
		}
		unix.Close(fd)
		return nil, -1, 0, status.Errorf(status.SystemError, "%s: %w", step, err)
	}
	if err = unix.Ftruncate(fd, int64(size)); err != nil {
		return fail(fmt.Sprintf("size %s to %d bytes", what, size), err)
	}
	if _, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal "+what, err)
	}
	if mem, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail(fmt.Sprintf("map %s of %d bytes", what, size), err)
	}
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err != nil {
		return fail("fstat "+what, err)
	}
	return mem, fd, st.Ino, nil
}

// Free releases memory returned by Alloc; other pointers are InvalidArgument.
func Free(p unsafe.Pointer) error {
	mu.Lock()
	r, ok := regions[uintptr(p)]
	if !ok {
		mu.Unlock()
		return status.Errorf(status.InvalidArgument, "mscclppHostFree(%p): not a pointer returned by mscclppHostAlloc", p)
	}
	for pin := range r.pins {
		mu.Unlock()
		return status.Errorf(status.InvalidUsage, "mscclppHostFree(%p): the buffer is registered on %s, which would then read or write freed memory: destroy that communicator first", p, pin.what)
	}
	delete(regions, uintptr(p))
	mu.Unlock()
	unix.Munmap(r.mem)
	unix.Close(r.fd)
	logx.Infof(logx.Alloc, "mscclppHostFree: %d bytes at %p", len(r.mem), p)
	return nil
}

// Pin is a registration of a buffer in an Alloc region: Free of the region fails while it lives.
type Pin struct {
	base uintptr
	what string
}

// PinRange records that [p, p+size) is registered as what (e.g. "connection 0 (rank 1, tag 3)
// of rank 0's communicator"), so that Free of its region fails naming it until Unpin; nil
// when the range lies in no Alloc region.
func PinRange(p unsafe.Pointer, size uint64, what string) *Pin {
	a := uintptr(p)
	mu.Lock()
	defer mu.Unlock()
	for base, r := range regions {
		if a >= base && uint64(a-base) < uint64(len(r.mem)) {
			pin := &Pin{base: base, what: what}
			if r.pins == nil {
				r.pins = map[*Pin]struct{}{}
			}
			r.pins[pin] = struct{}{}
			return pin
		}
	}
	return nil
}

// Unpin ends a registration of PinRange (nil: none).
func Unpin(pin *Pin) {
	if pin == nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if r, ok := regions[pin.base]; ok {
		delete(r.pins, pin)
	}
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

// MapRemote maps the region a peer process shared and returns the address of its buffer of
// size bytes at s.Offset (one mapping per process and region, counted: each call must be
// paired with Release). What the peer claims is checked against the memory itself: the
// region must be a memfd sealed against shrinking, at least s.Size bytes long, and the
// buffer must lie inside it; else RemoteError. A peer that exited is RemoteError too.
func MapRemote(pid int, s Share, size uint64) (unsafe.Pointer, Mapping, error) {
	k := remoteKey{pid, s.Ino}
	remoteMu.Lock()
	defer remoteMu.Unlock()
	m, ok := remotes[k]
	if !ok {
		mem, err := mapPeer(pid, s)
		if err != nil {
			return nil, Mapping{}, err
		}
		m = &remoteMap{mem: mem}
		remotes[k] = m
	}
	if n := uint64(len(m.mem)); s.Offset >= n || size > n-s.Offset {
		if m.refs == 0 {
			unix.Munmap(m.mem)
			delete(remotes, k)
		}
		return nil, Mapping{}, status.Errorf(status.RemoteError, "the peer's buffer of %d bytes at offset %d lies outside its %d-byte region", size, s.Offset, n)
	}
	m.refs++
	return unsafe.Add(unsafe.Pointer(&m.mem[0]), s.Offset), Mapping{key: k}, nil
}

// mapPeer opens and maps the region s of process pid after checking it is what the peer claims.
func mapPeer(pid int, s Share) ([]byte, error) {
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, s.Fd)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) || unix.Kill(pid, 0) == unix.ESRCH {
			return nil, status.Errorf(status.RemoteError, "the peer process %d exited or closed its memory (open %s: %v)", pid, path, err)
		}
		return nil, status.Errorf(status.SystemError, "open peer memory %s: %w", path, err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err = unix.Fstat(int(f.Fd()), &st); err != nil || st.Ino != s.Ino {
		return nil, status.Errorf(status.RemoteError, "peer memory %s is not the region the peer registered", path)
	}
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, status.Errorf(status.RemoteError, "peer memory %s is not an mscclppHostAlloc region (not sealed against shrinking)", path)
	}
	if s.Size == 0 || uint64(st.Size) < s.Size {
		return nil, status.Errorf(status.RemoteError, "the peer claims a region of %d bytes, but its memory %s has %d", s.Size, path, st.Size)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(s.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, status.Errorf(status.SystemError, "map peer memory %s: %w", path, err)
	}
	return mem, nil
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
