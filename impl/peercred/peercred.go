// Package peercred proves which process stands behind a same-host peer: a rank listens on an
// abstract Unix-domain socket of an unpredictable name, and a peer that connects to it learns
// the listener's pid from SO_PEERCRED, which the kernel recorded when the socket started to
// listen (no message can change it), then asks the listener to confirm what it claims.
package peercred

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MaxRequest bounds a request a Server reads (a larger one is dropped unanswered).
const MaxRequest = 1 << 22

// Server answers the requests of peers that connect to its socket, one per connection.
type Server struct {
	id      uint64
	ln      *net.UnixListener
	answer  func(req []byte) []byte
	timeout time.Duration

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func sockName(id uint64) string { return fmt.Sprintf("@mscclpp-peer-%016x", id) }

// Listen starts a Server whose answer to each request is answer(request); timeout bounds each
// connection's exchange.
func Listen(answer func(req []byte) []byte, timeout time.Duration) (*Server, error) {
	for try := 0; ; try++ {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("peer proof socket: %w", err)
		}
		id := binary.LittleEndian.Uint64(b[:])
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sockName(id), Net: "unix"})
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) && try < 8 {
				continue // taken (by chance, or by someone who saw it): another name
			}
			return nil, fmt.Errorf("peer proof socket: %w", err)
		}
		s := &Server{id: id, ln: ln, answer: answer, timeout: timeout, conns: map[net.Conn]struct{}{}}
		s.wg.Add(1)
		go s.accept()
		return s, nil
	}
}

// ID names the server's socket: what a peer passes to Ask.
func (s *Server) ID() uint64 { return s.id }

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.conns == nil {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	_ = c.SetDeadline(time.Now().Add(s.timeout))
	req, err := readFrame(c, MaxRequest)
	if err != nil {
		return
	}
	_ = writeFrame(c, s.answer(req))
}

// Close stops the server: its socket goes, exchanges in progress end, and no answer runs after
// it returns.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// Ask sends req to the server id and returns the pid of the process that made that server
// listen, as the kernel reports it, and the server's answer (at most maxReply bytes). Pid 0:
// that process is not visible from this process's pid namespace.
func Ask(id uint64, req []byte, maxReply int, timeout time.Duration) (int, []byte, error) {
	c, err := net.DialTimeout("unix", sockName(id), timeout)
	if err != nil {
		return 0, nil, fmt.Errorf("connect to the peer's proof socket: %w", err)
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, nil, fmt.Errorf("connect to the peer's proof socket: not a Unix socket")
	}
	pid, err := peerPid(uc)
	if err != nil {
		return 0, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if err := writeFrame(c, req); err != nil {
		return pid, nil, fmt.Errorf("ask the peer's proof socket: %w", err)
	}
	reply, err := readFrame(c, maxReply)
	if err != nil {
		return pid, nil, fmt.Errorf("the peer's proof socket did not answer: %w", err)
	}
	return pid, reply, nil
}

// peerPid is SO_PEERCRED's pid of c's other end.
func peerPid(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	if cerr != nil {
		return 0, fmt.Errorf("peer credentials: %w", cerr)
	}
	return int(cred.Pid), nil
}

func writeFrame(w io.Writer, b []byte) error {
	out := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(out, b...))
	return err
}

func readFrame(r io.Reader, max int) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("a frame of %d bytes (at most %d)", n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}
