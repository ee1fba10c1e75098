package bootstrap

// Fuzz targets for every decoder of bytes a peer (or a stranger) sends the
// bootstrap: the challenge, hello, reply and status frames, the register
// payload and the root's table, point-to-point message bodies and the
// unique id. Each must return an error, never panic, and never allocate
// more than the frame's bounds from a length the peer claims. The seeds
// run in plain `go test`; `make faults` fuzzes each for a while.

import (
	"bytes"
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"
)

// fuzzConn is a connection whose peer sent data: the decoders only Read
// (and Write nothing back).
type fuzzConn struct {
	net.Conn // nil: any other method is a bug in the decoder under test
	r        *bytes.Reader
}

func (c *fuzzConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *fuzzConn) Write(p []byte) (int, error) { return len(p), nil }

func newFuzzConn(data []byte) *fuzzConn { return &fuzzConn{r: bytes.NewReader(data)} }

// allocBound: what decoding n input bytes may allocate, however many bytes
// the input claims to be followed by.
func allocBound(n int) uint64 { return uint64(2*n) + 1<<20 }

// allocated runs f and returns the bytes allocated meanwhile (a fuzz worker
// runs one input at a time, so they are f's).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

var (
	fuzzKey   = [keyBytes]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}
	fuzzNonce = nonce{9, 8, 7, 6, 5, 4, 3, 2, 1}
)

const fuzzMagic = 0x1122334455667788

func FuzzReadChallenge(f *testing.F) {
	var good [challengeLen]byte
	copy(good[:], challengeSig[:])
	good[4] = wireVersion
	f.Add(good[:])
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(good[:10])
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := readChallenge(newFuzzConn(data))
		if err == nil && (len(data) < challengeLen || [4]byte(data[0:4]) != challengeSig || data[4] != wireVersion) {
			t.Fatalf("accepted %x as a challenge", data)
		}
	})
}

func FuzzReadHello(f *testing.F) {
	reg := &hello{kind: kindRegister, magic: fuzzMagic, nonce: nonce{1}, rank: 1, nranks: 4,
		payload: encodeRegister("10.0.0.1:1234", "node1", 4242)}
	f.Add(reg.encode(&fuzzKey, &fuzzNonce))
	ack := &hello{kind: kindAck, magic: fuzzMagic}
	f.Add(ack.encode(&fuzzKey, &fuzzNonce))
	bad := reg.encode(&fuzzKey, &fuzzNonce)
	binary.LittleEndian.PutUint32(bad[56:60], 0xffffffff) // a huge claimed payload
	f.Add(bad)
	f.Add(reg.encode(&fuzzKey, &fuzzNonce)[:helloLen-1])
	f.Fuzz(func(t *testing.T, data []byte) {
		var h *hello
		var err error
		if a := allocated(func() { h, err = readHello(newFuzzConn(data), fuzzMagic, &fuzzKey, &fuzzNonce) }); a > allocBound(len(data)) {
			t.Fatalf("%d input bytes made it allocate %d", len(data), a)
		}
		if err != nil {
			return
		}
		if len(h.payload) > maxHelloPayload {
			t.Fatalf("hello payload of %d bytes accepted", len(h.payload))
		}
		// accepted: it must be exactly what an honest peer with the key encodes
		if again := h.encode(&fuzzKey, &fuzzNonce); !bytes.Equal(again, data[:len(again)]) {
			t.Fatalf("accepted hello %x re-encodes as %x", data, again)
		}
	})
}

