package shm

// The peer's process, as the kernel vouches for it. A put into a peer's malloc buffer is a
// process_vm_writev into the peer's pid, and a mscclppHostAlloc region or eager ring is mapped
// through /proc/PID/fd: a pid taken from the peer's message would let a peer that holds the
// communicator's key name any process of the same user (this one included) and an address in
// it. So every SHM registration names the socket of its owner's proof server (peercred), and
// the importing rank asks that server: the kernel says which process listens there
// (SO_PEERCRED), and the server confirms that it is the rank the connection is with and that
// it described exactly these registrations for this rank and tag. Only that pid is written
// to or mapped from, and only in the ranges so confirmed.

import (
	"encoding/binary"
	"os"

	"github.com/mscclpp-go/mscclpp/impl/peercred"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// A proof request: the asking rank, the rank it believes it talks to, the connection's tag, then
// the registrations (as the peer's blobs). The answer: one byte, proofOK or a refusal.
const (
	proofOK      = 1
	proofNotRank = 2 // the server is another rank
	proofUnknown = 3 // a registration the server did not describe for the asker
)

type proofKey struct{ peer, tag int }

// proofID starts this rank's proof server if it has not started, and returns its socket's id.
func (s *shm) proofID() (uint64, error) {
	if s.proof == nil {
		srv, err := peercred.Listen(s.answerProof, s.h.Timeout)
		if err != nil {
			return 0, status.Errorf(status.SystemError, "SHM transport: %v", err)
		}
		s.proof = srv
	}
	return s.proof.ID(), nil
}

// described records blob as one that connection idx's peer may ask about.
func (s *shm) described(idx int, blob []byte) {
	d, ok := s.decls[idx]
	if !ok {
		return
	}
	s.proofMu.Lock()
	defer s.proofMu.Unlock()
	if s.blobs == nil {
		s.blobs = map[proofKey]map[string]struct{}{}
	}
	set := s.blobs[d]
	if set == nil {
		set = map[string]struct{}{}
		s.blobs[d] = set
	}
	set[string(blob)] = struct{}{}
}

// answerProof is the proof server's answer to req (from any process: it confirms, never tells).
func (s *shm) answerProof(req []byte) []byte {
	le := binary.LittleEndian
	if len(req) < 28 {
		return nil
	}
	asker, claimed, tag, n := int(int64(le.Uint64(req))), int(int64(le.Uint64(req[8:]))), int(int64(le.Uint64(req[16:]))), le.Uint32(req[24:])
	if claimed != s.h.Rank {
		return []byte{proofNotRank}
	}
	rest := req[28:]
	s.proofMu.Lock()
	defer s.proofMu.Unlock()
	set := s.blobs[proofKey{asker, tag}]
	for i := uint32(0); i < n; i++ {
		if len(rest) < 4 || uint64(le.Uint32(rest)) > uint64(len(rest)-4) {
			return nil
		}
		l := le.Uint32(rest)
		if _, ok := set[string(rest[4:4+l])]; !ok {
			return []byte{proofUnknown}
		}
		rest = rest[4+l:]
	}
	return []byte{proofOK}
}

// provenPid asks the proof server named in blobs[0] whether it is rank peer, which claims pid,
// and whether it described blobs for this rank over connection tag; it returns the pid the
// kernel reports for that server. Every failure is a RemoteError.
func (s *shm) provenPid(peer, tag, claimed int, blobs [][]byte) (int, error) {
	d, err := decode(blobs[0])
	if err != nil {
		return 0, err
	}
	le := binary.LittleEndian
	req := make([]byte, 0, 28+len(blobs)*(4+descBytes))
	req = le.AppendUint64(req, uint64(s.h.Rank))
	req = le.AppendUint64(req, uint64(peer))
	req = le.AppendUint64(req, uint64(tag))
	req = le.AppendUint32(req, uint32(len(blobs)))
	for _, b := range blobs {
		req = le.AppendUint32(req, uint32(len(b)))
		req = append(req, b...)
	}
	pid, reply, err := peercred.Ask(d.proof, req, 1, s.h.Timeout)
	refuse := func(format string, args ...any) (int, error) {
		return 0, status.Errorf(status.RemoteError, format, args...)
	}
	switch {
	case err != nil:
		return refuse("cannot prove the peer's process (pid %d claimed): %v", claimed, err)
	case pid <= 0:
		return refuse("the peer's process (pid %d claimed) is not visible from this process's pid namespace", claimed)
	case len(reply) == 1 && reply[0] == proofNotRank:
		return refuse("the proof socket the peer named belongs to another rank (pid %d), not to rank %d: refused", pid, peer)
	case claimed != pid && claimed == os.Getpid():
		return refuse("the peer claims pid %d, this process, but the kernel says it is pid %d: refused", claimed, pid)
	case claimed != pid:
		return refuse("the peer claims pid %d, but the kernel says it is pid %d: refused", claimed, pid)
	case len(reply) == 1 && reply[0] == proofUnknown:
		return refuse("the peer's process (pid %d) did not describe these registrations for rank %d tag %d: refused", pid, s.h.Rank, tag)
	case len(reply) != 1 || reply[0] != proofOK:
		return refuse("the peer's process (pid %d) refused its registrations (answer %x)", pid, reply)
	}
	return pid, nil
}

// Confirm makes this rank's proof server confirm blob for connection idx as if Describe had
// made it: for tests, whose forged peers confirm what they forge (as a peer that lies in its
// own process would).
func (s *shm) Confirm(idx int, blob []byte) { s.described(idx, blob) }

// closeProof stops the proof server.
func (s *shm) closeProof() {
	if s.proof != nil {
		s.proof.Close()
		s.proof = nil
	}
	s.proofMu.Lock()
	s.blobs = nil
	s.proofMu.Unlock()
}
