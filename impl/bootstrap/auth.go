package bootstrap

// Authentication: every connection proves the communicator's key in both
// directions by a challenge-response (the frames are laid out in wire.go):
// the accepting side's challenge, the connecting side's hello MAC'ed over it,
// and an answer MAC'ed over the hello's nonce (an ack, or the root's reply
// and status frames). The key itself never travels (where it comes from:
// secret.go and id.go).

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
)

type nonce = [nonceBytes]byte

// newNonce returns 32 fresh random bytes (crypto/rand does not fail on
// Linux; it would abort the process rather than return predictable bytes).
func newNonce() nonce {
	var n nonce
	rand.Read(n[:])
	return n
}

// sum computes HMAC-SHA256(key, label ‖ nonce ‖ parts...).
func sum(key *[keyBytes]byte, label string, n *nonce, parts ...[]byte) [macBytes]byte {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(label))
	m.Write(n[:])
	for _, p := range parts {
		m.Write(p)
	}
	var out [macBytes]byte
	m.Sum(out[:0])
	return out
}

// macOK reports in constant time whether got is the MAC of the parts.
func macOK(got []byte, key *[keyBytes]byte, label string, n *nonce, parts ...[]byte) bool {
	want := sum(key, label, n, parts...)
	return hmac.Equal(got, want[:])
}

// writeChallenge sends a fresh challenge on c and returns its nonce.
func writeChallenge(c net.Conn) (nonce, error) {
	n := newNonce()
	var buf [challengeLen]byte
	copy(buf[0:4], challengeSig[:])
	buf[4] = wireVersion
	copy(buf[8:], n[:])
	_, err := c.Write(buf[:])
	return n, err
}

// errNotBootstrap is the reason a connection's first bytes were not a
// bootstrap challenge: the address is not a bootstrap listener of this
// version.
type errNotBootstrap struct{ reason string }

func (e *errNotBootstrap) Error() string { return e.reason }

// readChallenge reads the accepting side's challenge.
func readChallenge(c net.Conn) (nonce, error) {
	var buf [challengeLen]byte
	if _, err := io.ReadFull(c, buf[:]); err != nil {
		return nonce{}, err
	}
	if [4]byte(buf[0:4]) != challengeSig {
		return nonce{}, &errNotBootstrap{fmt.Sprintf("it sent %q, not an MSCCL++ bootstrap challenge", printable(buf[0:8]))}
	}
	if buf[4] != wireVersion {
		return nonce{}, &errNotBootstrap{fmt.Sprintf("it speaks bootstrap protocol version %d, this library %d", buf[4], wireVersion)}
	}
	return nonce(buf[8:]), nil
}

// hello is a decoded hello frame.
type hello struct {
	kind    byte
	magic   uint64
	nonce   nonce // the sender's nonce (zero in an ack)
	rank    int
	nranks  int
	payload []byte
}

// encode returns the hello with its MAC over challenge, the other side's
// nonce.
func (h *hello) encode(key *[keyBytes]byte, challenge *nonce) []byte {
	buf := make([]byte, helloLen+len(h.payload))
	copy(buf[0:4], helloSig[:])
	buf[4] = wireVersion
	buf[5] = h.kind
	binary.LittleEndian.PutUint64(buf[8:16], h.magic)
	copy(buf[16:48], h.nonce[:])
	binary.LittleEndian.PutUint32(buf[48:52], uint32(int32(h.rank)))
	binary.LittleEndian.PutUint32(buf[52:56], uint32(int32(h.nranks)))
	binary.LittleEndian.PutUint32(buf[56:60], uint32(len(h.payload)))
	copy(buf[helloLen:], h.payload)
	mac := sum(key, labelHello, challenge, buf[:64], h.payload)
	copy(buf[64:helloLen], mac[:])
	return buf
}

// errStranger is the reason a connection was dropped before it proved to
// belong to this communicator; reject is the reason byte a root answers a
// register hello with (0: none, just drop the connection).
type errStranger struct {
	reason string
	reject byte
	kind   byte
}

func (e *errStranger) Error() string { return e.reason }

func stranger(format string, args ...any) error {
	return &errStranger{reason: fmt.Sprintf(format, args...)}
}

