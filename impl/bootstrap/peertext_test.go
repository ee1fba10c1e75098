package bootstrap

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// evilText is what a malicious peer puts in a text the victim prints: a screen clear, a
// terminal-title escape and a forged log line.
const evilText = "\x1b[2J\x1b]0;x\x07\nhost:1:1 [0] MSCCLPP WARN forged"

// noRawPeerText fails t when s (an error or a log line) holds any of evilText's control
// bytes raw, or lacks its words (the text must be shown, escaped, not dropped).
func noRawPeerText(t testing.TB, what, s string) {
	t.Helper()
	for _, raw := range []string{"\x1b", "\x07", "\n"} {
		if strings.Contains(s, raw) {
			t.Fatalf("%s holds %q raw: %q", what, raw, s)
		}
	}
	if !strings.Contains(s, `\x1b[2J`) || !strings.Contains(s, "MSCCLPP WARN forged") {
		t.Fatalf("%s does not show the peer's text escaped: %q", what, s)
	}
}

// noRawLogs checks every line of logs that shows evilText at all.
func noRawLogs(t testing.TB, logs *logSink) {
	t.Helper()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, l := range logs.lines {
		if strings.Contains(l, "forged") {
			noRawPeerText(t, "log line", l)
		}
	}
}

// registerListening registers as rank 1 of 2 at addr, as register does, with the address of
// a listener that takes connections and answers none (rank 0's ring connection waits).
func registerListening(t testing.TB, addr string) (net.Conn, nonce, nonce, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	magic, key := testKey(t, addr)
	c, ch := dialChallenge(t, addr)
	h := hello{kind: kindRegister, magic: magic, nonce: newNonce(), rank: 1, nranks: 2,
		payload: encodeRegister(ln.Addr().String(), "", 1)}
	if _, err := c.Write(h.encode(&key, &ch)); err != nil {
		t.Fatal(err)
	}
	return c, ch, h.nonce, ln.Addr().String()
}

// rank0Registered starts rank 0 of 2 (with the root) at a loopback address and returns once it
// registered: the address, its magic and key, the root's log, and a wait for rank 0's error.
func rank0Registered(t *testing.T) (string, uint64, [keyBytes]byte, *logSink, func() error) {
	addr := loopbackAddr(t)
	magic, key := testKey(t, addr)
	logs := newLogSink()
	var err0 error
	var wg sync.WaitGroup
	wg.Go(func() { _, err0 = InitAddr(addr, 0, 2, Options{Timeout: 10 * time.Second, Logf: logs.logf}) })
	t.Cleanup(wg.Wait)
	logs.waitFor(t, "rank 0 registered")
	return addr, magic, key, logs, func() error { wg.Wait(); return err0 }
}

// TestPeerTextAbortFrame: the text of a collective's abort frame from a peer (read by the
// ring and by the large ring's duplex step) reaches the error quoted.
func TestPeerTextAbortFrame(t *testing.T) {
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skip("no loopback listener:", err)
	}
	defer l.Close()
	c, s := fuzzPair(t, l)
	defer c.Close()
	defer s.Close()
	frame := make([]byte, ringHdrLen, ringHdrLen+len(evilText))
	putRingHdr(frame, 1, len(evilText), opAbort, 0)
	frame = append(frame, evilText...)
	go c.Write(frame)
	rc, err := newRingConn(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.SetDeadline(time.Now().Add(5 * time.Second))
	b := &Bootstrap{rank: 0, nranks: 2, seq: 1, timeout: 5 * time.Second}
	origin, err := b.recvMsg(rc, make([]byte, ringHdrLen+4), 4, opAllGather, 0)
	wantCode(t, err, status.RemoteError, "allgather failed on another rank")
	noRawPeerText(t, "ring abort error", err.Error())
	if origin != evilText {
		t.Fatalf("origin %q: the text passed on to the next rank is not the peer's", origin)
	}

	d := &Bootstrap{rank: 0, nranks: 2, done: make(chan struct{}), dialCancel: func() {}}
	err = d.abortIn(frame[:ringHdrLen], frame[ringHdrLen:], opAllGather)
	wantCode(t, err, status.RemoteError, "allgather failed on another rank")
	noRawPeerText(t, "duplex abort error", err.Error())
}

// TestPeerTextRootStatus: the failure a registered rank reports to the root (its status
// frame) reaches the root's log and the other ranks' errors quoted.
func TestPeerTextRootStatus(t *testing.T) {
	addr, magic, key, logs, wait := rank0Registered(t)
	c, ch, n, _ := registerListening(t, addr)
	if st, _, err := readReply(c, magic, &key, labelReply, &n, maxTableLen(2)); err != nil || st != replyOK {
		t.Fatalf("registering rank 1: status %d, %v", st, err)
	}
	if _, err := c.Write(encodeStatus(statusFail, evilText, &key, &ch)); err != nil {
		t.Fatal(err)
	}
	err0 := wait()
	wantCode(t, err0, status.RemoteError, "rank 1 failed during init")
	noRawPeerText(t, "rank 0's error", err0.Error())
	logs.waitFor(t, "rank 1 failed during init")
	noRawLogs(t, logs)
}

