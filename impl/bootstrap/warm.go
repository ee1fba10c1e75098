package bootstrap

// What the Go net package works out once per process before its first
// listener (whether IPv6 and IPv4-mapped addresses work: three probe
// sockets; the listen backlog: /proc/sys/net/core/somaxconn; the netpoller's
// epoll instance), done ahead of the first communicator by Warm.

import (
	"context"
	"net"
	"net/netip"
)

// listenTCP listens at ap. Listeners are plain TCP: Go would make them
// Multipath TCP (and probe the kernel for it first), which none of the
// library's connections (plain TCP dials) use.
func listenTCP(ap netip.AddrPort) (*net.TCPListener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", net.TCPAddrFromAddrPort(ap).String())
	if err != nil {
		return nil, err
	}
	return ln.(*net.TCPListener), nil
}

// Warm makes the net package do its once-per-process work now (by opening
// and closing a loopback listener), so that the first mscclppCommInitRank
// does not wait for it. It changes nothing a communicator sees; errors (a
// machine without IPv4 loopback) are ignored: the first listener then does
// the work as before.
func Warm() {
	if ln, err := listenTCP(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0)); err == nil {
		ln.Close()
	}
}
