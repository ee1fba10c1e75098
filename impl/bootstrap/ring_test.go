package bootstrap

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// A rank of a one-host, ring-only communicator that is gone before the first
// collective: the ring, connected at that collective, fails on every other rank at
// once, not after the timeout, and the dead rank's predecessor names it. The dead
// rank's successor enters first and waits for it with its own connection to rank 0
// made: it learns of the failure only as rank 0 fails and closes that connection.
func TestLazyRingRankClosed(t *testing.T) {
	const n, dead = 3, 1
	addr := loopbackAddr(t)
	bs := form(t, n, func(r int) (*Bootstrap, error) {
		return InitAddr(addr, r, n, Options{HostID: "h", RingOnlyOnOneHost: true, Timeout: 30 * time.Second})
	})
	bs[dead].Close()
	start := time.Now()
	errs := make([]error, n)
	waiter := make(chan struct{})
	go func() {
		defer close(waiter)
		errs[dead+1] = bs[dead+1].Barrier()
	}()
	for accepted := false; !accepted; { // rank 0 took rank 2's ring connection
		bs[0].boxMu.Lock()
		accepted = bs[0].ringIn
		bs[0].boxMu.Unlock()
		if time.Since(start) > 10*time.Second {
			t.Fatal("rank 2 did not connect to rank 0")
		}
		time.Sleep(time.Millisecond)
	}
	early := each(bs[:dead], func(b *Bootstrap) error { return b.Barrier() })
	copy(errs, early)
	<-waiter
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("survivors noticed after %v", d)
	}
	for r, err := range errs {
		switch r {
		case dead:
		case dead - 1:
			wantCode(t, err, status.RemoteError, "rank 1")
		default:
			wantCode(t, err, status.RemoteError)
		}
	}
	// The failure sticks.
	wantCode(t, bs[0].Barrier(), status.RemoteError)
}

// The ring connects once, at the first collective, and serves every later one (the
// allgathers of TestRingOnlyOnOneHost check the data); a lone rank's collective, with
// no ring at all, returns at once.
func TestLazyRingConnectsOnce(t *testing.T) {
	const n = 3
	addr := loopbackAddr(t)
	bs := form(t, n, func(r int) (*Bootstrap, error) {
		return InitAddr(addr, r, n, Options{HostID: "h", RingOnlyOnOneHost: true})
	})
	noErrs(t, "first barrier", each(bs, func(b *Bootstrap) error { return b.Barrier() }))
	first := make([]*ringConn, n)
	for r, b := range bs {
		if b.next == nil || b.prev == nil {
			t.Fatalf("rank %d: no ring after the first collective", r)
		}
		first[r] = b.next
	}
	checkAllGather(t, bs, 8, 3)
	for r, b := range bs {
		if b.next != first[r] {
			t.Fatalf("rank %d: the ring connected again", r)
		}
	}
	one, err := InitAddr(loopbackAddr(t), 0, 1, Options{HostID: "h", RingOnlyOnOneHost: true})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if err := one.Barrier(); err != nil {
		t.Fatal(err)
	}
}

// tcpPair is a connected pair of TCP sockets over 127.0.0.1, closed when t ends: the dialling
// end, then the accepted one.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// watchClosed reports a connection its other side closed, and one it stopped watching
// is as it was: the next bytes the other side sends arrive intact.
func TestWatchClosed(t *testing.T) {
	c, s := tcpPair(t)
	gone, stop := watchClosed(c)
	s.Close()
	select {
	case err := <-gone:
		if err == nil {
			t.Fatal("nil error for a closed connection")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a closed connection was not reported")
	}
	stop()

	c, s = tcpPair(t)
	gone, stop = watchClosed(c)
	stop()
	select {
	case err := <-gone:
		t.Fatalf("reported %v for a connection that is open", err)
	default:
	}
	if _, err := s.Write([]byte("ring")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4)
	if _, err := c.Read(buf); err != nil || string(buf) != "ring" {
		t.Fatalf("after the watch: %q, %v", buf, err)
	}
}

// Before the first collective of a one-host, ring-only communicator its ranks listen
// for a ring connection that has not come yet: strangers offering one there (another
// key, a rank that is not the predecessor, garbage) are refused, and the ring the
// first collective connects carries the data.
func TestLazyRingStrangers(t *testing.T) {
	logs := newLogSink()
	addr := loopbackAddr(t)
	bs := form(t, 3, func(r int) (*Bootstrap, error) {
		return InitAddr(addr, r, 3, Options{HostID: "h", RingOnlyOnOneHost: true, Timeout: 10 * time.Second, Logf: logs.logf})
	})
	b := bs[1]
	var wrong [keyBytes]byte
	la := b.ListenAddr()
	send := func(key *[keyBytes]byte, rank int) {
		c, ch := dialChallenge(t, la)
		c.Write(rawHello(kindRing, b.magic, key, &ch, rank, 3, nil))
	}
	poke(t, la, bytes.Repeat([]byte("GET / HTTP/1.0\r\n"), 8), false)
	send(&wrong, 0)
	send(&b.key, 2) // not the predecessor
	for _, want := range []string{"garbage", "did not prove the key", "ring predecessor is rank 0"} {
		logs.waitFor(t, want)
	}
	checkAllGather(t, bs, 4, 2)
	checkAllGather(t, bs, 1000, 2)
}