// TestPeerTextRemoteAbort: the reason a rank that cannot join gives the root reaches the
// ranks quoted, and an abort that names no rank of the communicator (rank -7) is dropped,
// never blamed.
func TestPeerTextRemoteAbort(t *testing.T) {
	addr, magic, key, logs, wait := rank0Registered(t)
	payload := append([]byte{byte(status.InvalidUsage)}, evilText...)
	c, ch := dialChallenge(t, addr)
	c.Write(rawHello(kindAbort, magic, &key, &ch, -7, 2, payload))
	logs.waitFor(t, "its abort names no rank")
	c, ch = dialChallenge(t, addr)
	c.Write(rawHello(kindAbort, magic, &key, &ch, 1, 2, payload))
	err0 := wait()
	wantCode(t, err0, status.InvalidUsage, "rank 1 (from 127.0.0.1:")
	if strings.Contains(err0.Error(), "-7") {
		t.Fatalf("rank 0's error blames the forged rank: %q", err0)
	}
	noRawPeerText(t, "rank 0's error", err0.Error())
	noRawLogs(t, logs)
}

// TestPeerTextRootAnswer: the text of a root's failure answer (a root that proves the key:
// a malicious rank 0) reaches the rank without a raw control byte.
func TestPeerTextRootAnswer(t *testing.T) {
	for _, st := range []byte{replyError, replyUsage} {
		addr := loopbackAddr(t)
		magic, key := testKey(t, addr)
		fakeRoot(t, addr, func(_ net.Conn, h *hello) []byte {
			return encodeReply(st, magic, []byte(evilText), &key, labelReply, &h.nonce)
		})
		_, err := InitAddr(addr, 1, 2, Options{Timeout: 5 * time.Second})
		if err == nil {
			t.Fatal("init succeeded against a root that answered a failure")
		}
		noRawPeerText(t, "the rank's error", err.Error())
	}
	if got := rootText([]byte("rank 1 failed during init: \"x\"")); got != "rank 1 failed during init: \"x\"" {
		t.Fatalf("an honest root's answer is shown as %q", got)
	}
}

// TestPeerTextRegisteredAddress: a registration or a table whose address is not an ip:port
// (here the evil text) is malformed, so that the messages that name a rank's address never
// print it raw.
func TestPeerTextRegisteredAddress(t *testing.T) {
	if _, ok := decodeRegister(encodeRegister(evilText, "", 1)); ok {
		t.Fatal("a registration with the evil text as its address decodes")
	}
	if _, ok := decodeTable(wholeTable(1, []peerEntry{{addr: "127.0.0.1:9"}, {addr: evilText}}), 2); ok {
		t.Fatal("a table with the evil text as an address decodes")
	}
	if _, ok := decodeRegister(encodeRegister("[fe80::1%eth0]:5", "", 1)); !ok {
		t.Fatal("a registration with a zone is refused")
	}
	addr, magic, key, logs, wait := rank0Registered(t)
	c, ch := dialChallenge(t, addr)
	c.Write(rawHello(kindRegister, magic, &key, &ch, 1, 2, encodeRegister(evilText, "", 1)))
	logs.waitFor(t, "rank 1's registration is malformed")
	c, _, n, at := registerListening(t, addr) // a good one, that leaves once it has the table
	if st, _, err := readReply(c, magic, &key, labelReply, &n, maxTableLen(2)); err != nil || st != replyOK {
		t.Fatalf("registering rank 1: status %d, %v", st, err)
	}
	c.Close()
	err0 := wait()
	wantCode(t, err0, status.RemoteError, "rank 1 ("+at+") closed its connection")
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, l := range logs.lines {
		if strings.ContainsAny(l, "\x1b\x07\n") {
			t.Fatalf("log line %q", l)
		}
	}
}

// TestPeerTextAbortOtherSize: the abort of a rank of another communicator size names no rank
// number it claims beyond this communicator's.
func TestPeerTextAbortOtherSize(t *testing.T) {
	addr, magic, key, logs, wait := rank0Registered(t)
	c, ch := dialChallenge(t, addr)
	c.Write(rawHello(kindAbort, magic, &key, &ch, 5, 8, append([]byte{byte(status.RemoteError)}, evilText...)))
	err0 := wait()
	wantCode(t, err0, status.RemoteError, "of 8 ranks, not of this communicator's 2")
	if strings.Contains(err0.Error(), "rank 5") {
		t.Fatalf("rank 0's error blames rank 5 of a communicator of 2: %q", err0)
	}
	noRawPeerText(t, "rank 0's error", err0.Error())
	noRawLogs(t, logs)
}
