package bootstrap

// Rank 0 of InitAddr and the root its process started: the rank registers
// through an in-memory pipe instead of a TCP connection to its own process.

import (
	"net"
	"net/netip"
)

// acceptLocal serves the rank of this process (rank 0 of InitAddr, which started the
// root) on an in-memory pipe instead of a TCP connection: the same handshake (challenge,
// hello, table, status, verdict) over the same code, without the sockets, the accept
// and the netpoller's wake-ups on both sides. It returns the rank's end, or nil when the
// root already finished.
func (r *root) acceptLocal() net.Conn {
	mine, theirs := net.Pipe()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		mine.Close()
		theirs.Close()
		return nil
	}
	r.conns[theirs] = struct{}{}
	r.wg.Add(1) // under mu: before finish marks the root closed, so before run's wg.Wait
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		ch, err := challenge(theirs, r.hsTimeout) // a pipe's write waits for the rank to read
		r.handshake(theirs, ch, err)
	}()
	return mine
}

// localSource is the address a TCP connection from this host to its own address a
// leaves from: a itself (the kernel's route to a local address prefers it), or for
// an unspecified address (which reaches this host) its family's loopback.
func localSource(a netip.Addr) netip.Addr {
	a = a.Unmap()
	switch {
	case !a.IsUnspecified():
		return a
	case a.Is4():
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	return netip.IPv6Loopback()
}
