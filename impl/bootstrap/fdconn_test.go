package bootstrap

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
	"golang.org/x/sys/unix"
)

// fdPair returns a dialled fdConn and the listener side's end of it.
func fdPair(t *testing.T) (*fdConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := dialFD(ln.Addr().(*net.TCPAddr).AddrPort(), time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// Bytes go both ways; the local address is the one the peer sees; a peer that
// closes reads as io.EOF.
func TestFDConnData(t *testing.T) {
	c, s := fdPair(t)
	if got, want := c.LocalAddr().String(), s.RemoteAddr().String(); got != want {
		t.Fatalf("local address %s, the peer sees %s", got, want)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
	s.Write([]byte("world"))
	s.Close()
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "world" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want EOF", err)
	}
}

// A read past its deadline fails with os.ErrDeadlineExceeded (what isTimeout and
// so the rank's "no answer from the root" message look for), at about the deadline.
func TestFDConnReadDeadline(t *testing.T) {
	c, _ := fdPair(t)
	const d = 150 * time.Millisecond
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	_, err := c.Read(make([]byte, 1))
	took := time.Since(start)
	if !isTimeout(err) {
		t.Fatalf("read: %v, want a timeout", err)
	}
	if took < d-10*time.Millisecond || took > d+5*time.Second {
		t.Fatalf("timed out after %v, deadline %v", took, d)
	}
	// A deadline already past fails at once; a cleared one reads again.
	c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read past the deadline: %v", err)
	}
}

// Close from another goroutine ends a read blocked without a deadline.
func TestFDConnCloseWakesReader(t *testing.T) {
	c, _ := fdPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it block (it ends either way)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read blocked on the socket did not end when it was closed")
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
}

// A refused connection says so as net.Dial does, and neither that nor a
// closed connection leaves a socket open.
func TestFDConnRefusedNoLeak(t *testing.T) {
	dead, err := netip.ParseAddrPort(deadAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	before := sockets(t)
	for range 20 {
		_, err := dialFD(dead, time.Now().Add(5*time.Second))
		if err == nil || !isPeerGone(err) || !strings.Contains(err.Error(), "dial tcp "+dead.String()+": connect: connection refused") {
			t.Fatalf("dial of a dead address: %v", err)
		}
		c, s := fdPair(t)
		c.Close()
		s.Close()
	}
	for s := range sockets(t) {
		if !before[s] {
			t.Fatalf("%s open after the connections closed", s)
		}
	}
}

// With no ring formed at init, the root's verdict is read inline: a rank
// whose Joined waits, asking Failed, still learns at once that another
// rank failed (through the root), and its Init says why.
func TestJoinedWaiterSeesOtherRankFail(t *testing.T) {
	const n = 3
	opts := Options{HostID: "h", RingOnlyOnOneHost: true, Timeout: 60 * time.Second,
		Joined: func(b *Bootstrap) error {
			switch b.Rank() {
			case 1:
				return status.Errorf(status.SystemError, "rank 1 cannot map its node segment")
			case 2:
				for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
					if err := b.Failed(); err != nil {
						return err
					}
				}
				return errors.New("rank 2 waited 30 s: the failure of rank 1 did not reach it")
			}
			return nil
		}}
	addr := loopbackAddr(t)
	start := time.Now()
	errs, _ := initSome([]int{0, 1, 2}, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, n, opts) })
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("init took %v", d)
	}
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 1 cannot map its node segment") {
			t.Fatalf("rank %d: %v (does not say why)", r, err)
		}
	}
}

// awaitConnected, what a connect interrupted by a signal goes on with, sees a
// connection form, and gives up at the deadline.
func TestAwaitConnected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := awaitConnected(fd, time.Now().Add(-time.Second)); err != unix.EINPROGRESS {
		t.Fatalf("past the deadline: %v, want EINPROGRESS", err)
	}
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
	if err != nil && err != unix.EINPROGRESS {
		t.Fatal(err)
	}
	if err := awaitConnected(fd, time.Now().Add(10*time.Second)); err != nil {
		t.Fatalf("connecting to a listener: %v", err)
	}
}
