package bootstrap

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/logx"
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
	wireVersion     = 4
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

// rootText is the text of the root's answer, fit to print: as it is when it is one line of
// printable ASCII (what a root writes: the words of a rank in it are already quoted), else
// quoted as a peer's text.
func rootText(b []byte) string {
	if !printableLine(string(b)) {
		return logx.PeerText(string(b))
	}
	return string(b)
}

// printableLine reports whether s is one line of printable ASCII.
func printableLine(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// addrOK reports whether s is what a rank registers as its listening address: an ip:port
// (a zone, too, in printable ASCII), so that messages can name it as it is.
func addrOK(s string) bool {
	_, err := netip.ParseAddrPort(s)
	return err == nil && printableLine(s)
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
	token  nonce  // the nonce of its registration's hello: fresh, so it binds InstanceID to this instance
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
	if !ok || len(rest) != 8 || !addrOK(addr) || !hostIDOK(host) {
		return peerEntry{}, false
	}
	return peerEntry{addr: addr, hostID: host, pid: binary.LittleEndian.Uint64(rest)}, true
}

// rootTable is what the root answers a registration with: the nonce that names this
// instance of the communicator, the rows this rank needs before its ring forms, and the
// slot of the table's gather (gatherTable) that brings the others.
type rootTable struct {
	nonce uint64
	// slot is the longest row's encoding (encodeRow), the same on every rank: the
	// size of each rank's slot in the gather of the rows the root did not send
	// (every rank gathers, even one that was sent every row); 0 when the root sent
	// every rank the whole table (every rank on one host), and nobody gathers.
	slot int
	// rows is indexed by rank; a row the root did not send has addr "".
	rows []peerEntry
}

// encodeRow appends one row of the table: address, host id, pid, token.
func encodeRow(buf []byte, e peerEntry) []byte {
	buf = binary.LittleEndian.AppendUint64(putString(putString(buf, e.addr), e.hostID), e.pid)
	return append(buf, e.token[:]...)
}

// decodeRow consumes one row (its address must be an ip:port).
func decodeRow(p []byte) (peerEntry, []byte, bool) {
	var e peerEntry
	var ok bool
	if e.addr, p, ok = getString(p); !ok || !addrOK(e.addr) {
		return peerEntry{}, nil, false
	}
	if e.hostID, p, ok = getString(p); !ok || !hostIDOK(e.hostID) || len(p) < 8+nonceBytes {
		return peerEntry{}, nil, false
	}
	e.pid, p = binary.LittleEndian.Uint64(p), p[8:]
	e.token, p = nonce(p[:nonceBytes]), p[nonceBytes:]
	return e, p, true
}

// rowLen is the length of e's encoding.
func rowLen(e peerEntry) int { return 2 + len(e.addr) + 2 + len(e.hostID) + 8 + nonceBytes }

// maxRowLen bounds a row: what one register hello carried, and the token.
const maxRowLen = maxHelloPayload + nonceBytes

// encodeTable is the root's answer to a registration: nranks, the nonce, the gather's
// slot, and the rows of ranks (ascending), each after its rank.
func encodeTable(t rootTable, ranks []int) []byte {
	buf := binary.LittleEndian.AppendUint32(nil, uint32(len(t.rows)))
	buf = binary.LittleEndian.AppendUint64(buf, t.nonce)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(t.slot))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(ranks)))
	for _, r := range ranks {
		buf = encodeRow(binary.LittleEndian.AppendUint32(buf, uint32(r)), t.rows[r])
	}
	return buf
}

// decodeTable decodes the answer of a root to a rank of nranks: ranks ascending and in
// range, every row within the slot (all of them when the slot is 0), nothing after the last.
func decodeTable(p []byte, nranks int) (rootTable, bool) {
	if len(p) < 20 || uint64(binary.LittleEndian.Uint32(p)) != uint64(nranks) {
		return rootTable{}, false
	}
	t := rootTable{nonce: binary.LittleEndian.Uint64(p[4:]), slot: int(binary.LittleEndian.Uint32(p[12:]))}
	count := binary.LittleEndian.Uint32(p[16:])
	if count > uint32(nranks) || t.slot > maxRowLen || t.slot == 0 && count != uint32(nranks) {
		return rootTable{}, false
	}
	p = p[20:]
	t.rows = make([]peerEntry, nranks)
	last := -1
	for i := uint32(0); i < count; i++ {
		if len(p) < 4 {
			return rootTable{}, false
		}
		r := int(binary.LittleEndian.Uint32(p))
		if r <= last || r >= nranks {
			return rootTable{}, false
		}
		var ok bool
		if t.rows[r], p, ok = decodeRow(p[4:]); !ok || t.slot > 0 && rowLen(t.rows[r]) > t.slot {
			return rootTable{}, false
		}
		last = r
	}
	return t, len(p) == 0
}

// sentRanks lists the ranks whose rows t holds.
func (t *rootTable) sentRanks() []int {
	var ranks []int
	for r, e := range t.rows {
		if e.addr != "" {
			ranks = append(ranks, r)
		}
	}
	return ranks
}

// hostIDOK reports whether s can be a rank's host id: not longer than maxHostIDLen, and
// without a NUL byte (unknownHost, which HostIDs reports for a row not known yet, has one).
func hostIDOK(s string) bool {
	return len(s) <= maxHostIDLen && !strings.Contains(s, "\x00")
}

// maxTableLen bounds the root's answer to a rank of nranks.
func maxTableLen(nranks int) int {
	return max(20+nranks*(4+maxRowLen), maxErrorText)
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