// readHello reads a hello from c and checks that it belongs to the
// communicator (magic) and proves the key over challenge, the nonce this
// side sent. The caller sets the read deadline.
func readHello(c net.Conn, magic uint64, key *[keyBytes]byte, challenge *nonce) (*hello, error) {
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
		nonce:  nonce(hdr[16:48]),
		rank:   int(int32(binary.LittleEndian.Uint32(hdr[48:52]))),
		nranks: int(int32(binary.LittleEndian.Uint32(hdr[52:56]))),
	}
	// The length is bounded before anything is allocated for it, and the
	// payload is read before any answer, so that closing the connection
	// does not reset it under the answer.
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
	if h.magic != magic {
		return nil, &errStranger{reason: fmt.Sprintf("it belongs to another communicator (magic %#x, want %#x)", h.magic, magic),
			reject: rejectMagic, kind: h.kind}
	}
	if !macOK(hdr[64:helloLen], key, labelHello, challenge, hdr[:64], h.payload) {
		return nil, &errStranger{reason: fmt.Sprintf("it did not prove the key of communicator %#x (a wrong secret, or a replayed hello)", magic),
			reject: rejectKey, kind: h.kind}
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

// encodeReply returns a root reply MAC'ed over n, the rank's nonce, with
// label (labelReply or labelDone).
func encodeReply(status byte, magic uint64, payload []byte, key *[keyBytes]byte, label string, n *nonce) []byte {
	buf := make([]byte, replyHdrLen, replyHdrLen+len(payload))
	copy(buf[0:4], replySig[:])
	buf[4] = status
	binary.LittleEndian.PutUint64(buf[8:16], magic)
	binary.LittleEndian.PutUint32(buf[16:20], uint32(len(payload)))
	mac := sum(key, label, n, buf[:20], payload)
	copy(buf[20:replyHdrLen], mac[:])
	return append(buf, payload...)
}

// encodeReject returns the unauthenticated reply to a register hello that
// did not authenticate.
func encodeReject(magic uint64, reason byte) []byte {
	buf := make([]byte, replyHdrLen+1)
	copy(buf[0:4], replySig[:])
	buf[4] = replyReject
	binary.LittleEndian.PutUint64(buf[8:16], magic)
	binary.LittleEndian.PutUint32(buf[16:20], 1)
	buf[replyHdrLen] = reason
	return buf
}

// errForged is a root answer whose MAC does not verify: the other side
// does not hold the key (a fake root, or a root with another secret).
var errForged = errors.New("its answer does not prove the communicator's key")

// readReply reads a root reply of at most maxLen payload bytes and checks
// its MAC over n, this rank's nonce. A replyReject comes back with its
// reason byte as payload and no MAC check (it can only make this rank fail).
func readReply(c net.Conn, magic uint64, key *[keyBytes]byte, label string, n *nonce, maxLen int) (status byte, payload []byte, err error) {
	var hdr [replyHdrLen]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return 0, nil, err
	}
	if [4]byte(hdr[0:4]) != replySig {
		return 0, nil, fmt.Errorf("malformed answer (%q)", printable(hdr[0:8]))
	}
	size := binary.LittleEndian.Uint32(hdr[16:20])
	if hdr[4] == replyReject {
		if size != 1 {
			return 0, nil, fmt.Errorf("malformed reject answer of %d bytes", size)
		}
		var reason [1]byte
		if _, err := io.ReadFull(c, reason[:]); err != nil {
			return 0, nil, err
		}
		return replyReject, reason[:], nil
	}
	if binary.LittleEndian.Uint64(hdr[8:16]) != magic {
		return 0, nil, errForged
	}
	if uint64(size) > uint64(maxLen) {
		return 0, nil, fmt.Errorf("its answer announces %d bytes, more than the %d expected", size, maxLen)
	}
	payload = make([]byte, size)
	if _, err := io.ReadFull(c, payload); err != nil {
		return 0, nil, err
	}
	if !macOK(hdr[20:replyHdrLen], key, label, n, hdr[:20], payload) {
		return 0, nil, errForged
	}
	return hdr[4], payload, nil
}

// encodeStatus returns a rank's status frame to the root, MAC'ed over n,
// the root's challenge.
func encodeStatus(st byte, text string, key *[keyBytes]byte, n *nonce) []byte {
	if len(text) > maxStatusText {
		text = text[:maxStatusText]
	}
	buf := make([]byte, statusHdrLen, statusHdrLen+len(text))
	copy(buf[0:4], statusSig[:])
	buf[4] = st
	binary.LittleEndian.PutUint32(buf[8:12], uint32(len(text)))
	mac := sum(key, labelStatus, n, buf[:12], []byte(text))
	copy(buf[12:statusHdrLen], mac[:])
	return append(buf, text...)
}

// readStatus reads a rank's status frame.
func readStatus(c net.Conn, key *[keyBytes]byte, n *nonce) (st byte, text string, err error) {
	var hdr [statusHdrLen]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return 0, "", err
	}
	size := binary.LittleEndian.Uint32(hdr[8:12])
	if [4]byte(hdr[0:4]) != statusSig || size > maxStatusText {
		return 0, "", fmt.Errorf("malformed status frame (%q, %d bytes)", printable(hdr[0:8]), size)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, "", err
	}
	if !macOK(hdr[12:statusHdrLen], key, labelStatus, n, hdr[:12], buf) {
		return 0, "", errors.New("its status frame does not prove the key")
	}
	return hdr[4], string(buf), nil
}
