package shm

// The eager ring of a connection (ring.h): the receiver creates it when it describes a
// buffer the peer cannot map (malloc), in its arena, names it in that buffer's blob (the
// arena's fd, ino and size, the ring's offset: a regRaw desc), and lands what arrives; the
// sender maps the arena in Finish after checking it is what the blob claims (once per peer
// process: hostmem.MapRemote shares mappings), and queues small puts into the ring.

/*
#include <stdlib.h>
#include "ring.h"
#include "shm.h"
static const void* shmLandOpsPtr(void) { return &shmLandOps; }
static uint64_t shmQueued(shmRingHdr* h) { return __atomic_load_n(&h->head, __ATOMIC_ACQUIRE); }
static void shmRingClose(shmRingHdr* h) { __atomic_store_n(&h->closed, 1, __ATOMIC_RELEASE); }
*/
import "C"

import (
	"strconv"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// inRing is a ring this rank created for a connection's incoming puts.
type inRing struct {
	ptr              unsafe.Pointer // its header, in the arena
	off              uint64         // its offset in the arena
	nslots, maxBytes uint64         // its geometry as made here (the peer can write the header's copy)
	wired            bool           // Finish handed it to the lander
}

// The rings of a communicator lie in one arena, a sealed memfd with room for a ring per
// connection (engine.MaxConns), made at the first and sparse until used: a peer maps it once
// for all its connections to this rank, and a connection costs no system call of its own.
type arena struct {
	mem              *hostmem.Shared
	nslots, maxBytes uint64 // the geometry of every ring in it
	ringBytes        uint64
}

// EnvEagerBytes is the variable of the eager threshold: SHM puts of up to that many bytes into
// memory the peer cannot map go through the connection's ring, not one process_vm_writev each.
const EnvEagerBytes = string(env.EagerBytes)

const defaultEagerBytes = 4096

// eagerSetting parses MSCCLPP_EAGER_BYTES as the core read it ("" where unset): 0 turns eager
// puts off; a malformed value is reported and the default used, a value above SHM_EAGER_MAX
// reported and capped.
func eagerSetting(v string) uint64 {
	if v == "" {
		return defaultEagerBytes
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		logx.Malformed("ignoring %s=%q: not a non-negative integer; the default %d is used", EnvEagerBytes, v, defaultEagerBytes)
		return defaultEagerBytes
	}
	if n > C.SHM_EAGER_MAX {
		logx.Malformed("%s=%d is more than %d; %d is used", EnvEagerBytes, n, C.SHM_EAGER_MAX, C.SHM_EAGER_MAX)
		n = C.SHM_EAGER_MAX
	}
	return n
}

// eagerBytes is the communicator's eager threshold (eagerSetting).
func (s *shm) eagerBytes() uint64 { return s.eager }

// ringGeometry is the number of slots of a ring for entries of up to eager bytes: room for 8
// of the largest, and at least 1024 slots (64 KiB).
func ringGeometry(eager uint64) (nslots uint64, bytes uint64) {
	need := 8 * uint64(C.shmEntrySlots(C.uint64_t(eager)))
	for nslots = 1024; nslots < need; nslots *= 2 {
	}
	return nslots, C.SHM_RING_HDR + nslots*C.SHM_SLOT
}

// ringFor is connection idx's incoming ring, created at the first call (and the arena with
// the first ring); nil when eager puts are off.
func (s *shm) ringFor(idx int) (*inRing, error) {
	if r, ok := s.rings[idx]; ok {
		return r, nil
	}
	eager := s.eagerBytes()
	if eager == 0 || idx < 0 || idx >= engine.MaxConns {
		return nil, nil
	}
	if s.arena == nil {
		nslots, bytes := ringGeometry(eager)
		mem, err := hostmem.NewShared("mscclpp-eager", bytes*engine.MaxConns)
		if err != nil {
			return nil, err
		}
		s.arena = &arena{mem: mem, nslots: nslots, maxBytes: eager, ringBytes: bytes}
	}
	a := s.arena
	r := &inRing{off: uint64(idx) * a.ringBytes, nslots: a.nslots, maxBytes: a.maxBytes}
	r.ptr = unsafe.Add(a.mem.Ptr(), r.off)
	hdr := (*C.shmRingHdr)(r.ptr)
	hdr.magic, hdr.nslots, hdr.maxBytes = C.SHM_RING_MAGIC, C.uint32_t(a.nslots), C.uint32_t(a.maxBytes)
	if s.rings == nil {
		s.rings = map[int]*inRing{}
	}
	s.rings[idx] = r
	return r, nil
}

// peerRing is the ring the peer named in its blobs (handles 1 and up), or ok false.
func peerRing(blobs [][]byte) (hostmem.Share, bool, error) {
	var sh hostmem.Share
	found := false
	for h := 1; h < len(blobs); h++ {
		d, err := decode(blobs[h])
		if err != nil || d.kind != regRaw || d.regSize == 0 {
			continue
		}
		r := hostmem.Share{Fd: int(d.fd), Ino: d.ino, Size: d.regSize, Offset: d.offset}
		if found && r != sh {
			return sh, false, status.Errorf(status.RemoteError, "the peer names two eager rings (handles 1 to %d)", h)
		}
		sh, found = r, true
	}
	return sh, found, nil
}

// mapRing maps the peer's ring (pid) after checking its header and returns it, or nil when the
// peer named none; out gets it unless eager puts are off here (the ring's sleeper count is
// used either way).
func (s *shm) mapRing(pid int, blobs [][]byte, out *C.shmOut) (*C.shmRingHdr, error) {
	sh, ok, err := peerRing(blobs)
	if err != nil || !ok {
		return nil, err
	}
	p, m, err := hostmem.MapRemote(pid, sh, C.SHM_RING_HDR) // the header first: it says how long the ring is
	if err != nil {
		return nil, err
	}
	s.mappings = append(s.mappings, m)
	hdr := (*C.shmRingHdr)(p)
	n, maxBytes := uint64(hdr.nslots), uint64(hdr.maxBytes)
	if hdr.magic != C.SHM_RING_MAGIC || n < 64 || n > 1<<24 || n&(n-1) != 0 ||
		maxBytes > C.SHM_EAGER_MAX || 4*uint64(C.shmEntrySlots(C.uint64_t(maxBytes))) > n {
		return nil, status.Errorf(status.RemoteError, "the peer's eager ring (at offset %d of %d bytes, %d slots, entries of up to %d bytes) is malformed", sh.Offset, sh.Size, n, maxBytes)
	}
	// the whole ring, checked against the memory mapped (which an earlier mapping of the same
	// region may have sized, not this blob's claim)
	if _, m, err = hostmem.MapRemote(pid, sh, C.SHM_RING_HDR+n*C.SHM_SLOT); err != nil {
		return nil, err
	}
	s.mappings = append(s.mappings, m)
	if s.eagerBytes() > 0 {
		out.hdr, out.slots, out.nslots = hdr, (*C.char)(unsafe.Add(p, C.SHM_RING_HDR)), C.uint32_t(n)
		out.maxBytes = C.uint32_t(min(maxBytes, s.eagerBytes()))
	}
	return hdr, nil
}

// newIn is the landing side of connection st.Idx's ring r, for the lander and the waits.
func (s *shm) newIn(st transport.Setup, r *inRing, local []engine.Reg) *C.shmIn {
	in := (*C.shmIn)(C.calloc(1, C.sizeof_shmIn))
	hdr := (*C.shmRingHdr)(r.ptr)
	in.hdr, in.slots = hdr, (*C.char)(unsafe.Add(r.ptr, C.SHM_RING_HDR))
	in.nslots, in.maxBytes = C.uint32_t(r.nslots), C.uint32_t(r.maxBytes)
	in.nLocal = C.int(len(local))
	in.local = (*C.engReg)(C.calloc(C.size_t(len(local)), C.sizeof_engReg))
	for i, l := range local {
		e := (*C.engReg)(unsafe.Add(unsafe.Pointer(in.local), i*C.sizeof_engReg))
		e.magic, e.mapped, e.addr, e.size, e.pid = C.ENG_REG_MAGIC, (*C.char)(l.Mapped), C.uint64_t(l.Addr), C.uint64_t(l.Size), C.int(l.Pid)
	}
	in.epoch = (*C.uint64_t)(unsafe.Add(s.h.Node.Epoch(s.h.LocalIdx, st.Idx), 8))
	in.sleepers = &hdr.sleepers
	in.comm = (*C.engComm)(s.h.Eng.Ptr())
	in.connId, in.peerRank, in.tag = C.int(st.Idx), C.int(st.Peer), C.int(st.Tag)
	return in
}

// wireRings gives conn its transport state (ring.h's shmConn) with its rings: the peer's to
// queue into, this rank's to land from (the lander thread starts with the first; waits land
// too: shmLandOps), and its sleeper counts: those of the rings where there are rings, else
// sleepers (this rank's, the peer's) in the node segment. It returns the eager threshold of
// puts to the peer (0: no ring to the peer).
func (s *shm) wireRings(st transport.Setup, conn *engine.Conn, local []engine.Reg, sleepers [2]unsafe.Pointer) (uint64, error) {
	sc := (*C.shmConn)(C.calloc(1, C.sizeof_shmConn))
	if s.conns == nil {
		s.conns = map[int]*C.shmConn{}
	}
	s.conns[st.Idx] = sc
	conn.SetTransport(unsafe.Pointer(sc))
	peer, err := s.mapRing(st.Pid, st.Blobs, &sc.out)
	if err != nil {
		return 0, err
	}
	if peer != nil {
		sleepers[1] = unsafe.Pointer(&peer.sleepers)
	}
	if r, ok := s.rings[st.Idx]; ok && !r.wired {
		sleepers[0] = unsafe.Pointer(&(*C.shmRingHdr)(r.ptr).sleepers)
		if s.lander == nil {
			if s.lander = C.shmLanderNew(); s.lander == nil {
				return 0, status.Errorf(status.SystemError, "cannot allocate the SHM lander")
			}
		}
		r.wired = true
		sc.in = s.newIn(st, r, local)
		if rc := C.shmLanderAdd(s.lander, sc.in); rc != 0 {
			return 0, status.Errorf(status.SystemError, "cannot start the SHM lander thread (errno %d)", int(rc))
		}
		conn.SetOps(C.shmLandOpsPtr())
	}
	conn.SetSleepers(sleepers[0], sleepers[1])
	return uint64(sc.out.maxBytes), nil
}

// closeRings stops the lander (landing what is left) and frees every ring and connection state.
func (s *shm) closeRings() {
	C.shmLanderFree(s.lander) // lands what is left, frees the shmIn of each ring
	s.lander = nil
	for _, r := range s.rings {
		C.shmRingClose((*C.shmRingHdr)(r.ptr)) // a sender that waits for room stops waiting
	}
	s.rings = nil
	if s.arena != nil {
		s.arena.mem.Free()
		s.arena = nil
	}
	for _, sc := range s.conns {
		C.free(unsafe.Pointer(sc))
	}
	s.conns = nil
}

// EagerRing is the peer's ring that connection idx queues into, mapped here, or nil. For tests.
func (s *shm) EagerRing(idx int) unsafe.Pointer {
	if sc, ok := s.conns[idx]; ok && sc.out.hdr != nil {
		return unsafe.Pointer(sc.out.hdr)
	}
	return nil
}

// EagerQueued is the number of ring slots connection idx has queued so far (0: no ring). For tests.
func (s *shm) EagerQueued(idx int) uint64 {
	if p := s.EagerRing(idx); p != nil {
		return uint64(C.shmQueued((*C.shmRingHdr)(p)))
	}
	return 0
}
