package hostmem

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Shared is library-internal shared memory (e.g. an SHM eager ring): a sealed memfd, as an
// Alloc region, that node-local peers map with MapRemote, but not an Alloc region itself
// (Lookup does not find it, mscclppHostFree refuses it).
type Shared struct {
	Mem   []byte
	Share Share // how a peer maps it (Offset 0)
}

// NewShared creates size bytes of zeroed shared memory, named name in /proc/<pid>/fd.
func NewShared(name string, size uint64) (*Shared, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, status.Errorf(status.SystemError, "memfd_create %s: %w", name, err)
	}
	fail := func(what string, err error) (*Shared, error) {
		unix.Close(fd)
		return nil, status.Errorf(status.SystemError, "%s %s of %d bytes: %w", what, name, size, err)
	}
	if err = unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("size", err)
	}
	if _, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal", err)
	}
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err != nil {
		return fail("fstat", err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("map", err)
	}
	return &Shared{Mem: mem, Share: Share{Fd: fd, Ino: st.Ino, Size: size}}, nil
}

// Ptr is the address of the memory.
func (s *Shared) Ptr() unsafe.Pointer { return unsafe.Pointer(&s.Mem[0]) }

// CloseFd closes the descriptor peers open through /proc: once they mapped the memory, it
// is no longer needed (the mapping stays). Idempotent.
func (s *Shared) CloseFd() {
	if s.Share.Fd >= 0 {
		unix.Close(s.Share.Fd)
		s.Share.Fd = -1
	}
}

// Free unmaps the memory and closes its descriptor; peers' mappings stay valid.
func (s *Shared) Free() {
	s.CloseFd()
	if s.Mem != nil {
		unix.Munmap(s.Mem)
		s.Mem = nil
	}
}