func FuzzReadReply(f *testing.F) {
	table := wholeTable(7, []peerEntry{{"10.0.0.1:1", "a", 11, nonce{1}}, {"10.0.0.2:2", "b", 12, nonce{2}}})
	f.Add(encodeReply(replyOK, fuzzMagic, table, &fuzzKey, labelReply, &fuzzNonce), uint16(1000))
	f.Add(encodeReply(replyError, fuzzMagic, []byte("no"), &fuzzKey, labelDone, &fuzzNonce), uint16(1000))
	f.Add(encodeReject(fuzzMagic, rejectKey), uint16(10))
	big := encodeReply(replyOK, fuzzMagic, table, &fuzzKey, labelReply, &fuzzNonce)
	binary.LittleEndian.PutUint32(big[16:20], 1<<31)
	f.Add(big, uint16(65535))
	f.Fuzz(func(t *testing.T, data []byte, maxLen uint16) {
		var st byte
		var payload []byte
		var err error
		if a := allocated(func() {
			st, payload, err = readReply(newFuzzConn(data), fuzzMagic, &fuzzKey, labelReply, &fuzzNonce, int(maxLen))
		}); a > allocBound(len(data)) {
			t.Fatalf("%d input bytes made it allocate %d", len(data), a)
		}
		if err != nil {
			return
		}
		if st == replyReject {
			if len(payload) != 1 {
				t.Fatalf("reject with %d bytes", len(payload))
			}
			return
		}
		if len(payload) > int(maxLen) {
			t.Fatalf("reply of %d bytes accepted with a bound of %d", len(payload), maxLen)
		}
		if again := encodeReply(st, fuzzMagic, payload, &fuzzKey, labelReply, &fuzzNonce); !bytes.Equal(again, data[:len(again)]) {
			t.Fatalf("accepted reply %x re-encodes as %x", data, again)
		}
	})
}

func FuzzReadStatus(f *testing.F) {
	f.Add(encodeStatus(replyOK, "", &fuzzKey, &fuzzNonce))
	f.Add(encodeStatus(replyError, "rank 3 failed", &fuzzKey, &fuzzNonce))
	long := encodeStatus(replyError, "x", &fuzzKey, &fuzzNonce)
	binary.LittleEndian.PutUint32(long[8:12], 1<<30)
	f.Add(long)
	f.Fuzz(func(t *testing.T, data []byte) {
		var st byte
		var text string
		var err error
		if a := allocated(func() { st, text, err = readStatus(newFuzzConn(data), &fuzzKey, &fuzzNonce) }); a > allocBound(len(data)) {
			t.Fatalf("%d input bytes made it allocate %d", len(data), a)
		}
		if err != nil {
			return
		}
		if len(text) > maxStatusText {
			t.Fatalf("status text of %d bytes accepted", len(text))
		}
		if again := encodeStatus(st, text, &fuzzKey, &fuzzNonce); !bytes.Equal(again, data[:len(again)]) {
			t.Fatalf("accepted status %x re-encodes as %x", data, again)
		}
	})
}

func FuzzDecodeRegister(f *testing.F) {
	f.Add(encodeRegister("10.0.0.1:1234", "node1", 4242))
	f.Add(encodeRegister("", "", 0))
	f.Add([]byte{0xff, 0xff, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, ok := decodeRegister(data)
		if ok && !bytes.Equal(encodeRegister(e.addr, e.hostID, e.pid), data) {
			t.Fatalf("register payload %x decodes to %+v, which encodes differently", data, e)
		}
	})
}

func FuzzDecodeTable(f *testing.F) {
	f.Add(wholeTable(7, []peerEntry{{"10.0.0.1:1", "a", 11, nonce{1}}, {"10.0.0.2:2", "b", 12, nonce{2}}}), uint8(2))
	f.Add(tableAnswers(7, tableRows(12, 3))(4), uint8(12))
	f.Add(wholeTable(0, nil), uint8(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, nranks uint8) {
		tab, ok := decodeTable(data, int(nranks))
		if !ok {
			return
		}
		sent := tab.sentRanks()
		if len(tab.rows) != int(nranks) || tab.slot == 0 && len(sent) != int(nranks) || !bytes.Equal(encodeTable(tab, sent), data) {
			t.Fatalf("table %x (%d ranks) decodes to %d rows (%d sent) that encode differently", data, nranks, len(tab.rows), len(sent))
		}
	})
}

// FuzzReadChunked: a point-to-point message body of a claimed length n
// costs memory only as its bytes arrive.
func FuzzReadChunked(f *testing.F) {
	f.Add([]byte("hello"), uint32(5))
	f.Add([]byte("short"), uint32(maxP2PMessage))
	f.Add(bytes.Repeat([]byte{7}, 3*p2pChunk+5), uint32(3*p2pChunk+1))
	f.Fuzz(func(t *testing.T, data []byte, n uint32) {
		n %= maxP2PMessage + 1
		msg, err := readChunked(bytes.NewReader(data), int(n))
		if err != nil {
			if int(n) <= len(data) {
				t.Fatalf("%d bytes of %d there: %v", n, len(data), err)
			}
			return
		}
		if !bytes.Equal(msg, data[:n]) {
			t.Fatalf("read %d bytes that differ from the input", len(msg))
		}
		if cap(msg) > 2*len(data)+p2pChunk {
			t.Fatalf("claimed %d bytes, %d arrived: %d bytes allocated", n, len(data), cap(msg))
		}
	})
}

