// Package shm is the SHM transport of host mode between ranks of one node:
// signal slots in the node segment, puts as a memcpy into a peer's
// mscclppHostAlloc region mapped here, else process_vm_writev.
package shm

/*
#cgo CFLAGS: -O2 -Wall
#include "shm.h"
#include "ring.h"
static const void* shmOpsPtr(void) { return &shmOps; }
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// ID is mscclppTransportSHM.
const ID transport.ID = 1

// Entry registers the transport; it reads the eager threshold (ring.go).
var Entry = transport.Entry{ID: ID, Name: "SHM", Subsys: logx.SHM, New: newSHM, Settings: []string{EnvEagerBytes}}

// How a registration reaches the peer.
const (
	regSignal    = 1 // the signal slot in the node segment: (local index, connection index)
	regHostAlloc = 2 // an mscclppHostAlloc region the peer maps through /proc/pid/fd
	regRaw       = 3 // any memory: the peer writes it with process_vm_writev
)

// desc is one registration on the wire: eight little-endian words.
type desc struct {
	kind, addr, size, fd, ino, regSize uint64
	offset                             uint64 // regHostAlloc: offset in the region; regSignal: local index << 32 | conn index
	// regRaw: fd, ino and regSize name the arena of the connection's eager ring (ring.go), offset
	// the ring in it; regSize 0: no ring
	reserved uint64 // 0 (the owner's process is proven otherwise: proof.go)
}

const descBytes = 8 * 8

func (d desc) encode() []byte {
	out := make([]byte, 0, descBytes)
	for _, w := range [8]uint64{d.kind, d.addr, d.size, d.fd, d.ino, d.regSize, d.offset, d.reserved} {
		out = binary.LittleEndian.AppendUint64(out, w)
	}
	return out
}

func decode(b []byte) (desc, error) {
	if len(b) != descBytes {
		return desc{}, status.Errorf(status.RemoteError, "malformed SHM registration (%d bytes, want %d)", len(b), descBytes)
	}
	w := func(i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }
	return desc{kind: w(0), addr: w(1), size: w(2), fd: w(3), ino: w(4), regSize: w(5), offset: w(6), reserved: w(7)}, nil
}

type shm struct {
	transport.Defaults
	h        *transport.Host
	ctx      *engine.Ctx
	mappings []hostmem.Mapping    // peers' mscclppHostAlloc regions and eager rings mapped here
	rings    map[int]*inRing      // this rank's eager rings, by connection
	arena    *arena               // where they lie, or nil
	lander   *C.shmLander         // lands what peers queue in them, or nil
	conns    map[int]*C.shmConn   // connections' transport states (ring.h), by connection
	peers    map[int]int          // each connection's peer rank, by connection
	proof    *net.UnixListener    // this rank's proof of its rank (proof.go), or nil
	procs    map[int]sysinfo.Proc // the peers' proven processes, by rank
	eager    uint64               // puts of up to this many bytes into memory the peer cannot map go through an eager ring (ring.go)
}

func newSHM(h *transport.Host) (transport.Transport, error) {
	return &shm{h: h, eager: eagerSetting(h.Setting(EnvEagerBytes))}, nil
}

// Declare serves a peer on this node: the connection's signal slot is in the node segment,
// its triggers served by the communicator's one SHM context.
func (s *shm) Declare(d transport.Decl) (transport.Endpoint, error) {
	if !s.h.OnMyNode(d.Peer) {
		return transport.Endpoint{}, status.Errorf(status.InvalidUsage, "SHM transport to rank %d: that rank is on another host (%s, this one is %s)", d.Peer, logx.PeerText(s.h.HostIDs[d.Peer]), logx.PeerText(s.h.HostIDs[s.h.Rank]))
	}
	if s.ctx == nil {
		x, err := engine.NewCtxOps(s.h.Eng, C.shmOpsPtr(), nil)
		if err != nil {
			return transport.Endpoint{}, err
		}
		s.ctx = x
	}
	if s.peers == nil {
		s.peers = map[int]int{}
	}
	s.peers[d.Idx] = d.Peer
	return s.h.HostSlot(d.Idx, d.Peer, d.Tag, d.Local, s.ctx), nil
}

func (s *shm) Describe(idx, h int, b transport.Buffer) ([]byte, error) {
	if err := s.proveRank(); err != nil {
		return nil, err
	}
	d := desc{kind: regRaw, addr: uint64(uintptr(b.Ptr)), size: b.Size}
	if sh, ok := hostmem.Lookup(b.Ptr, b.Size); ok {
		d.kind, d.fd, d.ino, d.regSize, d.offset = regHostAlloc, uint64(sh.Fd), sh.Ino, sh.Size, sh.Offset
	} else if h > 0 {
		// memory the peer cannot map: small puts into it go through this connection's eager ring
		ring, err := s.ringFor(idx)
		if err != nil {
			return nil, err
		}
		if ring != nil {
			sh := s.arena.mem.Share
			d.fd, d.ino, d.regSize, d.offset = uint64(sh.Fd), sh.Ino, sh.Size, ring.off
		}
	}
	if h == 0 {
		d.kind, d.offset = regSignal, uint64(s.h.LocalIdx)<<32|uint64(idx)
	}
	return d.encode(), nil
}

// signalSlot is the (local index, connection index) of a signal registration, range-checked.
func (s *shm) signalSlot(d desc) (int, int, error) {
	local, conn := int(d.offset>>32), int(d.offset&0xffffffff)
	if local >= len(s.h.LocalOf) || conn >= engine.MaxConns {
		return 0, 0, status.Errorf(status.RemoteError, "signal slot (%d, %d) out of range", local, conn)
	}
	return local, conn, nil
}

// importReg imports one of the peer's registrations; p is the peer's process, as proven (provenPid).
func (s *shm) importReg(p sysinfo.Proc, blob []byte) (engine.Reg, error) {
	d, err := decode(blob)
	if err != nil {
		return engine.Reg{}, err
	}
	pid := p.Pid
	r := engine.Reg{Addr: d.addr, Size: d.size, Pid: pid, Pidfd: p.Fd}
	switch d.kind {
	case regSignal:
		local, conn, err := s.signalSlot(d)
		if err != nil {
			return r, err
		}
		r.Mapped = s.h.Node.Epoch(local, conn)
	case regHostAlloc:
		mp, m, err := hostmem.MapRemote(pid, hostmem.Share{Fd: int(d.fd), Ino: d.ino, Size: d.regSize, Offset: d.offset}, d.size)
		if err != nil {
			return r, err
		}
		s.mappings = append(s.mappings, m)
		if p.Exited() { // the pid may name another process now: what was mapped is not the peer's
			return r, status.Errorf(status.RemoteError, "the peer process %d exited (peer gone) while its memory was mapped", pid)
		}
		r.Mapped = mp
	case regRaw:
	default:
		return r, status.Errorf(status.RemoteError, "unknown SHM registration kind %d", d.kind)
	}
	return r, nil
}

// Finish maps the peer's registrations and wires the connection; waits on it sleep on a futex
// that the peer's signals wake: both epoch slots are in the node segment.
func (s *shm) Finish(st transport.Setup) (transport.Connected, error) {
	d, err := decode(st.Blobs[0])
	if err != nil {
		return transport.Connected{}, err
	}
	if st.Pid, err = s.provenPid(st.Peer, st.Pid); err != nil { // what the rest (rings, Wire) uses
		return transport.Connected{}, err
	}
	proc := s.peerProc(st.Peer)
	remote, err := transport.ImportAll(st, func(_ int, blob []byte) (engine.Reg, error) { return s.importReg(proc, blob) })
	if err != nil {
		return transport.Connected{}, err
	}
	if d.kind != regSignal {
		return transport.Connected{}, status.Errorf(status.RemoteError, "the peer's handle 0 is not a signal slot")
	}
	local, peerConn, err := s.signalSlot(d)
	if err != nil {
		return transport.Connected{}, err
	}
	localRegs := transport.LocalRegs(st, localReg)
	conn := s.h.Wire(st, localRegs, remote, remote[0].Mapped)
	conn.SetPeerPidfd(proc.Fd)
	sleepers := [2]unsafe.Pointer{s.h.Node.Sleepers(s.h.LocalIdx, st.Idx), s.h.Node.Sleepers(local, peerConn)}
	conn.SetSleepers(sleepers[0], sleepers[1])
	out := transport.Connected{Eng: conn, RemoteEpoch: remote[0].Mapped, Path: putPath(remote)}
	eager, err := s.wireRings(st, conn, localRegs, sleepers)
	if err != nil {
		return out, err
	}
	if eager > 0 {
		out.Path = fmt.Sprintf("puts of up to %d bytes into buffers the peer could not share (malloc) through an eager ring in shared memory, landed by the peer; else %s", eager, out.Path)
	}
	if len(remote) > 1 {
		out.RemoteBuff = remote[1].Mapped
	}
	return out, nil
}

// localReg: this rank's memory, addressed directly.
func localReg(b transport.Buffer) engine.Reg {
	return engine.Reg{Mapped: b.Ptr, Addr: uint64(uintptr(b.Ptr)), Size: b.Size, Pid: os.Getpid()}
}

func putPath(remote []engine.Reg) string {
	switch {
	case len(remote) < 2:
		return "signals only (the peer registered no buffer)"
	case remote[1].Mapped != nil:
		return "memcpy into the peer's mscclppHostAlloc buffer, mapped here"
	default:
		return "process_vm_writev into the peer's buffer (allocate it with mscclppHostAlloc for single-copy memcpy)"
	}
}

// ImportRegistered maps a peer's buffer of mscclppRegisterBuffer where it can (mscclppHostAlloc).
func (s *shm) ImportRegistered(idx, claimed int, blob []byte) (engine.Reg, unsafe.Pointer, error) {
	if _, err := s.provenPid(s.peers[idx], claimed); err != nil {
		return engine.Reg{}, nil, err
	}
	r, err := s.importReg(s.peerProc(s.peers[idx]), blob)
	if err != nil {
		return engine.Reg{}, nil, err
	}
	return r, r.Mapped, nil
}

func (s *shm) Write(_ int, rec engine.RegRecord, off uint64, src unsafe.Pointer, size uint64, _ uintptr) error {
	return rec.Write(s.h.Eng, off, src, size)
}

func (s *shm) Close() error {
	s.closeProof()
	s.closeRings()
	if s.ctx != nil {
		s.ctx.Free()
		s.ctx = nil
	}
	for _, m := range s.mappings {
		hostmem.Release(m)
	}
	s.mappings = nil
	return nil
}
