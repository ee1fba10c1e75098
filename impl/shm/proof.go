package shm

// The peer's process, as the kernel vouches for it. A put into a peer's malloc buffer is a
// process_vm_writev into the peer's pid, and a mscclppHostAlloc region or eager ring is mapped
// through /proc/PID/fd: a pid taken from the peer's message alone would let a peer that holds
// the communicator's key name any process of the same user (this one included) and an address
// in it. So each rank proves its rank with a unix socket it listens on, in the abstract
// namespace, under a name that says which communicator instance (bootstrap InstanceID, which
// binds a fresh token of every rank's, so no other communicator, formed by whatever root,
// has it) and which rank. The importing rank connects to the name of the rank the connection
// is with and asks the kernel who listens there (SO_PEERPIDFD: the process that called listen,
// whoever holds the socket since, a forked child or a process it was sent to, and a pidfd
// that no later process with the same pid can pass for); only that process is written to or
// mapped from, and a wait or a put finds it gone once that very process has exited. The check is
// one connect on this side, once per peer, with no round trip to the peer's threads (the peer
// accepts and closes in the background).

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

// proofName is the abstract socket name of rank's proof in communicator instance inst.
func proofName(inst string, rank int) string {
	return fmt.Sprintf("@mscclpp-proof.%s.r%d", inst, rank)
}

// proveRank listens on this rank's proof if it does not yet, accepting (and closing at once)
// every connection in the background.
func (s *shm) proveRank() error {
	if s.proof != nil {
		return nil
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: proofName(s.h.Instance, s.h.Rank), Net: "unix"})
	if err != nil {
		return status.Errorf(status.SystemError, "SHM transport: listen on this rank's proof: %v", err)
	}
	s.proof = ln
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return // closed (closeProof)
			}
			c.Close()
		}
	}()
	return nil
}

// provenPid checks that process claimed is the one that proves rank peer's rank, and returns
// it; every failure is a RemoteError. The process is kept (peerProc) for the life of the transport.
func (s *shm) provenPid(peer, claimed int) (int, error) {
	if p, ok := s.procs[peer]; ok && p.Pid == claimed {
		return claimed, nil
	}
	p, err := proverOf(proofName(s.h.Instance, peer))
	if err == nil && p.Pid == claimed {
		if old, ok := s.procs[peer]; ok {
			old.Close()
		}
		if s.procs == nil {
			s.procs = map[int]sysinfo.Proc{}
		}
		s.procs[peer] = p
		return claimed, nil
	}
	why := ""
	if err != nil {
		why = err.Error()
	} else {
		why = fmt.Sprintf("pid %d proves it", p.Pid)
		p.Close()
	}
	if claimed == os.Getpid() {
		return 0, status.Errorf(status.RemoteError, "the peer claims pid %d, this process, which holds no proof of rank %d (%s): refused", claimed, peer, why)
	}
	return 0, status.Errorf(status.RemoteError, "the peer claims pid %d, which holds no proof of rank %d (%s): refused", claimed, peer, why)
}

// proverOf is the process that listens on proof name.
func proverOf(name string) (sysinfo.Proc, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return sysinfo.Proc{}, err
	}
	defer unix.Close(fd)
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: name})
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return sysinfo.Proc{}, fmt.Errorf("no process proves it: %w", err)
	}
	return sysinfo.PeerProc(fd)
}

// peerProc is the proven process of rank peer (zero if none).
func (s *shm) peerProc(peer int) sysinfo.Proc { return s.procs[peer] }

// closeProof stops proving this rank's rank (peers that set up after it fail) and closes the
// peers' pidfds.
func (s *shm) closeProof() {
	if s.proof != nil {
		_ = s.proof.Close()
		s.proof = nil
	}
	for _, p := range s.procs {
		p.Close()
	}
	s.procs = nil
}
