package bootstrap

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// Wire formats. All integers are little endian.
//
// Every connection (to the root, ring, point-to-point) starts with a hello
// from the connecting side:
//
//	[0:4]   "MSCB"
//	[4]     wireVersion
//	[5]     kind (kindRegister, kindRing, kindStar, kindP2P, kindAck)
//	[6:8]   reserved
//	[8:16]  communicator magic
//	[16:48] secret
//	[48:52] sender rank
//	[52:56] nranks
//	[56:60] payload length (≤ maxHelloPayload)
//	[60:64] reserved
//
// The accepting side of a ring, star or point-to-point connection answers with a
// hello of kind kindAck carrying its own rank. A register hello's payload is
// the rank's listener address and host id (each a uint16 length + bytes).
//
// The root answers a register hello with a reply header
//
//	[0:4] "MSCR", [4] replyOK or replyError, [5:8] reserved,
//	[8:16] magic, [16:20] payload length
//
// followed by the table (uint32 count, then per rank its address and host id)
// or by an error text.
//
// Ring messages carry a ringHdrLen header (sequence number, payload size, op,
// step) in front of the payload; point-to-point messages a p2pHdrLen header
// (tag, payload size).
const (
	wireVersion     = 1
	helloLen        = 64
	maxHelloPayload = 4096
	replyHdrLen     = 20
	maxReplyPayload = 16 << 20
	ringHdrLen      = 24
	p2pHdrLen       = 16
	maxP2PMessage   = 1 << 36
	maxHostIDLen    = 1024

	kindRegister = 1
	kindRing     = 2
	kindP2P      = 3
	kindAck      = 4
	kindStar     = 5

	replyOK    = 0
	replyError = 1

	opAllGather = 1
	opBarrier   = 2
)

var (
	helloSig = [4]byte{'M', 'S', 'C', 'B'}
	replySig = [4]byte{'M', 'S', 'C', 'R'}
)

// hello is a decoded hello frame.
type hello struct {
	kind    byte
	magic   uint64
	secret  [secretBytes]byte
	rank    int
	nranks  int
	payload []byte
}

func (h *hello) encode() []byte {
	buf := make([]byte, helloLen+len(h.payload))
	copy(buf[0:4], helloSig[:])
	buf[4] = wireVersion
	buf[5] = h.kind
	binary.LittleEndian.PutUint64(buf[8:16], h.magic)
	copy(buf[16:48], h.secret[:])
	binary.LittleEndian.PutUint32(buf[48:52], uint32(int32(h.rank)))
	binary.LittleEndian.PutUint32(buf[52:56], uint32(int32(h.nranks)))
	binary.LittleEndian.PutUint32(buf[56:60], uint32(len(h.payload)))
	copy(buf[helloLen:], h.payload)
	return buf
}

// errStranger is the reason a connection was dropped before it proved to
// belong to this communicator.
type errStranger struct{ reason string }

func (e *errStranger) Error() string { return e.reason }

func stranger(format string, args ...any) error {
	return &errStranger{fmt.Sprintf(format, args...)}
}

// readHello reads a hello from c and checks that it belongs to the
// communicator (magic, secret). The caller sets the read deadline.
func readHello(c net.Conn, magic uint64, secret *[secretBytes]byte) (*hello, error) {
	var hdr [helloLen]byte
	if n, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, helloReadErr(n, err)
	}
	if [4]byte(hdr[0:4]) != helloSig {
		return nil, stranger("it sent garbage (%q) instead of an MSCCL++ bootstrap hello", printable(hdr[0:8]))
	}
	if hdr[4] != wireVersion {
		return nil, stranger("it speaks bootstrap protocol version %d, want %d", hdr[4], wireVersion)
	}
	h := &hello{
		kind:   hdr[5],
		magic:  binary.LittleEndian.Uint64(hdr[8:16]),
		rank:   int(int32(binary.LittleEndian.Uint32(hdr[48:52]))),
		nranks: int(int32(binary.LittleEndian.Uint32(hdr[52:56]))),
	}
	copy(h.secret[:], hdr[16:48])
	if h.magic != magic {
		return nil, stranger("it belongs to another communicator (magic %#x, want %#x)", h.magic, magic)
	}
	if subtle.ConstantTimeCompare(h.secret[:], secret[:]) != 1 {
		return nil, stranger("it presented a wrong secret for communicator %#x", magic)
	}
	plen := binary.LittleEndian.Uint32(hdr[56:60])
	if plen > maxHelloPayload {
		return nil, stranger("its hello announces %d payload bytes (at most %d)", plen, maxHelloPayload)
	}
	if plen > 0 {
		h.payload = make([]byte, plen)
		if n, err := io.ReadFull(c, h.payload); err != nil {
			return nil, helloReadErr(helloLen+n, err)
		}
	}
	return h, nil
}

