package bootstrap

// The status frames a rank sends the root while the communicator forms, and the headers
// of the ring's collective frames (wire.go has the rest of the wire format).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

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
