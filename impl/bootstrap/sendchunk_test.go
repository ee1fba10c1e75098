package bootstrap

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestSendTimeoutBoundsSilenceNotSize: a message that takes longer than the timeout to go out,
// to a peer that keeps taking data, arrives whole; a peer that takes nothing fails the Send
// with RemoteError after about the timeout, saying it took no data.
func TestSendTimeoutBoundsSilenceNotSize(t *testing.T) {
	c, peer := tcpPair(t)
	c.SetWriteBuffer(64 << 10) // little room in the kernel: the reader's pace is the message's
	peer.SetReadBuffer(64 << 10)
	const timeout = 3 * time.Second
	b := &Bootstrap{rank: 0, nranks: 2, timeout: timeout, out: make([]outConn, 2), conns: map[net.Conn]struct{}{}}
	b.out[1].c = c
	data := bytes.Repeat([]byte{0x5a}, maxP2PMessage)

	// The reader takes 256 KiB every 60 ms: 3.84 s for the 16 MiB (longer than the timeout, so
	// one deadline over the whole message fails), 0.24 s for each MiB (a twelfth of the
	// timeout: a reader slowed tenfold beside other tests on 2 CPUs, which is what a 1 s
	// timeout met, still keeps every MiB's deadline).
	got := make(chan []byte, 1)
	go func() {
		var msg []byte
		buf := make([]byte, 256<<10)
		for len(msg) < p2pHdrLen+len(data) {
			n, err := io.ReadFull(peer, buf[:min(len(buf), p2pHdrLen+len(data)-len(msg))])
			msg = append(msg, buf[:n]...)
			if err != nil {
				break
			}
			time.Sleep(60 * time.Millisecond)
		}
		got <- msg
	}()
	t0 := time.Now()
	if err := b.Send(1, 3, data); err != nil {
		t.Fatalf("a %d-byte send to a peer taking data all along failed after %v (timeout %v): %v", len(data), time.Since(t0), timeout, err)
	}
	if msg := <-got; len(msg) != p2pHdrLen+len(data) || !bytes.Equal(msg[p2pHdrLen:], data) {
		t.Fatalf("the peer got %d bytes, want %d with the data intact", len(msg), p2pHdrLen+len(data))
	}

	t0 = time.Now() // now nobody reads
	err := b.Send(1, 4, data)
	if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "took no data within") {
		t.Fatalf("a send to a peer that takes nothing: %v; want RemoteError saying it took no data", err)
	}
	if d := time.Since(t0); d > 10*timeout {
		t.Fatalf("a send to a peer that takes nothing failed after %v, timeout %v", d, timeout)
	}
}
