package bootstrap

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
	"syscall"
	"time"
)

// Wire formats. All integers are little endian.
//
// Every connection (to the root, ring, star, point-to-point) is
// authenticated by a challenge-response over the communicator's key (the
// unique id's random secret, or for ip:port communicators a key derived
// from MSCCLPP_BOOTSTRAP_SECRET, MSCCLPP_BOOTSTRAP_SECRET_FILE or
// ~/.mscclpp_cookie and the root address; see secret.go). The key itself
// never travels.
//
// 1. The accepting side sends a challenge as soon as it accepts:
//
//	[0:4]   "MSCN"
//	[4]     wireVersion
//	[5:8]   reserved
//	[8:40]  nonce A (32 random bytes, fresh for every connection)
//
// 2. The connecting side answers with a hello:
//
//	[0:4]   "MSCB"
//	[4]     wireVersion
//	[5]     kind (kindRegister, kindRing, kindStar, kindP2P)
//	[6:8]   reserved
//	[8:16]  communicator magic
//	[16:48] nonce C (32 random bytes, fresh)
//	[48:52] sender rank
//	[52:56] nranks
//	[56:60] payload length (≤ maxHelloPayload)
//	[60:64] reserved
//	[64:96] HMAC-SHA256(key, "mscclpp hello\x00" ‖ nonce A ‖ [0:64] ‖ payload)
//
// followed by the payload. A register hello's payload is the rank's
// listener address and host id (each a uint16 length + bytes). A hello
// whose MAC does not verify is dropped (and, at the root, answered with a
// reject reply): a recorded hello does not verify against a fresh nonce A.
//
// 3. The accepting side proves the key in turn. A ring, star or
// point-to-point acceptor answers with a hello of kind kindAck carrying its
// own rank, its nonce field zero, and a MAC over nonce C. The root answers a
// register hello, once every rank registered, with a reply
//
//	[0:4]   "MSCR"
//	[4]     status: replyOK, replyError (a RemoteError text), replyUsage (an
//	        InvalidUsage text) or replyReject
//	[5:8]   reserved
//	[8:16]  magic
//	[16:20] payload length (bounded by what the receiver expects: the
//	        table of nranks rows, or an error text)
//	[20:52] HMAC-SHA256(key, label ‖ nonce C ‖ [0:20] ‖ payload)
//
// followed by the table (uint32 count, then per rank its address and host
// id) or by an error text; label is "mscclpp reply\x00". A replyReject
// (wrong key, another communicator) is sent to a connection that did not
// authenticate: it carries one reason byte and no MAC, so it can only make
// that connection fail, never give it anything.
//
// 4. After the table every rank builds its ring and star connections and
// then tells the root, on the same connection, with a status frame
//
//	[0:4] "MSCS", [4] statusReady or statusFail, [5:8] reserved,
//	[8:12] text length (≤ maxStatusText), [12:44] HMAC(key,
//	"mscclpp status\x00" ‖ nonce A ‖ [0:12] ‖ text)
//
// followed by the text (why a rank failed). Once every rank is ready the
// root sends each a final reply (label "mscclpp done\x00", replyOK and no
// payload); when a rank fails, closes its connection or never gets ready,
// every other rank gets a replyError naming it, so init fails fast on all
// ranks.
//
// Ring messages carry a ringHdrLen header (sequence number, payload size, op,
// step) in front of the payload; point-to-point messages a p2pHdrLen header
// (tag, payload size). Frames after the handshake carry no MAC: the
// bootstrap authenticates who connects, it does not protect established
// connections from an attacker on the path.
const (
	wireVersion     = 2
	keyBytes        = 32
	nonceBytes      = 32
	macBytes        = sha256.Size
	challengeLen    = 8 + nonceBytes
	helloLen        = 64 + macBytes
	maxHelloPayload = 4096
	replyHdrLen     = 20 + macBytes
	statusHdrLen    = 12 + macBytes
	maxStatusText   = 4096
	maxErrorText    = 64 << 10
	ringHdrLen      = 24
	p2pHdrLen       = 16
	// maxP2PMessage bounds a point-to-point message; a receiver reads one
	// in chunks (p2pChunk) so that an announced length costs memory only
	// as the bytes actually arrive.
	maxP2PMessage = 16 << 20
	p2pChunk      = 64 << 10
	maxHostIDLen  = 1024

	kindRegister = 1
	kindRing     = 2
	kindP2P      = 3
	kindAck      = 4
	kindStar     = 5
	// kindAbort: to the root, from a rank that cannot join (its own setting is bad, e.g. no
	// interface matches MSCCLPP_SOCKET_IFNAME): the payload is its result code (1 byte) and
	// why, which the root tells every rank at once.
	kindAbort = 6

	replyOK     = 0
	replyError  = 1
	replyUsage  = 2
	replyReject = 3

	rejectKey   = 1 // the hello's MAC does not verify: another key
	rejectMagic = 2 // the hello is for another communicator

	statusReady = 1
	statusFail  = 2

	opAllGather = 1
	opBarrier   = 2
)

