package bootstrap

// What the Go net package works out once per process before its first
// listener (whether IPv6 and IPv4-mapped addresses work: three probe
// sockets; the listen backlog: /proc/sys/net/core/somaxconn; the netpoller's
// epoll instance), done ahead of the first communicator by Warm.

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// ListenTCP listens at ap (the bootstrap's listeners, the Ethernet transport's
// data port). Listeners are plain TCP: Go would make them Multipath TCP (and
// probe the kernel for it first), which none of the library's connections
// (plain TCP dials) use, and whose accepted plain-TCP connections carry
// socket settings of their own (SO_RCVLOWAT 0). Without keepAlive, accepted
// connections get no TCP keep-alive (Go's default sets it with four
// setsockopt calls per connection): the root's, which last only while a
// communicator forms, within the bootstrap timeout.
func ListenTCP(ap netip.AddrPort, keepAlive bool) (*net.TCPListener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	if !keepAlive {
		lc.KeepAlive = -1
	}
	ln, err := lc.Listen(context.Background(), "tcp", net.TCPAddrFromAddrPort(ap).String())
	if err != nil {
		return nil, err
	}
	return ln.(*net.TCPListener), nil
}

// Warm does now what the first mscclppCommInitRank of a process would pay
// for on top of its real work: the net package's once-per-process probes,
// and the first run of the code of a handshake (the pages of this library
// that hold it, the Go runtime's first allocations and threads, the first
// random numbers). It opens a loopback listener, connects to it and
// exchanges a challenge and a hello under a throwaway key, then closes
// both; at most warmTimeout. It changes nothing a communicator sees; errors
// (a machine without IPv4 loopback) are ignored: the first communicator
// then does the work as before.
func Warm() {
	ln, err := ListenTCP(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0), true)
	if err != nil {
		return
	}
	defer ln.Close()
	deadline := time.Now().Add(warmTimeout)
	ln.SetDeadline(deadline)
	var key [keyBytes]byte
	const magic = 0x7761726d // "warm"
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		c, err := ln.AcceptTCP()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		if challenge, err := writeChallenge(c); err == nil {
			_, _ = readHello(c, magic, &key, &challenge)
		}
	}()
	defer func() { <-accepted }()
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		return
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	tc.SetNoDelay(true)
	tc.SetDeadline(deadline)
	if challenge, err := readChallenge(tc); err == nil {
		h := hello{kind: kindRing, magic: magic, nonce: newNonce()}
		_, _ = tc.Write(h.encode(&key, &challenge))
	}
	_ = randomNonce()
}

// warmTimeout bounds Warm.
const warmTimeout = 2 * time.Second