func helloReadErr(n int, err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return stranger("it sent no complete hello in time (%d bytes)", n)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return stranger("it closed the connection after %d bytes, before a complete hello", n)
	default:
		return stranger("reading its hello failed after %d bytes: %v", n, err)
	}
}

// printable returns b with non-printable bytes replaced, for log lines.
func printable(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '.'
		}
		out[i] = c
	}
	return string(out)
}

// putString appends a uint16-length-prefixed string.
func putString(buf []byte, s string) []byte {
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(s)))
	return append(buf, s...)
}

// getString consumes a uint16-length-prefixed string.
func getString(buf []byte) (string, []byte, bool) {
	if len(buf) < 2 {
		return "", nil, false
	}
	n := int(binary.LittleEndian.Uint16(buf))
	if len(buf) < 2+n {
		return "", nil, false
	}
	return string(buf[2 : 2+n]), buf[2+n:], true
}

// peerEntry is one rank's row of the root's table.
type peerEntry struct {
	addr   string
	hostID string
}

func encodeRegister(addr, hostID string) []byte {
	return putString(putString(nil, addr), hostID)
}

func decodeRegister(p []byte) (peerEntry, bool) {
	addr, rest, ok := getString(p)
	if !ok {
		return peerEntry{}, false
	}
	host, rest, ok := getString(rest)
	if !ok || len(rest) != 0 {
		return peerEntry{}, false
	}
	return peerEntry{addr, host}, true
}

func encodeReply(status byte, magic uint64, payload []byte) []byte {
	buf := make([]byte, replyHdrLen, replyHdrLen+len(payload))
	copy(buf[0:4], replySig[:])
	buf[4] = status
	binary.LittleEndian.PutUint64(buf[8:16], magic)
	binary.LittleEndian.PutUint32(buf[16:20], uint32(len(payload)))
	return append(buf, payload...)
}

func encodeTable(t []peerEntry) []byte {
	buf := binary.LittleEndian.AppendUint32(nil, uint32(len(t)))
	for _, e := range t {
		buf = putString(putString(buf, e.addr), e.hostID)
	}
	return buf
}

func decodeTable(p []byte) ([]peerEntry, bool) {
	if len(p) < 4 {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(p))
	p = p[4:]
	if n > MaxRanks {
		return nil, false
	}
	t := make([]peerEntry, n)
	for i := range t {
		var ok bool
		if t[i].addr, p, ok = getString(p); !ok {
			return nil, false
		}
		if t[i].hostID, p, ok = getString(p); !ok {
			return nil, false
		}
	}
	return t, len(p) == 0
}

// readReply reads the root's answer.
func readReply(c net.Conn, magic uint64) (status byte, payload []byte, err error) {
	var hdr [replyHdrLen]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return 0, nil, err
	}
	if [4]byte(hdr[0:4]) != replySig || binary.LittleEndian.Uint64(hdr[8:16]) != magic {
		return 0, nil, errors.New("malformed answer")
	}
	n := binary.LittleEndian.Uint32(hdr[16:20])
	if n > maxReplyPayload {
		return 0, nil, fmt.Errorf("answer of %d bytes is too long", n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(c, payload); err != nil {
		return 0, nil, err
	}
	return hdr[4], payload, nil
}

func putRingHdr(b []byte, seq uint64, size int, op uint32, step int) {
	binary.LittleEndian.PutUint64(b[0:8], seq)
	binary.LittleEndian.PutUint64(b[8:16], uint64(size))
	binary.LittleEndian.PutUint32(b[16:20], op)
	binary.LittleEndian.PutUint32(b[20:24], uint32(step))
}

func opName(op uint32) string {
	switch op {
	case opAllGather:
		return "allgather"
	case opBarrier:
		return "barrier"
	}
	return fmt.Sprintf("op %d", op)
}

// isPeerGone reports whether err says the other side of a connection closed
// it or died.
func isPeerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED)
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// deadlineIn returns now+d.
func deadlineIn(d time.Duration) time.Time { return time.Now().Add(d) }
