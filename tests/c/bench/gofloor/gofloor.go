// Command gofloor is a benchmark reference, built with -buildmode=c-shared
// into libgofloor.so for boot_gofloor.c: boot_tcp.c's init (the C ring's
// exchange: every rank listens, registers its port with rank 0, gets the
// table and connects the ring) written in Go as cheaply as Go allows. It runs
// on the calling C thread, without goroutines, the net package or
// authentication; it blocks only in plain system calls. Its init time
// against the C ring's, measured in the same run, is what the Go runtime in
// every rank's process costs by itself (its threads, its monitor, a cgo
// call): the floor under any Go implementation of the bootstrap.
package main

// #include <stdint.h>
import "C"

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

// kept holds the ring's descriptors for the life of the process, as the C ring keeps its own.
var kept []int

//export gofloorWarm
func gofloorWarm() C.int { return 0 }

// gofloorInit forms the ring of n ranks whose rank 0 listens at addr (ip:port); ranks
// listen at nodeIP (an IPv4 address). 0 on success, else the step that failed.
//
//export gofloorInit
func gofloorInit(n, rank C.int, addr, nodeIP *C.char) C.int {
	root, err := netip.ParseAddrPort(C.GoString(addr))
	mine, err2 := netip.ParseAddr(C.GoString(nodeIP))
	if err != nil || err2 != nil || !root.Addr().Is4() || !mine.Is4() {
		return 1
	}
	ln, port := listen(mine.As4(), 0)
	if ln < 0 {
		return 2
	}
	defer unix.Close(ln)
	// the table: rank r's listener at ip[r]:port[r], one message
	table := make([]byte, 8*int(n))
	entry := func(r int) []byte { return table[8*r : 8*r+8] }
	ip := mine.As4()
	copy(entry(int(rank)), ip[:])
	binary.LittleEndian.PutUint32(entry(int(rank))[4:], uint32(port))
	if rank == 0 {
		rl, _ := listen(root.Addr().As4(), int(root.Port()))
		if rl < 0 {
			return 3
		}
		conns := make([]int, n)
		for i := 1; i < int(n); i++ {
			c, _, e := unix.Accept4(rl, unix.SOCK_CLOEXEC)
			if e != nil {
				return 4
			}
			unix.SetsockoptInt(int(c), unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
			var m [12]byte
			if !readFull(int(c), m[:]) {
				return 5
			}
			r := int(binary.LittleEndian.Uint32(m[:]))
			if r < 1 || r >= int(n) {
				return 5
			}
			conns[r] = int(c)
			copy(entry(r), m[4:])
		}
		for i := 1; i < int(n); i++ {
			if _, err := unix.Write(conns[i], table); err != nil {
				return 6
			}
			unix.Close(conns[i])
		}
		unix.Close(rl)
	} else {
		c := dial(root.Addr().As4(), int(root.Port()))
		if c < 0 {
			return 7
		}
		var m [12]byte
		binary.LittleEndian.PutUint32(m[:], uint32(rank))
		copy(m[4:], entry(int(rank)))
		if _, err := unix.Write(c, m[:]); err != nil || !readFull(c, table) {
			return 8
		}
		unix.Close(c)
	}
	if n > 1 {
		next := entry((int(rank) + 1) % int(n))
		c := dial([4]byte(next[:4]), int(binary.LittleEndian.Uint32(next[4:])))
		p, _, e := unix.Accept4(ln, unix.SOCK_CLOEXEC)
		if c < 0 || e != nil {
			return 9
		}
		unix.SetsockoptInt(int(p), unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		kept = append(kept, c, int(p))
	}
	return 0
}

func listen(ip [4]byte, port int) (fd, bound int) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0
	}
	unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if unix.Bind(s, &unix.SockaddrInet4{Port: port, Addr: ip}) != nil || unix.Listen(s, 1024) != nil {
		unix.Close(s)
		return -1, 0
	}
	sa, err := unix.Getsockname(s)
	if err != nil {
		unix.Close(s)
		return -1, 0
	}
	return s, sa.(*unix.SockaddrInet4).Port
}

// dial connects to ip:port, retrying refused connections every 100 µs (as boot_tcp.c).
func dial(ip [4]byte, port int) int {
	for {
		s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1
		}
		err = unix.Connect(s, &unix.SockaddrInet4{Port: port, Addr: ip})
		if err == nil {
			unix.SetsockoptInt(s, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
			return s
		}
		unix.Close(s)
		if err != unix.ECONNREFUSED && err != unix.EINTR {
			return -1
		}
		sysinfo.Nap(100e3)
	}
}

func readFull(fd int, b []byte) bool {
	for len(b) > 0 {
		k, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil || k == 0 {
			return false
		}
		b = b[k:]
	}
	return true
}

func main() {}