func FuzzIDDecode(f *testing.F) {
	var secret [secretBytes]byte
	secret[0] = 1
	for _, a := range []string{"127.0.0.1:5000", "[fe80::1%eth0]:6000", "[::1]:1"} {
		ap, err := ParseAddr(a)
		if err != nil {
			f.Fatal(err)
		}
		fields := idFields{addr: ap, magic: 42, secret: secret}
		id := fields.encode()
		f.Add(id[:])
	}
	f.Add(make([]byte, IDBytes))
	f.Fuzz(func(t *testing.T, data []byte) {
		var id ID
		copy(id[:], data)
		fields, err := id.decode()
		if err != nil {
			return
		}
		again := fields.encode()
		back, err := again.decode()
		if err != nil || back != fields {
			t.Fatalf("id %x decodes to %+v; re-encoded it decodes to %+v, %v", id, fields, back, err)
		}
	})
}

// fuzzPair returns the two ends of a fresh loopback TCP connection.
func fuzzPair(t *testing.T, l *net.TCPListener) (*net.TCPConn, *net.TCPConn) {
	c, err := net.DialTCP("tcp", nil, l.Addr().(*net.TCPAddr))
	if err != nil {
		t.Skip("no loopback connection:", err)
	}
	s, err := l.AcceptTCP()
	if err != nil {
		c.Close()
		t.Skip("no loopback connection:", err)
	}
	return c, s
}

// FuzzRecvMsg: a ring or star frame from a peer (header, payload, or an
// abort frame's text) is either the message this rank waits for or an
// error; an abort text is bounded however long the peer claims it is.
func FuzzRecvMsg(f *testing.F) {
	frame := func(seq uint64, size int, op uint32, step int, payload []byte) []byte {
		b := make([]byte, ringHdrLen, ringHdrLen+len(payload))
		putRingHdr(b, seq, size, op, step)
		return append(b, payload...)
	}
	f.Add(frame(1, 4, opAllGather, 0, []byte("abcd")), uint16(4), uint8(0))
	f.Add(frame(1, 5, opAbort, 0, []byte("oops!")), uint16(4), uint8(0))
	f.Add(frame(1, maxAbortText+1, opAbort, 0, nil), uint16(4), uint8(0))
	f.Add(frame(1, 1<<40, opAbort, 0, []byte("x")), uint16(4), uint8(0))
	f.Add(frame(2, 4, opAllGather, 0, []byte("abcd")), uint16(4), uint8(0))
	f.Add(frame(1, 4, opAllGather, 1, []byte("ab")), uint16(4), uint8(1))
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		f.Skip("no loopback listener:", err)
	}
	defer l.Close()
	f.Fuzz(func(t *testing.T, data []byte, want uint16, step uint8) {
		c, s := fuzzPair(t, l)
		defer c.Close()
		defer s.Close()
		go func() {
			c.Write(data)
			c.CloseWrite()
		}()
		rc, err := newRingConn(s, 1)
		if err != nil {
			t.Fatal(err)
		}
		s.SetDeadline(time.Now().Add(5 * time.Second))
		b := &Bootstrap{rank: 0, nranks: 2, seq: 1, timeout: 5 * time.Second}
		buf := make([]byte, ringHdrLen+int(want))
		var origin string
		if a := allocated(func() { origin, err = b.recvMsg(rc, buf, int(want), opAllGather, int(step)) }); a > allocBound(len(data)) {
			t.Fatalf("%d input bytes made it allocate %d", len(data), a)
		}
		if len(origin) > maxAbortText {
			t.Fatalf("abort text of %d bytes", len(origin))
		}
		if err != nil {
			return
		}
		if !bytes.Equal(buf, frame(1, int(want), opAllGather, int(step), buf[ringHdrLen:])) ||
			!bytes.Equal(buf, data[:len(buf)]) {
			t.Fatalf("frame %x accepted as %x", data, buf)
		}
	})
}
