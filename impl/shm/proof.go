package shm

// The peer's process, as the kernel vouches for it. A put into a peer's malloc buffer is a
// process_vm_writev into the peer's pid, and a mscclppHostAlloc region or eager ring is mapped
// through /proc/PID/fd: a pid taken from the peer's message alone would let a peer that holds
// the communicator's key name any process of the same user (this one included) and an address
// in it. So each rank holds a proof of its rank: an empty memfd whose name says which
// communicator (its node segment's name) and which rank, made by that rank, in its own process;
// every SHM registration names the descriptor it lies at. The importing rank asks the kernel
// (readlink of /proc/PID/fd/N) whether the claimed process holds that proof at that number, for
// the rank the connection is with. No process can give another one a descriptor it did not
// accept (this library accepts none; a peer's memory it opens to map it is closed at once, and
// never while a proof is checked: hostmem.FdLink), and no rank makes another rank's proof, so
// only the process of that rank passes: this very process only when the peer lives in it. Only
// that pid is written to or mapped from. The check is a system call on this side, no round trip to the
// peer (a socket handshake per connection cost an all-to-all setup of 64 ranks 4 times its time).

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// proofName is the name of rank's proof in the communicator of node segment seg.
func proofName(seg string, rank int) string { return fmt.Sprintf("mscclpp-proof.%s.r%d", seg, rank) }

// proofFd makes this rank's proof if it has not, and returns its descriptor.
func (s *shm) proofFd() (int, error) {
	if !s.hasProof {
		fd, err := unix.MemfdCreate(proofName(s.h.Node.Name(), s.h.Rank), unix.MFD_CLOEXEC)
		if err != nil {
			return 0, status.Errorf(status.SystemError, "SHM transport: memfd_create for this rank's proof: %v", err)
		}
		s.proof, s.hasProof = fd, true
	}
	return s.proof, nil
}

// provenPid checks that process claimed holds rank peer's proof at descriptor fd, and returns
// it; every failure is a RemoteError.
func (s *shm) provenPid(peer, claimed int, fd uint64) (int, error) {
	want := "/memfd:" + proofName(s.h.Node.Name(), peer) + " (deleted)"
	var got string
	var err error
	if claimed > 0 && fd < 1<<31 {
		got, err = hostmem.FdLink(claimed, fd)
	} else {
		err = fmt.Errorf("no such process or descriptor")
	}
	if err == nil && got == want {
		return claimed, nil
	}
	why := fmt.Sprintf("its descriptor %d is %q", fd, got)
	if err != nil {
		why = err.Error()
	}
	if claimed == os.Getpid() {
		return 0, status.Errorf(status.RemoteError, "the peer claims pid %d, this process, which holds no proof of rank %d (%s): refused", claimed, peer, why)
	}
	return 0, status.Errorf(status.RemoteError, "the peer claims pid %d, which holds no proof of rank %d (%s): refused", claimed, peer, why)
}

// closeProof closes this rank's proof: peers that set up after it fail.
func (s *shm) closeProof() {
	if s.hasProof {
		_ = unix.Close(s.proof)
		s.hasProof = false
	}
}