// MAC labels: one per kind of frame, so a MAC of one kind never verifies
// as another.
const (
	labelHello  = "mscclpp hello\x00"
	labelReply  = "mscclpp reply\x00"
	labelDone   = "mscclpp done\x00"
	labelStatus = "mscclpp status\x00"
)

var (
	challengeSig = [4]byte{'M', 'S', 'C', 'N'}
	helloSig     = [4]byte{'M', 'S', 'C', 'B'}
	replySig     = [4]byte{'M', 'S', 'C', 'R'}
	statusSig    = [4]byte{'M', 'S', 'C', 'S'}
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

// peerEntry is one rank's row of the root's table: what it registered.
type peerEntry struct {
	addr   string
	hostID string
	pid    uint64 // its process (local ranks watch each other's liveness)
}

// encodeRegister is a registration's payload: listener address, host id, pid.
func encodeRegister(addr, hostID string, pid uint64) []byte {
	return binary.LittleEndian.AppendUint64(putString(putString(nil, addr), hostID), pid)
}

func decodeRegister(p []byte) (peerEntry, bool) {
	addr, rest, ok := getString(p)
	if !ok {
		return peerEntry{}, false
	}
	host, rest, ok := getString(rest)
	if !ok || len(rest) != 8 {
		return peerEntry{}, false
	}
	return peerEntry{addr, host, binary.LittleEndian.Uint64(rest)}, true
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

// encodeTable is the root's table: the rows, and a nonce of the root's that names this
// instance of the communicator (its node segments).
func encodeTable(nonce uint64, t []peerEntry) []byte {
	buf := binary.LittleEndian.AppendUint32(nil, uint32(len(t)))
	buf = binary.LittleEndian.AppendUint64(buf, nonce)
	for _, e := range t {
		buf = binary.LittleEndian.AppendUint64(putString(putString(buf, e.addr), e.hostID), e.pid)
	}
	return buf
}

// decodeTable decodes a table that must have nranks rows.
func decodeTable(p []byte, nranks int) (uint64, []peerEntry, bool) {
	if len(p) < 12 {
		return 0, nil, false
	}
	n := binary.LittleEndian.Uint32(p)
	nonce := binary.LittleEndian.Uint64(p[4:])
	p = p[12:]
	if uint64(n) != uint64(nranks) {
		return 0, nil, false
	}
	t := make([]peerEntry, n)
	for i := range t {
		var ok bool
		if t[i].addr, p, ok = getString(p); !ok {
			return 0, nil, false
		}
		if t[i].hostID, p, ok = getString(p); !ok || len(p) < 8 {
			return 0, nil, false
		}
		t[i].pid, p = binary.LittleEndian.Uint64(p), p[8:]
	}
	return nonce, t, len(p) == 0
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

// maxTableLen bounds the table of nranks rows: each row is what one
// register hello carried.
func maxTableLen(nranks int) int {
	return max(12+nranks*maxHelloPayload, maxErrorText)
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
