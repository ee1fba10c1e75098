package hostmem

import (
	"unsafe"

	"golang.org/x/sys/unix"
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
	mem, fd, ino, err := newSealed(name, name, size)
	if err != nil {
		return nil, err
	}
	return &Shared{Mem: mem, Share: Share{Fd: fd, Ino: ino, Size: size}}, nil
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
